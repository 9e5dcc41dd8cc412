// Sessions: the list, newest first, with its status, agent, goal, cost, age
// and pending actions. Status and agent filter on the server
// (GET /v1/sessions?status=&agent=); the search box filters the sessions
// loaded so far by id, goal, input and agent; "Load more" follows the
// cursor. The loaded pages are refreshed every few seconds.

import { api, enc } from '../api.js';
import { h, replace, statusBadge, fmtCost, shortId, truncate, errorBox, time } from '../dom.js';
import { identity, byActor } from '../identity.js';
import { poll } from '../live.js';

const statuses = ['queued', 'running', 'requires_action', 'waiting', 'paused', 'idle', 'failed', 'cancelled'];
const pageSize = 50;

export async function sessionsPage(root, scope, query) {
  document.title = 'Sessions · Longhaul';
  const state = {
    status: query.get('status') || '',
    agent: query.get('agent') || '',
    q: query.get('q') || '',
    rows: [],
    next: null,
    wanted: pageSize, // how many sessions the refresh keeps loaded
  };

  const statusSel = h('select', { id: 'filter-status', 'aria-label': 'Status' },
    h('option', { value: '' }, 'Any status'),
    statuses.map((st) => h('option', { value: st, selected: st === state.status }, st.replace('_', ' '))));
  const agentSel = h('select', { id: 'filter-agent', 'aria-label': 'Agent' }, h('option', { value: '' }, 'Any agent'));
  const search = h('input', { type: 'search', id: 'search', placeholder: 'Search id, goal or input', value: state.q, 'aria-label': 'Search' });
  const count = h('p', { class: 'muted count' });
  const tbody = h('tbody');
  const more = h('button', { type: 'button', id: 'load-more', hidden: true }, 'Load more');
  const errors = h('div');

  root.append(
    h('div', { class: 'page-head' }, h('h1', null, 'Sessions')),
    h('div', { class: 'filters' }, statusSel, agentSel, search),
    errors,
    h('table', { class: 'table sessions', id: 'sessions-table' },
      h('thead', null, h('tr', null,
        h('th', null, 'Session'), h('th', null, 'Status'), h('th', null, 'Agent'),
        h('th', { class: 'num' }, 'Cost'), h('th', { class: 'num' }, 'Created'), h('th', { class: 'num' }, 'Pending'))),
      tbody),
    count, more);

  api.get('/v1/agents', undefined, { signal: scope.signal }).then((agents) => {
    const names = agents.data.map((a) => a.name);
    if (!names.includes('inline')) names.push('inline');
    if (state.agent && !names.includes(state.agent)) names.push(state.agent);
    for (const n of names) agentSel.append(h('option', { value: n, selected: n === state.agent }, n));
  }).catch(() => {});

  const syncURL = () => {
    const q = new URLSearchParams();
    if (state.status) q.set('status', state.status);
    if (state.agent) q.set('agent', state.agent);
    if (state.q) q.set('q', state.q);
    const s = q.toString();
    history.replaceState(null, '', `#/sessions${s ? '?' + s : ''}`);
  };

  const render = () => {
    const q = state.q.trim().toLowerCase();
    const shown = q
      ? state.rows.filter((s) => [s.id, s.goal, s.input, s.agent && s.agent.name].some((v) => v && String(v).toLowerCase().includes(q)))
      : state.rows;
    replace(tbody, shown.map(row));
    if (shown.length === 0) {
      tbody.append(h('tr', { class: 'empty' }, h('td', { colspan: 6 }, state.rows.length ? 'No loaded session matches the search.' : 'No sessions yet.')));
    }
    more.hidden = !state.next;
    replace(count, q
      ? `${shown.length} of ${state.rows.length} loaded sessions match${state.next ? '; load more to search further' : ''}.`
      : `${state.rows.length} session${state.rows.length === 1 ? '' : 's'}${state.next ? ' loaded' : ''}.`);
  };

  const load = async () => {
    const page = await api.get('/v1/sessions', {
      status: state.status, agent: state.agent, limit: Math.min(state.wanted, 500),
    }, { signal: scope.signal });
    state.rows = page.data;
    state.next = page.next_cursor;
    replace(errors);
    render();
  };

  const poller = poll(scope, load, {
    interval: 5000,
    onError: (err) => replace(errors, err ? errorBox(err) : null),
  });

  const refilter = () => {
    state.status = statusSel.value;
    state.agent = agentSel.value;
    state.wanted = pageSize;
    syncURL();
    poller.now();
  };
  statusSel.addEventListener('change', refilter);
  agentSel.addEventListener('change', refilter);
  search.addEventListener('input', () => {
    state.q = search.value;
    syncURL();
    render();
  });
  more.addEventListener('click', async () => {
    more.disabled = true;
    try {
      const page = await api.get('/v1/sessions', {
        status: state.status, agent: state.agent, limit: pageSize, cursor: state.next,
      }, { signal: scope.signal });
      const seen = new Set(state.rows.map((s) => s.id));
      state.rows.push(...page.data.filter((s) => !seen.has(s.id)));
      state.next = page.next_cursor;
      state.wanted = state.rows.length;
      render();
    } catch (err) {
      replace(errors, errorBox(err));
    } finally {
      more.disabled = false;
    }
  });
}

function row(s) {
  const pending = (s.required_actions || []).length;
  const href = `#/sessions/${enc(s.id)}`;
  return h('tr', { dataset: { sessionId: s.id, status: s.status } },
    h('td', { 'data-label': 'Session', class: 'session-cell' },
      h('a', { href, class: 'mono', title: s.id }, shortId(s.id)),
      s.parent_id ? h('span', { class: 'chip', title: `sub-agent of ${s.parent_id}` }, 'sub-agent') : null,
      // A key of one project sees only its own: the project is worth
      // naming only to a key that sees them all.
      s.project && seesEveryProject() ? h('span', { class: 'chip project', title: 'project' }, s.project) : null,
      h('div', { class: 'goal' }, truncate(s.goal || s.input || '', 160)),
      s.created_by ? h('div', { class: 'small created-by' }, byActor(s.created_by, 'started by ')) : null),
    h('td', { 'data-label': 'Status' }, statusBadge(s.status), s.stop_reason ? h('div', { class: 'muted small' }, s.stop_reason) : null,
      s.review ? h('div', { class: s.review.accepted ? 'ok small' : 'error small' }, s.review.accepted ? 'accepted' : 'rejected') : null),
    h('td', { 'data-label': 'Agent' }, s.agent ? `${s.agent.name} v${s.agent.version}` : ''),
    h('td', { 'data-label': 'Cost', class: 'num' }, fmtCost(s.usage && s.usage.cost_usd)),
    h('td', { 'data-label': 'Created', class: 'num' }, time(s.created_at)),
    h('td', { 'data-label': 'Pending', class: 'num' }, pending ? h('a', { href: '#/inbox', class: 'badge warn' }, String(pending)) : '0'));
}

function seesEveryProject() {
  const me = identity();
  return !!me && !me.project;
}
