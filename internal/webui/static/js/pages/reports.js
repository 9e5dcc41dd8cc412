// Reports: cost per accepted task, from GET /v1/reports/tasks. Totals over
// the window (acceptance rate, cost per accepted task, human asks per task,
// tasks that needed no extra input, retries), a chart of tasks and their
// verdicts per hour or day with the cost per accepted task drawn over it
// (inline SVG), approval fatigue per policy rule (how often it asked, the
// approve rate, the median time to decide, and the rules to relax or to
// tighten), and one row per task. It refreshes itself every few seconds.

import { api, enc } from '../api.js';
import { h, s, replace, fmtCost, fmtInt, fmtTokens, fmtPct, fmtDuration, fmtTime, fmtDate, fmtHourMinute, time, shortId, statusBadge, truncate, errorBox, chip } from '../dom.js';
import { poll } from '../live.js';

const windows = [['24h', 'Last 24 hours'], ['7d', 'Last 7 days'], ['30d', 'Last 30 days'], ['90d', 'Last 90 days']];
const pageSize = 50;

// What the API calls input_complete, in words a manager reads the same way
// in the column, the cells and the totals: the task was done from what it
// was given, without the agent stopping to ask a person for information.
const noExtraInput = 'Needed no extra input';
const noExtraInputHint = 'The agent did the task from what it was given: it never stopped to ask a person for information (approvals, in-doubt effects and budget decisions count under Asks, not here)';

export async function reportsPage(root, scope, query) {
  document.title = 'Reports · Longhaul';
  const state = {
    since: windows.some(([w]) => w === query.get('since')) ? query.get('since') : '7d',
    agent: query.get('agent') || '',
    subagents: query.get('include_subagents') === 'true',
    rows: [],
    next: null,
    wanted: pageSize,
  };

  const sinceSel = h('select', { id: 'report-since', 'aria-label': 'Window' },
    windows.map(([w, label]) => h('option', { value: w, selected: w === state.since }, label)));
  const agentSel = h('select', { id: 'report-agent', 'aria-label': 'Agent' }, h('option', { value: '' }, 'Every agent'));
  const subBox = h('input', { type: 'checkbox', id: 'report-subagents', checked: state.subagents });
  const totals = h('div', { class: 'totals', id: 'report-totals' });
  const chart = h('section', { class: 'card', id: 'report-chart' });
  const policies = h('section', { id: 'report-policies' });
  const tbody = h('tbody');
  const more = h('button', { type: 'button', hidden: true, id: 'report-more' }, 'Load more');
  const errors = h('div');
  const updated = h('p', { class: 'muted small' });

  root.append(
    h('div', { class: 'page-head' }, h('h1', null, 'Reports'), updated),
    h('div', { class: 'filters' }, sinceSel, agentSel,
      h('label', { class: 'inline' }, subBox, ' Sub-agents as tasks of their own')),
    errors, totals, chart, policies,
    h('h2', null, 'Tasks'),
    h('table', { class: 'table report', id: 'report-table' },
      h('thead', null, h('tr', null,
        ['Task', 'Status', noExtraInput, 'Last checkpoint', 'Asks', 'Retries', 'Accepted', 'Cost', 'Duration']
          .map((c, i) => h('th', { class: i >= 4 && i !== 6 ? 'num' : null, title: c === noExtraInput ? noExtraInputHint : null }, c)))),
      tbody),
    more);

  api.get('/v1/agents', undefined, { signal: scope.signal }).then((agents) => {
    const names = agents.data.map((a) => a.name);
    if (!names.includes('inline')) names.push('inline');
    if (state.agent && !names.includes(state.agent)) names.push(state.agent);
    for (const n of names) agentSel.append(h('option', { value: n, selected: n === state.agent }, n));
  }).catch(() => {});

  const params = (extra) => ({
    since: state.since,
    agent: state.agent,
    include_subagents: state.subagents ? 'true' : '',
    ...extra,
  });

  const load = async () => {
    let report;
    try {
      report = await api.get('/v1/reports/tasks', params({ limit: Math.min(state.wanted, 500) }), { signal: scope.signal });
    } catch (err) {
      // An older server has no route for reports (404), or a backend
      // without them (501): say so once instead of retrying.
      if (err.status === 501 || (err.status === 404 && /no route/i.test(err.message))) {
        replace(errors, h('p', { class: 'error' }, `This server does not serve task reports: ${err.message}`));
        return;
      }
      throw err;
    }
    state.rows = report.data;
    state.next = report.next_cursor;
    replace(errors);
    renderTotals(totals, report.totals);
    renderChart(chart, report);
    renderPolicies(policies, report);
    replace(tbody, state.rows.map(row));
    if (!state.rows.length) tbody.append(h('tr', { class: 'empty' }, h('td', { colspan: 9 }, 'No tasks in this window.')));
    more.hidden = !state.next;
    replace(updated, `${fmtInt(report.totals.tasks)} task${report.totals.tasks === 1 ? '' : 's'} from `, time(report.since), ' to ', time(report.until), ` · by ${report.bucket}`);
  };

  const poller = poll(scope, load, {
    interval: 10000,
    max: 60000,
    onError: (err) => replace(errors, err ? errorBox(err) : null),
  });

  const refilter = () => {
    state.since = sinceSel.value;
    state.agent = agentSel.value;
    state.subagents = subBox.checked;
    state.wanted = pageSize;
    const q = new URLSearchParams();
    if (state.since !== '7d') q.set('since', state.since);
    if (state.agent) q.set('agent', state.agent);
    if (state.subagents) q.set('include_subagents', 'true');
    const qs = q.toString();
    history.replaceState(null, '', `#/reports${qs ? '?' + qs : ''}`);
    poller.now();
  };
  sinceSel.addEventListener('change', refilter);
  agentSel.addEventListener('change', refilter);
  subBox.addEventListener('change', refilter);
  more.addEventListener('click', async () => {
    more.disabled = true;
    try {
      const page = await api.get('/v1/reports/tasks', params({ limit: pageSize, cursor: state.next }), { signal: scope.signal });
      const seen = new Set(state.rows.map((r) => r.id));
      const fresh = page.data.filter((r) => !seen.has(r.id));
      state.rows.push(...fresh);
      state.next = page.next_cursor;
      state.wanted = state.rows.length;
      tbody.append(...fresh.map(row));
      more.hidden = !state.next;
    } catch (err) {
      replace(errors, errorBox(err));
    } finally {
      more.disabled = false;
    }
  });
}

// renderPolicies shows, per policy rule that asked for an approval, how
// people decided: a rule approved every time it asked (at least
// relax_after_asks times) is a candidate to relax; one the trajectory
// monitor flagged, a candidate to tighten.
function renderPolicies(el, report) {
  const rules = report.totals.policies || [];
  if (!rules.length) {
    replace(el);
    return;
  }
  const flags = (p) => [
    p.relax ? chip('Relax?', 'ok') : null,
    p.tighten ? h('span', { title: p.tighten_reason || '' }, chip('Tighten?', 'warn')) : null,
    p.tighten && p.tighten_reason ? h('div', { class: 'muted small tighten-reason' }, p.tighten_reason) : null,
  ];
  replace(el,
    h('h2', null, 'Approvals by policy rule'),
    h('p', { class: 'muted small' }, `A rule approved every time over at least ${fmtInt(report.relax_after_asks)} asks is a candidate to relax: each ask costs a person's attention. A rule that let run a call the trajectory monitor flagged is a candidate to tighten.`),
    h('table', { class: 'table report-policies' },
      h('thead', null, h('tr', null,
        ['Rule', 'Asks', 'Decided', 'Approve rate', 'Median time to decide', '']
          .map((c, i) => h('th', { class: i >= 1 && i <= 4 ? 'num' : null }, c)))),
      h('tbody', null, rules.map((p) => h('tr', { dataset: { rule: p.rule } },
        h('td', null, p.rule),
        h('td', { class: 'num' }, fmtInt(p.asks)),
        h('td', { class: 'num' }, fmtInt(p.decided)),
        h('td', { class: 'num' }, fmtPct(p.approve_rate)),
        h('td', { class: 'num' }, p.median_decide_seconds === null ? '—' : fmtDuration(p.median_decide_seconds * 1000)),
        h('td', null, flags(p)))))));
}

function total(name, value, title, id) {
  return h('div', { class: 'total', title, dataset: { total: id } }, h('div', { class: 'value' }, value), h('div', { class: 'name' }, name));
}

function renderTotals(el, t) {
  replace(el,
    total('Acceptance rate', fmtPct(t.acceptance_rate), 'Accepted ÷ reviewed tasks', 'acceptance_rate'),
    total('Cost per accepted task', t.cost_per_accepted_task_usd === null ? '—' : fmtCost(t.cost_per_accepted_task_usd),
      'What every task of the window cost ÷ accepted tasks: failed, rejected and unreviewed attempts count too', 'cost_per_accepted_task'),
    total('Human asks per task', t.asks_per_task === null ? '—' : t.asks_per_task.toFixed(2),
      'Approvals, questions, in-doubt effects and budget decisions ÷ tasks', 'asks_per_task'),
    total('Accepted / reviewed', `${fmtInt(t.accepted)} / ${fmtInt(t.reviewed)}`, `${fmtInt(t.rejected)} rejected`, 'accepted'),
    total('Tasks', fmtInt(t.tasks), Object.entries(t.by_status || {}).map(([k, v]) => `${k}: ${v}`).join(', '), 'tasks'),
    total('Total cost', fmtCost(t.cost_usd), `${fmtTokens(t.usage.input_tokens + t.usage.output_tokens, t.usage)} tokens${t.usage.estimated ? ' (estimated)' : ''}, ${fmtInt(t.usage.model_calls)} model calls${t.monitor_cost_usd ? `, model monitor ${fmtCost(t.monitor_cost_usd)}` : ''}`, 'cost'),
    total(noExtraInput, t.tasks ? fmtPct(t.input_complete / t.tasks) : '—', `Share of tasks. ${noExtraInputHint}`, 'input_complete'),
    total('Retries', fmtInt(t.retries), 'Failed model and tool attempts that were tried again', 'retries'));
}

// renderChart draws the series: stacked bars of tasks per bucket (accepted,
// rejected, not reviewed) on the left axis, and the cost per accepted task
// of each bucket as a line on the right axis.
export function renderChart(el, report) {
  const series = report.series || [];
  const W = 900;
  const H = 260;
  const m = { l: 40, r: 64, t: 14, b: 34 };
  const iw = W - m.l - m.r;
  const ih = H - m.t - m.b;
  const maxTasks = Math.max(1, ...series.map((b) => b.tasks));
  const cpa = series.map((b) => (b.accepted > 0 ? b.cost_usd / b.accepted : null));
  const maxCost = Math.max(0, ...cpa.filter((v) => v !== null));
  const n = Math.max(1, series.length);
  const bw = iw / n;
  const y = (v) => m.t + ih - (v / maxTasks) * ih;
  const yc = (v) => m.t + ih - (maxCost > 0 ? (v / maxCost) * ih : 0);
  const fmtBucket = (t) => {
    return report.bucket === 'hour' ? fmtHourMinute(t) : fmtDate(t);
  };

  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': 'Tasks and cost per accepted task over time' });
  // Grid and the left axis (tasks).
  const ticks = niceTicks(maxTasks);
  for (const v of ticks) {
    svg.append(s('line', { class: 'grid', x1: m.l, x2: m.l + iw, y1: y(v), y2: y(v) }),
      s('text', { x: m.l - 6, y: y(v) + 4, 'text-anchor': 'end' }, String(v)));
  }
  svg.append(s('line', { class: 'axis', x1: m.l, x2: m.l + iw, y1: m.t + ih, y2: m.t + ih }));
  // Bars.
  const labelEvery = Math.max(1, Math.ceil(n / 12));
  series.forEach((b, i) => {
    const x = m.l + i * bw + bw * 0.15;
    const w = Math.max(1, bw * 0.7);
    const rejected = b.reviewed - b.accepted;
    const other = b.tasks - b.reviewed;
    let base = 0;
    const g = s('g', { dataset: { bucket: b.start } },
      s('title', null, `${fmtTime(b.start)}: ${b.tasks} tasks, ${b.accepted} accepted, ${rejected} rejected, ${other} not reviewed; cost ${fmtCost(b.cost_usd)}${cpa[i] !== null ? `, ${fmtCost(cpa[i])} per accepted task` : ''}`));
    for (const [v, cls] of [[b.accepted, 'bar-accepted'], [rejected, 'bar-rejected'], [other, 'bar-other']]) {
      if (v <= 0) continue;
      g.append(s('rect', { class: cls, x, width: w, y: y(base + v), height: y(base) - y(base + v) }));
      base += v;
    }
    // An invisible full-height target so the title shows over empty buckets.
    g.append(s('rect', { x: m.l + i * bw, width: bw, y: m.t, height: ih, fill: 'transparent' }));
    svg.append(g);
    if (i % labelEvery === 0) {
      svg.append(s('text', { x: m.l + i * bw + bw / 2, y: H - m.b + 16, 'text-anchor': 'middle' }, fmtBucket(b.start)));
    }
  });
  // The cost per accepted task, on the right axis.
  if (maxCost > 0) {
    for (const v of [0, maxCost / 2, maxCost]) {
      svg.append(s('text', { x: m.l + iw + 6, y: yc(v) + 4 }, fmtCost(v)));
    }
    // Segments join neighbouring buckets that both have a value; a bucket
    // without an accepted task leaves a gap.
    let d = '';
    const dots = [];
    cpa.forEach((v, i) => {
      if (v === null) return;
      const x = m.l + i * bw + bw / 2;
      d += `${i > 0 && cpa[i - 1] !== null ? 'L' : 'M'}${x.toFixed(1)},${yc(v).toFixed(1)}`;
      dots.push(s('circle', { class: 'dot-cost', cx: x, cy: yc(v), r: 3 }));
    });
    svg.append(s('path', { class: 'line-cost', d }), ...dots);
  }
  replace(el,
    h('h2', null, 'Over time'),
    svg,
    h('p', { class: 'legend' },
      h('span', null, h('span', { class: 'sw accepted' }), 'accepted'),
      h('span', null, h('span', { class: 'sw rejected' }), 'rejected'),
      h('span', null, h('span', { class: 'sw other' }), 'not reviewed'),
      h('span', null, h('span', { class: 'sw cost' }), 'cost per accepted task (right axis)')));
}

function niceTicks(max) {
  const step = Math.max(1, Math.ceil(max / 4));
  const out = [];
  for (let v = 0; v <= max; v += step) out.push(v);
  if (out[out.length - 1] < max) out.push(out[out.length - 1] + step);
  return out;
}

function row(t) {
  const cp = t.last_checkpoint;
  return h('tr', { dataset: { taskId: t.id } },
    h('td', { 'data-label': 'Task', class: 'session-cell' },
      h('a', { href: `#/sessions/${enc(t.id)}`, class: 'mono', title: t.id }, shortId(t.id)),
      ' ', chip(`${t.agent.name} v${t.agent.version}`),
      h('div', { class: 'goal' }, truncate(t.goal || '', 140))),
    h('td', { 'data-label': 'Status' }, statusBadge(t.status), t.stop_reason ? h('div', { class: 'small muted' }, t.stop_reason) : null),
    h('td', { 'data-label': noExtraInput, class: 'input-cell', dataset: { complete: String(t.input_complete) } },
      t.input_complete ? h('span', { title: noExtraInputHint }, 'yes')
        : h('span', { class: 'error', title: 'No: the agent had to stop and ask a person for information' }, 'no: asked a person')),
    h('td', { 'data-label': 'Last checkpoint', class: 'small' }, cp ? [cp.name, ' ', h('span', { class: 'muted' }, `(${cp.kind}, `, time(cp.at), ')')] : '—'),
    h('td', { 'data-label': 'Asks', class: 'num', title: Object.entries(t.asks_by_type || {}).map(([k, v]) => `${k}: ${v}`).join(', ') }, fmtInt(t.asks)),
    h('td', { 'data-label': 'Retries', class: 'num' }, fmtInt(t.retries)),
    h('td', { 'data-label': 'Accepted', class: 'accepted-cell', dataset: { accepted: t.accepted === null ? '' : String(t.accepted) } },
      t.accepted === null ? h('span', { class: 'muted' }, 'not reviewed')
        : t.accepted ? h('span', { class: 'ok' }, '✓ accepted') : h('span', { class: 'error' }, '✗ rejected'),
      t.review && t.review.note ? h('div', { class: 'small muted' }, truncate(t.review.note, 80)) : null),
    h('td', { 'data-label': 'Cost', class: 'num', title: `model ${fmtCost(t.model_cost_usd)}, sub-agents ${fmtCost(t.subagent_cost_usd)}${t.monitor_cost_usd ? `; model monitor ${fmtCost(t.monitor_cost_usd)} of it` : ''}` }, fmtCost(t.cost_usd)),
    h('td', { 'data-label': 'Duration', class: 'num' }, fmtDuration(t.duration_seconds * 1000), h('div', { class: 'small muted' }, time(t.created_at))));
}
