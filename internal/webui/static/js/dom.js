// DOM building and formatting. Everything shown is added as text nodes or
// attributes, never parsed as HTML, so data from the API (tool outputs,
// model text, artifact names) can never become markup.

const svgNS = 'http://www.w3.org/2000/svg';

function build(el, attrs, children) {
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
      else if (k === 'text') el.textContent = String(v);
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'value' && 'value' in el) el.value = v;
      else if (k === 'checked' || k === 'disabled' || k === 'hidden' || k === 'open' || k === 'selected') {
        el[k] = Boolean(v);
      } else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// h makes an HTML element: h('a', {href: '#/x', class: 'link'}, 'text', child).
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

// s makes an SVG element.
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(svgNS, tag), attrs, children);
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function replace(el, ...children) {
  clear(el);
  append(el, children);
  return el;
}

// --- formatting ---

export function fmtCost(usd) {
  const v = Number(usd) || 0;
  if (v === 0) return '$0';
  if (Math.abs(v) < 0.01) return '$' + v.toPrecision(2);
  if (Math.abs(v) < 100) return '$' + v.toFixed(2);
  return '$' + Math.round(v).toLocaleString('en-US');
}

export function fmtInt(n) {
  return (Number(n) || 0).toLocaleString('en-US');
}

// fmtTokens is a token count, "≈" before it when the usage it comes from
// includes an estimate (the provider reported none: usage.estimated).
export function fmtTokens(n, u) {
  return (u && u.estimated ? '≈' : '') + fmtInt(n);
}

export function fmtPct(x) {
  if (x === null || x === undefined || Number.isNaN(x)) return '—';
  return (x * 100).toFixed(x === 1 || x === 0 ? 0 : 1) + '%';
}

export function fmtBytes(n) {
  const v = Number(n) || 0;
  if (v < 1024) return `${v} B`;
  if (v < 1024 * 1024) return `${(v / 1024).toFixed(1)} KiB`;
  if (v < 1024 ** 3) return `${(v / 1024 / 1024).toFixed(1)} MiB`;
  return `${(v / 1024 ** 3).toFixed(1)} GiB`;
}

export function fmtDuration(ms) {
  const v = Math.max(0, Number(ms) || 0);
  if (v < 1000) return `${Math.round(v)} ms`;
  if (v < 60000) return `${(v / 1000).toFixed(v < 10000 ? 2 : 1)} s`;
  const m = Math.floor(v / 60000);
  if (m < 60) return `${m}m ${Math.floor((v % 60000) / 1000)}s`;
  const hrs = Math.floor(m / 60);
  if (hrs < 48) return `${hrs}h ${m % 60}m`;
  return `${Math.floor(hrs / 24)}d ${hrs % 24}h`;
}

// fmtAge is how long ago t was: "12s", "5m", "3h", "2d".
export function fmtAge(t, now = Date.now()) {
  const d = Math.max(0, now - new Date(t).getTime()) / 1000;
  if (d < 60) return `${Math.floor(d)}s`;
  if (d < 3600) return `${Math.floor(d / 60)}m`;
  if (d < 86400 * 2) return `${Math.floor(d / 3600)}h`;
  return `${Math.floor(d / 86400)}d`;
}

// The one way the UI writes a point in time: the viewer's local time as
// 2026-03-09 14:05:09, whatever the browser's locale, so that dates read
// the same on every page and sort as text; the exact UTC instant and how
// long ago it was are on hover (time()). Relative ages alone ("5m") are
// not used for points in time: two formats side by side read as two
// different things.
export function fmtTime(t) {
  if (!t) return '';
  const d = t instanceof Date ? t : new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  return `${fmtDate(d)} ${fmtHourMinute(d)}:${pad2(d.getSeconds())}`;
}

// fmtDate is the date part of fmtTime (a chart's day buckets).
export function fmtDate(t) {
  const d = t instanceof Date ? t : new Date(t);
  return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())}`;
}

// fmtHourMinute is the time of day of fmtTime without seconds (a chart's
// hour buckets).
export function fmtHourMinute(t) {
  const d = t instanceof Date ? t : new Date(t);
  return `${pad2(d.getHours())}:${pad2(d.getMinutes())}`;
}

function pad2(n) {
  return String(n).padStart(2, '0');
}

// time renders a point in time as a <time> in fmtTime's format, with the
// exact UTC instant and its age on hover. Every date the UI shows goes
// through here.
export function time(t) {
  if (!t) return '';
  const d = t instanceof Date ? t : new Date(t);
  if (Number.isNaN(d.getTime())) return h('span', null, String(t));
  const iso = d.toISOString();
  const now = Date.now();
  const when = d.getTime() > now ? `in ${fmtAge(now, d.getTime())}` : `${fmtAge(d, now)} ago`;
  return h('time', { datetime: iso, title: `${iso} (${when})` }, fmtTime(d));
}

export function truncate(str, n) {
  const v = String(str ?? '');
  return v.length > n ? v.slice(0, n - 1) + '…' : v;
}

// shortId keeps a prefixed id recognisable in little space: ses_01m8…rtmd.
export function shortId(id) {
  const v = String(id || '');
  if (v.length <= 16) return v;
  const cut = v.indexOf('_') + 1;
  return v.slice(0, cut + 6) + '…' + v.slice(-4);
}

export function pretty(v) {
  if (v === undefined) return '';
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
}

// code is a block of preformatted text (JSON, outputs).
export function code(text, cls) {
  return h('pre', { class: ['code', cls] }, h('code', null, text));
}

export function statusBadge(status) {
  return h('span', { class: `status status-${status}`, dataset: { status } }, String(status || '').replace('_', ' '));
}

export function chip(text, cls) {
  return h('span', { class: ['chip', cls] }, text);
}

// errorBox shows an error where the action was tried; APIError names the
// field at fault.
export function errorBox(err) {
  const msg = err && typeof err.describe === 'function' ? err.describe() : String(err && err.message ? err.message : err);
  return h('p', { class: 'error', role: 'alert' }, msg);
}

// busy disables a button while promise runs, and returns its result.
export async function busy(button, promise) {
  const was = button.disabled;
  button.disabled = true;
  button.classList.add('busy');
  try {
    return await promise;
  } finally {
    button.disabled = was;
    button.classList.remove('busy');
  }
}

// field wraps a control with its label.
export function field(label, control, hint) {
  return h('label', { class: 'field' }, h('span', { class: 'field-label' }, label), control,
    hint ? h('span', { class: 'hint' }, hint) : null);
}

// kv renders a definition list from [term, value] pairs, skipping empty
// values.
export function kv(pairs) {
  const dl = h('dl', { class: 'kv' });
  for (const [k, v] of pairs) {
    if (v === undefined || v === null || v === '' || (Array.isArray(v) && v.length === 0)) continue;
    dl.append(h('dt', null, k), h('dd', null, v));
  }
  return dl;
}
