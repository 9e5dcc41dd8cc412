// The trace of a session (GET /v1/sessions/{id}/trace) as a waterfall: one
// row per span, indented under its parent, its bar placed on the session's
// time axis. Open spans run to the trace's as_of. A click on a row shows
// the span's attributes and usage.

import { h, replace, code, pretty, fmtCost, fmtDuration, fmtTokens } from './dom.js';

function flatten(spans, depth, out) {
  for (const sp of spans || []) {
    out.push({ sp, depth });
    flatten(sp.children, depth + 1, out);
  }
  return out;
}

function spanLabel(sp) {
  const u = sp.usage;
  const parts = [fmtDuration(sp.duration_ms)];
  if (u && (u.input_tokens || u.output_tokens)) parts.push(`${fmtTokens(u.input_tokens + u.output_tokens, u)} tok`);
  if (u && u.cost_usd) parts.push(fmtCost(u.cost_usd));
  const findings = (sp.attributes && sp.attributes.findings) || [];
  if (findings.length) parts.push(`monitor: ${findings.length} finding${findings.length > 1 ? 's' : ''}`);
  return parts.join(' · ');
}

// waterfall renders trace into a new element.
export function waterfall(trace) {
  const rows = flatten(trace.spans, 0, []);
  if (rows.length === 0) return h('p', { class: 'muted' }, 'No spans yet: the session has not started a turn.');
  const asOf = new Date(trace.as_of).getTime();
  let t0 = Infinity;
  let t1 = -Infinity;
  for (const { sp } of rows) {
    const s = new Date(sp.start).getTime();
    const e = sp.end ? new Date(sp.end).getTime() : Math.max(asOf, s);
    t0 = Math.min(t0, s);
    t1 = Math.max(t1, e);
  }
  const total = Math.max(1, t1 - t0);

  const body = h('div', { class: 'wf-rows', role: 'list' });
  const detail = h('div', { class: 'wf-detail' });
  for (const { sp, depth } of rows) {
    const s = new Date(sp.start).getTime();
    const e = sp.end ? new Date(sp.end).getTime() : Math.max(asOf, s);
    const bar = h('span', { class: ['wf-bar', `kind-${sp.kind}`, `st-${sp.status}`], title: `${sp.name}: ${fmtDuration(sp.duration_ms)} (${sp.status})` });
    // Positions are set through the CSSOM, which the page's CSP allows
    // (it forbids style attributes in markup, not style properties).
    bar.style.left = `${((s - t0) / total) * 100}%`;
    bar.style.width = `${Math.max(((e - s) / total) * 100, 0.4)}%`;
    const name = h('span', { class: 'wf-name' }, h('span', { class: `wf-kind kind-${sp.kind}` }, sp.kind.replace('_', ' ')), ' ', sp.name);
    name.style.paddingLeft = `${depth * 14}px`;
    const row = h('button', {
      type: 'button', class: ['wf-row', sp.status === 'error' && 'wf-error'], role: 'listitem',
      dataset: { kind: sp.kind, status: sp.status, spanId: sp.id },
    }, name, h('span', { class: 'wf-track' }, bar), h('span', { class: 'wf-dur' }, spanLabel(sp)));
    row.addEventListener('click', () => {
      for (const r of body.querySelectorAll('.wf-row.selected')) r.classList.remove('selected');
      row.classList.add('selected');
      const { children, ...rest } = sp;
      replace(detail, h('h4', null, sp.name), sp.error ? h('p', { class: 'error' }, sp.error) : null, code(pretty(rest)));
    });
    body.append(row);
  }
  const axis = h('div', { class: 'wf-axis' },
    h('span', null, '0'), h('span', null, fmtDuration(total / 2)), h('span', null, fmtDuration(total)));
  const u = trace.usage || {};
  return h('div', { class: 'waterfall', id: 'waterfall' },
    h('p', { class: 'muted' }, `${rows.length} spans over ${fmtDuration(total)} · ${fmtTokens((u.input_tokens || 0) + (u.output_tokens || 0), u)} tokens${u.estimated ? ' (estimated)' : ''} · ${fmtCost(u.cost_usd)} · as of event #${trace.last_event_seq}`),
    h('div', { class: 'wf-head' }, h('span', null, 'Span'), axis, h('span', null, 'Duration')),
    body, detail);
}
