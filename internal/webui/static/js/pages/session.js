// Session: what the session is for and where it stands (status, budget
// meters, review), what it needs (its pending actions, with their forms),
// what a person can do (cancel, steer the running turn, pause and resume,
// a follow-up turn, review the result), and
// tabs for the live timeline, turns, the effect ledger, checkpoints (fork
// from one), artifacts (preview, download), the workspace's files (browse,
// download, and upload or edit while the session is parked: files.js), the
// trace and the sub-agents. The controls a role may not use are not shown
// (identity.js); decided actions name who decided them.
// The timeline is the event stream; every event that changes the session
// refreshes the rest, so the page is live without a reload.

import { api, enc, newKey, APIError } from '../api.js';
import { h, replace, statusBadge, fmtCost, fmtInt, fmtTokens, fmtDuration, fmtBytes, time, shortId, truncate, errorBox, busy, kv, chip, code, pretty } from '../dom.js';
import { poll, debounce } from '../live.js';
import { startTimeline } from '../timeline.js';
import { actionCard, decidedRow } from '../actions.js';
import { can, byActor } from '../identity.js';
import { waterfall } from '../waterfall.js';
import { artifactsTab } from './artifacts.js';
import { filesTab } from './files.js';
import { refreshInboxCount } from '../badge.js';
import { steerForm } from '../steer.js';
import { pauseControl, pauseChip, pausedSeconds } from '../pause.js';

const terminal = new Set(['idle', 'failed', 'cancelled']);

// Events after which the session (and the open tab) is read again.
const refreshOn = /^(session\.|turn\.|action\.|artifact\.|checkpoint\.|budget\.|effect\.|tool\.(started|completed|failed)|subagent\.|model\.responded|context\.compacted|workspace\.)/;

const tabs = [
  ['timeline', 'Timeline'],
  ['turns', 'Turns'],
  ['effects', 'Effects'],
  ['checkpoints', 'Checkpoints'],
  ['artifacts', 'Artifacts'],
  ['files', 'Files'],
  ['trace', 'Trace'],
  ['subagents', 'Sub-agents'],
];

export async function sessionPage(root, scope, id, query) {
  document.title = `${shortId(id)} · Longhaul`;
  const path = `/v1/sessions/${enc(id)}`;
  const head = h('div', { class: 'page-head' });
  const errors = h('div');
  const overview = h('section', { class: 'card overview' });
  const meters = h('section', { class: 'card meters', id: 'budget' });
  const controls = h('section', { class: 'card controls', id: 'controls' });
  const pending = h('section', { class: 'pending', id: 'pending-actions' });
  const decided = h('section', { class: 'decided-list', id: 'decided-actions' });
  const tabBar = h('div', { class: 'tabs', role: 'tablist' });
  const panels = {};
  let current = tabs.some(([t]) => t === query.get('tab')) ? query.get('tab') : 'timeline';
  let session = null;

  // The page is shown once the session has been read: a session that
  // cannot be (an unknown id, a failing server) shows its error alone,
  // never empty cards under it.
  const body = h('div', { class: 'session-body', hidden: true },
    head, h('div', { class: 'grid-2' }, overview, meters), pending, controls, decided, tabBar);
  root.append(errors, body);
  for (const [name, label] of tabs) {
    const b = h('button', { type: 'button', role: 'tab', class: 'tab', dataset: { tab: name }, 'aria-selected': String(name === current) }, label);
    b.addEventListener('click', () => show(name));
    tabBar.append(b);
    panels[name] = h('section', { class: 'tab-panel', id: `tab-${name}`, role: 'tabpanel', hidden: name !== current });
    body.append(panels[name]);
  }

  const loaders = {
    turns: loadTurns,
    effects: loadEffects,
    checkpoints: loadCheckpoints,
    artifacts: (el) => artifactsTab(el, scope, id, () => session),
    files: (el) => filesTab(el, scope, id, () => session),
    trace: loadTrace,
    subagents: async (el) => renderSubagents(el, session),
  };

  function show(name) {
    current = name;
    for (const b of tabBar.children) b.setAttribute('aria-selected', String(b.dataset.tab === name));
    for (const [n, el] of Object.entries(panels)) el.hidden = n !== name;
    history.replaceState(null, '', `#/sessions/${enc(id)}${name === 'timeline' ? '' : '?tab=' + name}`);
    loadTab();
  }

  async function loadTab() {
    const load = loaders[current];
    if (!load) return;
    try {
      await load(panels[current]);
    } catch (err) {
      if (err.name !== 'AbortError') replace(panels[current], errorBox(err));
    }
  }

  // --- the session ---

  const cards = new Map(); // action id -> card, kept while pending so forms survive refreshes

  async function refresh() {
    session = await api.get(path, { include: 'subagents' }, { signal: scope.signal });
    replace(errors);
    if (body.hidden) {
      body.hidden = false;
      followTimeline();
    }
    renderHead();
    renderOverview();
    renderMeters();
    renderControls();
    renderPending();
    if (current !== 'timeline') loadTab();
    await loadDecided();
  }

  // The session's decided actions, newest first, each with who decided it
  // (resolved_by) and how. Not a sub-agent's: its own page lists them.
  async function loadDecided() {
    const l = await api.get(`${path}/actions`, { status: 'resolved' }, { signal: scope.signal });
    const rows = [...l.data].sort((a, b) => String(b.resolved_at || '').localeCompare(String(a.resolved_at || '')));
    replace(decided, rows.length ? [h('h2', null, `Decided (${rows.length})`),
      h('ul', { class: 'plain decided-rows' }, rows.map((a) => decidedRow(a, { showSession: false })))] : null);
  }

  function renderHead() {
    replace(head,
      h('h1', null, 'Session ', h('span', { class: 'mono id' }, session.id)),
      h('div', { class: 'head-status' }, statusBadge(session.status),
        session.stop_reason ? chip(session.stop_reason, 'warn') : null,
        session.cancel_requested ? chip('cancel requested', 'warn') : null,
        pauseChip(session),
        session.review ? chip(session.review.accepted ? 'accepted' : 'rejected', session.review.accepted ? 'ok' : 'error') : null));
  }

  function renderOverview() {
    const s = session;
    const u = s.usage || {};
    replace(overview,
      h('h2', null, 'Goal'),
      h('p', { class: 'goal-text' }, s.goal || truncate(s.input, 600) || '—'),
      kv([
        ['Input', s.goal && s.input ? truncate(s.input, 600) : ''],
        ['Agent', s.agent ? `${s.agent.name} v${s.agent.version}` : ''],
        ['Project', s.project || ''],
        ['Created by', byActor(s.created_by, '') || ''],
        ['Constraints', s.constraints && s.constraints.length ? h('ul', { class: 'plain' }, s.constraints.map((c) => h('li', null, c))) : ''],
        ['Acceptance criteria', s.acceptance_criteria && s.acceptance_criteria.length ? h('ul', { class: 'plain' }, s.acceptance_criteria.map((c) => h('li', null, c))) : ''],
        ['Usage', `${fmtCost(u.cost_usd)}${u.monitor_cost_usd ? ` (model monitor ${fmtCost(u.monitor_cost_usd)})` : ''} · ${fmtTokens((u.input_tokens || 0) + (u.output_tokens || 0), u)} tokens${u.estimated ? ' (estimated)' : ''} · ${fmtInt(u.model_calls)} model calls · ${fmtInt(u.tool_calls)} tool calls`],
        ['Parent', s.parent_id ? h('a', { href: `#/sessions/${enc(s.parent_id)}`, class: 'mono' }, s.parent_id) : ''],
        ['Forked from', s.forked_from ? h('a', { href: `#/sessions/${enc(s.forked_from.session_id)}`, class: 'mono' }, `${s.forked_from.session_id} @ ${s.forked_from.checkpoint_id}`) : ''],
        ['Last checkpoint', s.last_checkpoint ? h('span', { class: 'mono' }, s.last_checkpoint) : ''],
        ['Review', s.review ? `${s.review.accepted ? 'Accepted' : 'Rejected'}${s.review.note ? ': ' + s.review.note : ''}` : ''],
        ['Created', time(s.created_at)],
        ['Updated', time(s.updated_at)],
        ['Events', fmtInt(s.last_event_seq)],
      ]));
  }

  function renderMeters() {
    const s = session;
    const b = s.budget || {};
    const u = s.usage || {};
    const end = terminal.has(s.status) ? new Date(s.updated_at).getTime() : Date.now();
    const wall = Math.max(0, (end - new Date(s.created_at).getTime()) / 1000 - pausedSeconds(s, end));
    const dims = [
      ['Cost', u.cost_usd || 0, b.max_cost_usd, b.soft_cost_usd, fmtCost],
      ['Tokens', (u.input_tokens || 0) + (u.output_tokens || 0), b.max_tokens, b.soft_tokens, fmtInt],
      ['Model calls', u.model_calls || 0, b.max_model_calls, b.soft_model_calls, fmtInt],
      ['Tool calls', u.tool_calls || 0, b.max_tool_calls, b.soft_tool_calls, fmtInt],
      ['Wall time', wall, b.max_wall_seconds, b.soft_wall_seconds, (v) => fmtDuration(v * 1000)],
    ];
    replace(meters, h('h2', null, 'Budget'), dims.map(([label, used, max, soft, fmt]) => meter(label, used, max, soft, fmt)));
  }

  // The controls are built once and only shown or hidden as the session
  // changes, so that text being typed survives the refreshes events cause.
  let controlEls = null;

  function renderControls() {
    const s = session;
    if (!controlEls) {
      controlEls = { cancel: cancelForm(), steer: steerForm(path, () => refreshSoon()), pause: pauseControl(path, () => refreshSoon()), followUp: followUpForm(), review: reviewForm() };
      replace(controls, h('h2', null, 'Actions'),
        h('div', { class: 'controls-grid' }, controlEls.cancel, controlEls.steer, controlEls.pause.el, controlEls.followUp, controlEls.review));
    }
    controlEls.pause.update(s);
    controlEls.cancel.hidden = terminal.has(s.status) || !can('Cancel');
    // A turn that is not done can be steered (a pending cancel refuses it).
    controlEls.steer.hidden = terminal.has(s.status) || !!s.cancel_requested || !can('Steer');
    controlEls.followUp.hidden = !can('CreateTurn');
    // The review form is for who may review; others read the review in
    // the overview.
    controlEls.review.hidden = !(s.status === 'idle' || s.review) || !can('Review');
    // A role with none of these controls (a reader) sees no empty card.
    controls.hidden = Object.values(controlEls).every((c) => (c.el || c).hidden);
    replace(controlEls.review.querySelector('.review-state'), s.review
      ? h('p', { class: s.review.accepted ? 'ok' : 'error', id: 'review-state' },
        s.review.accepted ? 'Accepted ' : 'Rejected ', time(s.review.at), s.review.note ? ': ' + s.review.note : null)
      : null);
  }

  function renderPending() {
    const actions = [];
    const collect = (s) => {
      for (const a of s.required_actions || []) actions.push([a, s]);
      for (const c of s.subagents || []) collect(c);
    };
    collect(session);
    const ids = new Set(actions.map(([a]) => a.id));
    for (const [aid, card] of cards) {
      if (ids.has(aid)) continue;
      // A card decided here keeps its confirmation until the refresh
      // after the one that no longer lists it; any other goes at once.
      if (card.classList.contains('decided') && !card.dataset.gone) {
        card.dataset.gone = '1';
        continue;
      }
      card.remove();
      cards.delete(aid);
    }
    for (const [a, s] of actions) {
      if (!cards.has(a.id)) {
        const card = actionCard(a, { session: s, showSession: s.id !== id, onDecided: () => refreshSoon() });
        cards.set(a.id, card);
      }
    }
    replace(pending,
      actions.length ? h('h2', null, `Needs a person (${actions.length})`) : null,
      [...cards.values()]);
  }

  // --- controls ---

  function cancelForm() {
    const reason = h('input', { type: 'text', placeholder: 'Reason (optional)', class: 'cancel-reason' });
    const go = h('button', { type: 'button', class: 'danger', id: 'cancel' }, 'Cancel session');
    const res = h('div');
    const key = newKey();
    go.addEventListener('click', async () => {
      replace(res);
      try {
        const body = reason.value.trim() ? { reason: reason.value.trim() } : {};
        await busy(go, api.post(`${path}/cancel`, body, { idempotencyKey: key }));
        replace(res, h('p', { class: 'ok' }, 'Cancel requested: the turn stops at its next safe point.'));
        refreshSoon();
      } catch (err) {
        replace(res, errorBox(err));
      }
    });
    return h('div', { class: 'control' }, h('h3', null, 'Cancel'), reason, h('div', { class: 'buttons' }, go), res);
  }

  function followUpForm() {
    const input = h('textarea', { rows: 3, id: 'follow-up', placeholder: 'A follow-up message: it starts a new turn (queued if one is running)' });
    const go = h('button', { type: 'button', class: 'primary', id: 'send-turn' }, 'Send follow-up');
    const res = h('div');
    go.addEventListener('click', async () => {
      replace(res);
      if (!input.value.trim()) {
        replace(res, errorBox('input: required'));
        return;
      }
      try {
        const turn = await busy(go, api.post(`${path}/turns`, { input: input.value }));
        input.value = '';
        replace(res, h('p', { class: 'ok' }, `Turn ${turn.index} ${turn.status}.`));
        refreshSoon();
      } catch (err) {
        replace(res, errorBox(err));
      }
    });
    return h('div', { class: 'control' }, h('h3', null, 'Follow-up'), input, h('div', { class: 'buttons' }, go), res);
  }

  function reviewForm() {
    const note = h('textarea', { rows: 2, id: 'review-note', placeholder: 'Note (optional for an acceptance; the agent sees it if you continue)' });
    const cont = h('input', { type: 'checkbox', id: 'review-continue' });
    const accept = h('button', { type: 'button', class: 'primary', id: 'review-accept' }, 'Accept');
    const reject = h('button', { type: 'button', class: 'danger-outline', id: 'review-reject' }, 'Reject');
    const res = h('div');
    const send = async (button, accepted) => {
      replace(res);
      const body = { accepted };
      if (note.value.trim()) body.note = note.value.trim();
      if (!accepted && cont.checked) body.continue = true;
      try {
        await busy(button, api.post(`${path}/review`, body));
        replace(res, h('p', { class: 'ok' }, accepted ? 'Accepted.' : cont.checked ? 'Rejected: a new turn works on the note.' : 'Rejected.'));
        refreshSoon();
      } catch (err) {
        replace(res, errorBox(err));
      }
    };
    accept.addEventListener('click', () => send(accept, true));
    reject.addEventListener('click', () => send(reject, false));
    return h('div', { class: 'control review', id: 'review' },
      h('h3', null, 'Review the result'),
      h('div', { class: 'review-state' }),
      note,
      h('label', { class: 'inline' }, cont, ' On reject, continue with a new turn on the note'),
      h('div', { class: 'buttons' }, accept, reject), res);
  }

  // --- tabs ---

  async function loadTurns(el) {
    const turns = await api.get(`${path}/turns`, undefined, { signal: scope.signal });
    replace(el, h('ol', { class: 'turns' }, turns.data.map((t) => h('li', { class: 'card turn' },
      h('h3', null, `Turn ${t.index} `, statusBadge(t.status), t.stop_reason ? chip(t.stop_reason, 'warn') : null),
      kv([
        ['Input', truncate(t.input, 2000)],
        ['Output', t.output ? truncate(t.output, 4000) : ''],
        ['Error', t.error || ''],
        ['Steps', fmtInt(t.steps)],
        ['Usage', `${fmtCost(t.usage.cost_usd)} · ${fmtInt(t.usage.input_tokens + t.usage.output_tokens)} tokens · ${fmtInt(t.usage.model_calls)} model / ${fmtInt(t.usage.tool_calls)} tool calls`],
        ['Acceptance', t.acceptance ? h('ul', { class: 'plain' }, t.acceptance.criteria.map((c) => h('li', { class: c.met ? 'ok' : 'error' }, `${c.met ? '✓' : '✗'} ${c.criterion}${c.reason ? ' — ' + c.reason : ''}`))) : ''],
        ['Started', t.started_at ? time(t.started_at) : ''],
        ['Completed', t.completed_at ? time(t.completed_at) : ''],
      ])))));
  }

  // The ledger: one row per effect, saying what the call did and what came
  // of it; clicking a row (or Enter on it) opens it whole, with the
  // arguments and output read from the journal. Open rows stay open across
  // the refreshes the live page makes.
  const openEffects = new Map(); // effect id -> its whole form, once read
  async function loadEffects(el) {
    const effects = await api.get(`${path}/effects`, undefined, { signal: scope.signal });
    if (!effects.data.length) {
      replace(el, h('p', { class: 'muted' }, 'No effects: no tool call has run against the world yet.'));
      return;
    }
    const columns = 5;
    const rows = [];
    for (const e of effects.data) {
      const result = e.result || (e.resolution ? 'resolved: ' + e.resolution : e.error) || '—';
      const detail = h('tr', { class: 'effect-detail', dataset: { effectId: e.id }, hidden: true }, h('td', { colspan: columns }));
      const toggle = () => toggleEffect(e, row, detail);
      const row = h('tr', {
        class: 'effect-row', tabindex: 0, 'aria-expanded': 'false', title: 'Show the whole call',
        dataset: { effectId: e.id, status: e.status },
        onclick: toggle,
        onkeydown: (ev) => { if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); toggle(); } },
      },
      h('td', { 'data-label': 'What' }, h('div', { class: 'effect-summary clamp', title: e.summary || e.tool }, e.summary || e.tool),
        h('div', { class: 'small muted' }, h('code', null, e.tool), ' · ', chip(e.class, `class-${e.class}`))),
      h('td', { 'data-label': 'Status' }, statusBadge(e.status)),
      h('td', { 'data-label': 'Result', class: 'effect-result' }, h('div', { class: 'clamp', title: result }, truncate(result, 160))),
      h('td', { 'data-label': 'Step', class: 'num' }, `${fmtInt(e.step)}`, e.call_index > 0 ? h('span', { class: 'small muted' }, ` · call ${fmtInt(e.call_index + 1)}`) : null),
      h('td', { 'data-label': 'Started' }, time(e.started_at)));
      rows.push(row, detail);
      if (openEffects.has(e.id)) showEffect(e, row, detail);
    }
    // Long summaries, results and ids wrap (clamped to a few lines, whole on
    // hover and in the open row) within fixed columns; the card scrolls
    // sideways rather than let the table out, should anything still be too
    // wide.
    replace(el, h('div', { class: 'table-card', id: 'effects-card' }, h('table', { class: 'table effects', id: 'effects-table' },
      h('thead', null, h('tr', null, ['What', 'Status', 'Result', 'Step', 'Started'].map((c) => h('th', { class: `col-${c.toLowerCase()}` }, c)))),
      h('tbody', null, rows))));
  }

  function toggleEffect(e, row, detail) {
    if (!detail.hidden) {
      detail.hidden = true;
      row.setAttribute('aria-expanded', 'false');
      openEffects.delete(e.id);
      return;
    }
    if (!openEffects.has(e.id)) openEffects.set(e.id, null);
    showEffect(e, row, detail);
  }

  // showEffect fills an effect's detail row: at once from the row, then
  // with the arguments and output (read once; a finished effect's do not
  // change, a running one's are read again on each refresh).
  async function showEffect(e, row, detail) {
    detail.hidden = false;
    row.setAttribute('aria-expanded', 'true');
    const cell = detail.firstChild;
    const render = (whole, err) => replace(cell, kv([
      ['Effect', h('span', { class: 'mono' }, e.id)],
      ['Call', h('span', { class: 'mono small' }, `turn ${shortId(e.turn_id)}, step ${fmtInt(e.step)}, call ${fmtInt(e.call_index + 1)}`)],
      ['Attempts', fmtInt(e.attempts)],
      ['Idempotency key', h('span', { class: 'mono small' }, e.idempotency_key)],
      ['Arguments SHA-256', h('span', { class: 'mono small' }, e.arguments_sha256)],
      ['Finished', e.finished_at ? time(e.finished_at) : ''],
      ['Error', e.error ? h('span', { class: 'error' }, e.error) : ''],
      ['Resolution', e.resolution || ''],
      ['Arguments', whole && whole.arguments !== undefined ? code(pretty(whole.arguments), 'effect-arguments') : (err ? '' : h('span', { class: 'muted' }, 'Loading…'))],
      ['Output', whole && whole.output !== undefined ? code(pretty(whole.output), 'effect-output') : ''],
    ]), err ? errorBox(err) : null);
    let whole = openEffects.get(e.id);
    render(whole);
    if (whole && e.finished_at) return;
    try {
      whole = await api.get(`${path}/effects/${enc(e.id)}`, undefined, { signal: scope.signal });
      if (openEffects.has(e.id)) openEffects.set(e.id, whole);
      render(whole);
    } catch (err) {
      if (err && err.name === 'AbortError') return;
      render(null, err);
    }
  }

  async function loadCheckpoints(el) {
    const cps = await api.get(`${path}/checkpoints`, undefined, { signal: scope.signal });
    if (!cps.data.length) {
      replace(el, h('p', { class: 'muted' }, 'No checkpoints yet: one is taken after every step with tool calls and every completed turn.'));
      return;
    }
    // Keep an open fork form, and a fork's secret shown once, across
    // refreshes.
    if (el.querySelector('.fork-form, .fork-secret')) return;
    replace(el, h('ol', { class: 'checkpoints' }, cps.data.map((c) => {
      const res = h('div');
      const forkBtn = h('button', { type: 'button', class: 'fork', dataset: { checkpointId: c.id }, hidden: !can('Fork') }, 'Fork from here…');
      forkBtn.addEventListener('click', () => {
        const input = h('textarea', { rows: 2, class: 'fork-input', placeholder: 'Optional: input for a new turn in the fork' });
        const go = h('button', { type: 'button', class: 'primary', dataset: { act: 'fork' } }, 'Fork');
        const key = newKey();
        go.addEventListener('click', async () => {
          replace(res);
          const body = { checkpoint_id: c.id };
          if (input.value.trim()) body.input = input.value;
          try {
            const fork = await busy(go, api.post(`${path}/fork`, body, { idempotencyKey: key }));
            if (!fork.webhook_secret) {
              location.hash = `#/sessions/${enc(fork.id)}`;
              return;
            }
            // The secret that signs the fork's notifications is in this
            // answer only: shown before the person leaves for the fork.
            replace(res, h('div', { class: 'fork-secret' },
              h('p', null, 'The fork\'s notifications go to ', h('span', { class: 'mono' }, fork.webhook_url),
                ', signed with a secret of its own. Copy it now: it is not shown again.'),
              h('pre', { class: 'mono webhook-secret' }, fork.webhook_secret),
              h('a', { href: `#/sessions/${enc(fork.id)}`, class: 'open-fork' }, `Open ${fork.id}`)));
          } catch (err) {
            replace(res, errorBox(err));
          }
        });
        replace(res, h('div', { class: 'fork-form' },
          h('p', { class: 'muted' }, 'A new session starts from this checkpoint; the effects before it are inherited, never run again.'),
          input, h('div', { class: 'buttons' }, go)));
      });
      return h('li', { class: 'card checkpoint', dataset: { checkpointId: c.id } },
        h('h3', null, c.name, ' ', chip(c.kind)),
        kv([
          ['Summary', c.summary || ''],
          ['Next action', c.next_action || ''],
          ['Position', `turn ${shortId(c.turn_id)}, step ${c.step}, event #${c.event_seq}`],
          ['Workspace', c.snapshot ? `${fmtInt(c.files)} files, ${fmtBytes(c.bytes)}` : (c.snapshot_error || 'no snapshot')],
          ['Artifacts', c.artifacts && c.artifacts.length ? c.artifacts.map(shortId).join(', ') : ''],
          ['Taken', time(c.created_at)],
        ]),
        h('div', { class: 'buttons' }, forkBtn), res);
    })));
  }

  async function loadTrace(el) {
    const trace = await api.get(`${path}/trace`, { include: 'subagents' }, { signal: scope.signal });
    replace(el, waterfall(trace));
  }

  // --- live ---

  const refreshSoon = debounce(scope, () => poller.now(), 250);
  const poller = poll(scope, refresh, {
    interval: 15000, // the stream drives refreshes; this keeps the wall-time meter moving
    onError: (err) => {
      if (!err) return;
      // A session that does not exist (or no longer does) will not come
      // back: say so, offer the way back, and stop asking.
      const gone = err instanceof APIError && err.status === 404;
      if (gone) {
        body.hidden = true;
        document.title = 'No such session · Longhaul';
      }
      replace(errors, errorBox(err), gone || !session
        ? h('p', null, h('a', { href: '#/sessions', id: 'back-to-sessions' }, '← Back to the sessions')) : null);
      if (gone) scope.dispose();
    },
  });

  // The timeline follows the event stream from the first time the session
  // is read.
  function followTimeline() {
    panels.timeline.append(startTimeline(scope, id, (ev) => {
      if (refreshOn.test(ev.type)) refreshSoon();
      if (ev.type === 'action.required' || ev.type === 'action.resolved') refreshInboxCount();
    }));
  }
}

function meter(label, used, max, soft, fmt) {
  const limited = max > 0 || soft > 0;
  const scaleMax = max > 0 ? max : soft;
  const pct = limited ? Math.min(100, (used / scaleMax) * 100) : 0;
  const level = max > 0 && used >= max ? 'over' : soft > 0 && used >= soft ? 'soft' : max > 0 && used >= 0.8 * max ? 'warn' : 'ok';
  const fill = h('span', { class: `meter-fill level-${level}` });
  fill.style.width = `${pct}%`;
  const track = h('span', { class: 'meter-track', role: 'meter', 'aria-label': label, 'aria-valuemin': '0', 'aria-valuemax': String(scaleMax || 0), 'aria-valuenow': String(used) }, fill);
  if (soft > 0 && max > 0) {
    const mark = h('span', { class: 'meter-soft', title: `soft limit ${fmt(soft)}` });
    mark.style.left = `${Math.min(100, (soft / max) * 100)}%`;
    track.append(mark);
  }
  const limits = [];
  if (soft > 0) limits.push(`soft ${fmt(soft)}`);
  if (max > 0) limits.push(`max ${fmt(max)}`);
  return h('div', { class: ['meter', !limited && 'unlimited'], dataset: { meter: label } },
    h('div', { class: 'meter-label' }, h('span', null, label), h('span', { class: 'meter-value' }, `${fmt(used)}${limits.length ? ' / ' + limits.join(', ') : ' · no limit'}`)),
    limited ? track : null);
}

function renderSubagents(el, session) {
  const children = session ? session.subagents || [] : [];
  if (!children.length) {
    replace(el, h('p', { class: 'muted' }, 'This session has spawned no sub-agents.'));
    return;
  }
  const tree = (list) => h('ul', { class: 'tree' }, list.map((c) => h('li', null,
    h('div', { class: 'tree-node' },
      h('a', { href: `#/sessions/${enc(c.id)}`, class: 'mono' }, shortId(c.id)), ' ', statusBadge(c.status), ' ',
      c.agent ? chip(`${c.agent.name} v${c.agent.version}`) : null, ' ',
      h('span', { class: 'muted' }, fmtCost(c.usage && c.usage.cost_usd)), ' ',
      (c.required_actions || []).length ? h('a', { href: '#/inbox', class: 'badge warn' }, `${c.required_actions.length} pending`) : null,
      h('div', { class: 'goal small' }, truncate(c.goal || c.input, 200))),
    c.subagents && c.subagents.length ? tree(c.subagents) : null)));
  replace(el, tree(children));
}
