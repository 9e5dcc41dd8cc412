// Inbox: every pending required action across sessions
// (GET /v1/actions?status=pending, oldest first), each a card with its
// decision form.
//
// How it stays live: it polls the list every 2 seconds while the tab is
// visible, backing off to 30 seconds while requests fail and while the tab
// is hidden, and at once after a decision here or when the tab is shown
// again. Polling was chosen over following every session's event stream:
// the server has no stream across sessions, one stream per pending session
// would not scale to a busy inbox, and a poll cannot miss anything (each
// answer is the whole pending list), whether the server restarted or a
// connection dropped. A decision made anywhere disappears from every open
// inbox within one poll; a card that someone is editing stays until it is
// decided, then says what happened and who decided it.
//
// Below the pending cards, "Recently decided" lists the newest decisions
// across sessions, each with its actor ("approved by alice (approver)"),
// polled more slowly (every 15 seconds, and at once after a decision
// here): the inbox lists oldest first, so it reads up to 1000 decided
// actions to find the newest.

import { api, listAll, enc } from '../api.js';
import { h, replace, errorBox, time } from '../dom.js';
import { poll } from '../live.js';
import { actionCard, setCardSession, decidedRow } from '../actions.js';
import { setInboxCount } from '../badge.js';
import { can, identity } from '../identity.js';

const types = [
  ['', 'All'],
  ['approval', 'Approvals'],
  ['function_call', 'Function calls'],
  ['input', 'Questions'],
  ['in_doubt', 'In doubt'],
  ['budget', 'Budgets'],
  ['browser_permission', 'Site permissions'],
];

export async function inboxPage(root, scope, query) {
  document.title = 'Inbox · Longhaul';
  let filter = types.some(([t]) => t === query.get('type')) ? query.get('type') : '';
  const cards = new Map(); // action id -> card
  const sessions = new Map(); // session id -> Promise<session>
  const list = h('div', { class: 'inbox-list', id: 'inbox-list' });
  const empty = h('p', { class: 'muted empty', id: 'inbox-empty', hidden: true }, 'Nothing is waiting for a person.');
  const status = h('p', { class: 'muted small', id: 'inbox-status' });
  const errors = h('div');
  const chips = h('div', { class: 'filters chips', role: 'group', 'aria-label': 'Type' });
  const decided = h('section', { class: 'decided-list', id: 'inbox-decided' });

  for (const [t, label] of types) {
    const b = h('button', { type: 'button', class: 'chip-btn', dataset: { type: t }, 'aria-pressed': String(t === filter) },
      label, ' ', h('span', { class: 'chip-count' }));
    b.addEventListener('click', () => {
      filter = t;
      for (const c of chips.children) c.setAttribute('aria-pressed', String(c.dataset.type === t));
      history.replaceState(null, '', `#/inbox${t ? '?type=' + t : ''}`);
      applyFilter();
    });
    chips.append(b);
  }
  const me = identity();
  const readOnly = can('DecideAction') ? null
    : h('p', { class: 'role-note', id: 'inbox-read-only' }, `Your role${me ? ` (${me.role})` : ''} may not decide actions: the inbox shows what waits, for someone who may.`);
  // (Node.append writes a null as the text "null": leave it out instead.)
  root.append(...[h('div', { class: 'page-head' }, h('h1', null, 'Inbox'), status), readOnly, chips, errors, empty, list, decided].filter(Boolean));

  const sessionOf = (id) => {
    if (!sessions.has(id)) {
      sessions.set(id, api.get(`/v1/sessions/${enc(id)}`, undefined, { signal: scope.signal }).catch(() => null));
    }
    return sessions.get(id);
  };

  // The counts come from the cards, so that they say what the page shows:
  // the status line counts what the filter lets through (and of how many),
  // each filter chip what it would show. A card decided here but not yet
  // gone counts no more.
  let truncated = false;
  let updatedAt = null;
  const applyFilter = () => {
    let shown = 0;
    let pending = 0;
    const byType = new Map();
    for (const card of cards.values()) {
      const visible = !filter || card.dataset.type === filter;
      card.hidden = !visible;
      if (card.classList.contains('decided')) continue;
      pending++;
      byType.set(card.dataset.type, (byType.get(card.dataset.type) || 0) + 1);
      if (visible) shown++;
    }
    const more = truncated ? '+' : '';
    for (const chip of chips.children) {
      const n = chip.dataset.type ? byType.get(chip.dataset.type) || 0 : pending;
      replace(chip.querySelector('.chip-count'), `${n}${more}`);
    }
    const label = (types.find(([t]) => t === filter) || types[0])[1];
    empty.hidden = shown > 0;
    replace(empty, filter
      ? `Nothing under “${label}” is waiting for a person${pending ? ` (${pending}${more} pending under All)` : ''}.`
      : 'Nothing is waiting for a person.');
    replace(status, filter ? `${label}: ${shown}${more} of ${pending}${more} pending` : `${pending}${more} pending`,
      updatedAt ? [' · updated ', time(updatedAt)] : null);
    status.dataset.shown = String(shown);
  };

  const load = async () => {
    const page = await listAll('/v1/actions', { status: 'pending', limit: 200 }, { max: 1000, signal: scope.signal });
    const { data } = page;
    truncated = page.truncated;
    const ids = new Set(data.map((a) => a.id));
    for (const [id, card] of cards) {
      if (ids.has(id)) continue;
      if (card.classList.contains('decided')) {
        // Decided here: leave its confirmation for a moment.
        if (!card.dataset.goneAt) card.dataset.goneAt = String(Date.now());
        else if (Date.now() - Number(card.dataset.goneAt) > 4000) {
          card.remove();
          cards.delete(id);
        }
        continue;
      }
      // Decided elsewhere (another person, the CLI, an expiry).
      card.remove();
      cards.delete(id);
    }
    for (const a of data) {
      if (cards.has(a.id)) continue;
      const sessionPromise = sessionOf(a.session_id);
      const card = actionCard(a, { sessionPromise, onDecided: () => { poller.now(); decidedPoller.now(); } });
      sessionPromise.then((s) => s && setCardSession(card, s));
      cards.set(a.id, card);
      list.append(card);
    }
    setInboxCount(data.length);
    updatedAt = new Date();
    replace(errors);
    applyFilter();
  };

  const poller = poll(scope, load, {
    interval: 2000,
    max: 30000,
    onError: (err) => replace(errors, err ? errorBox(err) : null),
  });

  const loadDecided = async () => {
    const { data, truncated } = await listAll('/v1/actions', { status: 'resolved', limit: 200 }, { max: 1000, signal: scope.signal });
    const newest = [...data].sort((a, b) => String(b.resolved_at || '').localeCompare(String(a.resolved_at || ''))).slice(0, recentDecided);
    replace(decided, newest.length ? [
      h('h2', null, 'Recently decided'),
      truncated ? h('p', { class: 'muted small' }, 'Among the first 1000 decided actions.') : null,
      h('ul', { class: 'plain decided-rows' }, newest.map((a) => decidedRow(a))),
    ] : null);
  };
  const decidedPoller = poll(scope, loadDecided, { interval: 15000, max: 60000 });
}

// How many decided actions the inbox lists.
const recentDecided = 20;
