// The live timeline of a session and its sub-agents: the journal streamed
// over SSE (GET /v1/sessions/{id}/events/stream?include=subagents), one
// item per event, with the arguments and results in a fold. The stream
// resumes with the tree cursor after a drop, so the timeline has every
// event once, in order per session. An event that records a decision
// names its actor ("by alice (approver)").

import { enc, fetchBlob } from './api.js';
import { h, replace, code, pretty, fmtTime, time, fmtCost, fmtDuration, fmtInt, fmtTokens, shortId, truncate, errorBox } from './dom.js';
import { follow } from './sse.js';
import { byActor } from './identity.js';

// Most events kept on the page; older ones are dropped from the DOM (the
// journal keeps them: GET /v1/sessions/{id}/events).
const maxItems = 5000;

const kinds = [
  [/^(model\.|context\.compacted|acceptance\.verified)/, 'model'],
  [/^(tool\.|policy\.decided|effect\.in_doubt|network\.connection)/, 'tool'],
  [/^action\./, 'action'],
  [/^(checkpoint\.|artifact\.)/, 'ckpt'],
  [/^subagent\./, 'sub'],
];

function kindOf(type) {
  for (const [re, k] of kinds) if (re.test(type)) return k;
  return 'session';
}

function isBlob(d) {
  return d && typeof d === 'object' && d.blob && typeof d.blob.sha256 === 'string' && 'preview' in d;
}

function argsText(args) {
  if (!args || typeof args !== 'object') return '';
  return Object.entries(args).map(([k, v]) => `${k}=${truncate(JSON.stringify(v), 60)}`).join(', ');
}

function usageText(u, cost) {
  if (!u) return '';
  const parts = [`${fmtTokens(u.input_tokens, u)} in / ${fmtTokens(u.output_tokens, u)} out tokens${u.estimated ? ' (estimated)' : ''}`];
  const c = cost ?? u.cost_usd;
  if (c) parts.push(fmtCost(c));
  return parts.join(' · ');
}

// describe is one line about an event, and its level (info, ok, warn,
// error) for the colour.
export function describe(ev) {
  const d = ev.data || {};
  if (isBlob(d)) return [`(payload of ${fmtInt(d.blob.size)} bytes stored as a blob) ${truncate(d.preview, 160)}`, 'info'];
  switch (ev.type) {
    case 'session.created':
      return [`Session created${d.agent ? ` with agent ${d.agent.name} v${d.agent.version}` : ''}${d.goal ? ': ' + truncate(d.goal, 160) : ''}`, 'info'];
    case 'session.status_changed':
      return [`Status ${d.from} → ${d.to}${d.stop_reason ? ` (${d.stop_reason})` : ''}`,
        d.to === 'failed' ? 'error' : d.to === 'requires_action' || d.to === 'paused' ? 'warn' : d.to === 'idle' ? 'ok' : 'info'];
    case 'session.cancel_requested':
      return [`Cancel requested${d.reason ? ': ' + d.reason : ''}`, 'warn'];
    case 'session.pause_requested':
      return [`Pause requested${d.reason ? ': ' + d.reason : ''}: the call in flight finishes first`, 'warn'];
    case 'session.paused':
      return [`Paused${d.reason ? ': ' + d.reason : ''}`, 'warn'];
    case 'session.resumed':
      return [`Resumed${d.paused_ms ? ` after ${fmtDuration(d.paused_ms)} paused` : ' (the pause had not taken effect)'}`, 'ok'];
    case 'session.constraint_added':
      return [`Constraint pinned: ${truncate(d.constraint, 200)}`, 'info'];
    case 'session.reviewed': {
      const r = d.review || {};
      return [`Reviewed: ${r.accepted ? 'accepted' : 'rejected'}${r.note ? ' — ' + truncate(r.note, 160) : ''}`, r.accepted ? 'ok' : 'warn'];
    }
    case 'session.forked':
      return [`Forked from ${d.from ? shortId(d.from.session_id) + ' at checkpoint ' + shortId(d.from.checkpoint_id) : 'a checkpoint'}`, 'info'];
    case 'turn.created':
      return [`Turn ${d.index} created: ${truncate(d.input, 200)}`, 'info'];
    case 'turn.started':
      return ['Turn started', 'info'];
    case 'turn.completed':
      return [`Turn completed: ${truncate(d.output, 240)}${d.acceptance ? (d.acceptance.all_met ? ' (acceptance criteria met)' : ' (acceptance criteria not all met)') : ''}`, 'ok'];
    case 'turn.failed':
      return [`Turn failed (${d.stop_reason}): ${truncate(d.error, 200)}`, 'error'];
    case 'turn.cancelled':
      return [`Turn cancelled${d.reason ? ': ' + d.reason : ''}`, 'warn'];
    case 'turn.steered':
      return [`Steered${d.interrupt ? ' (interrupt)' : ''}: ${truncate(d.input, 400)}`, 'info'];
    case 'model.requested':
      return [`Model call${d.purpose ? ` (${d.purpose})` : ''}: ${d.provider || ''}${d.model ? '/' + d.model : ''}, step ${d.step}${d.attempt > 1 ? `, attempt ${d.attempt}` : ''}, ${fmtInt(d.context_tokens)} context tokens${d.steers ? `, ${fmtInt(d.steers)} steering message${d.steers > 1 ? 's' : ''}` : ''}`, 'info'];
    case 'model.responded': {
      const calls = d.tool_calls ? d.tool_calls.map((c) => c.name).join(', ') : '';
      const what = d.text ? `“${truncate(d.text, 160)}”` : '';
      return [`Model answered${calls ? ' with tool calls: ' + calls : ''}${what ? ' ' + what : ''} · ${usageText(d.usage, d.cost_usd)} · ${fmtDuration(d.duration_ms)}`, 'info'];
    }
    case 'model.failed':
      if (d.interrupted === 'steered') return [`Model call abandoned for a steering message; made again with it · ${usageText(d.usage)}`, 'warn'];
      return [`Model call failed (${d.kind}${d.status ? ' ' + d.status : ''}): ${truncate(d.message, 200)}${d.retry ? `; retrying${d.retry_in_ms ? ' in ' + fmtDuration(d.retry_in_ms) : ''}` : ''}`, d.retry ? 'warn' : 'error'];
    case 'context.compacted':
      return [`Context compacted: ${fmtInt(d.tokens_before)} → ${fmtInt(d.tokens_after)} tokens`, 'info'];
    case 'acceptance.verified':
      return [`Acceptance check: ${d.verdict && d.verdict.all_met ? 'all criteria met' : 'criteria not all met'}`, d.verdict && d.verdict.all_met ? 'ok' : 'warn'];
    case 'tool.requested':
      return [`Tool call ${d.tool}(${truncate(argsText(d.arguments), 200)}) [${d.effect || d.kind}]`, 'info'];
    case 'policy.decided':
      return [`Policy ${d.rule || ''} decided ${d.decision} for ${d.tool}${d.reason ? ': ' + d.reason : ''}`, d.decision === 'deny' ? 'error' : d.decision === 'ask' ? 'warn' : 'info'];
    case 'tool.started':
      return [`Tool ${d.tool} started (${d.effect}${d.attempt > 1 ? `, attempt ${d.attempt}` : ''}) · key ${d.idempotency_key}`, 'info'];
    case 'tool.completed':
      return [`Tool ${d.tool} completed in ${fmtDuration(d.duration_ms)}${d.resolution ? ` (${d.resolution})` : ''}: ${truncate(JSON.stringify(d.output), 160)}`, 'ok'];
    case 'tool.failed':
      return [`Tool ${d.tool} failed${d.refused ? ` (refused: ${d.refused})` : ''}: ${truncate(d.error, 200)}${d.retry ? '; retrying' : ''}`, d.retry ? 'warn' : 'error'];
    case 'effect.in_doubt':
      return [`Effect of ${d.tool} is in doubt: ${d.reason}`, 'warn'];
    case 'network.connection':
      return [`${d.allowed ? 'Connected to' : 'Refused connection to'} ${d.host}:${d.port} (${d.via})${d.reason ? ': ' + d.reason : ''}`, d.allowed ? 'info' : 'warn'];
    case 'monitor.finding':
      return [`Monitor: ${d.detector} (${d.severity}, ${d.action}): ${truncate(d.summary, 200)} · events ${(d.evidence || []).join(', ')}` +
        ((d.tree_evidence || []).length ? ` · in the tree ${d.tree_evidence.map((e) => `${e.session_id}#${e.seq}`).join(', ')}` : ''), d.severity === 'high' ? 'error' : 'warn'];
    case 'monitor.reviewed': {
      const what = d.trigger === 'before' ? `before ${d.tool} ${d.call_id}` : `at step ${d.step}`;
      const reasons = (d.reasons || []).join('; ');
      return [`Model monitor ${what}: ${d.verdict}${d.failed ? ' (failed closed)' : ''}${reasons ? ': ' + truncate(reasons, 240) : ''}${d.cost_usd ? ' · ' + fmtCost(d.cost_usd) : ''}`,
        d.verdict === 'pause' ? 'error' : d.verdict === 'warn' ? 'warn' : 'ok'];
    }
    case 'monitor.held':
      return [`Sub-agents paused with this session until ${d.action_id} is decided`, 'warn'];
    case 'action.required': {
      const a = d.action || {};
      return [`Needs a person (${a.type}): ${truncate(a.question || a.summary, 200)}`, 'warn'];
    }
    case 'action.resolved': {
      const dec = d.decision && typeof d.decision === 'object' ? (d.decision.decision || Object.keys(d.decision).join(', ')) : d.decision;
      return [`Action ${d.type} resolved: ${dec}${d.arguments ? ' with edited arguments' : ''}`, 'ok'];
    }
    case 'checkpoint.created': {
      const c = d.checkpoint || {};
      return [`Checkpoint “${c.name}” (${c.kind})${c.files ? ` · ${fmtInt(c.files)} files` : ''}${c.summary ? ': ' + truncate(c.summary, 120) : ''}`, 'info'];
    }
    case 'artifact.created': {
      const a = d.artifact || {};
      return [`Artifact ${a.name} v${a.version} (${a.content_type}, ${fmtInt(a.size)} bytes)`, 'ok'];
    }
    case 'budget.warning':
      return [`Budget warning: ${d.limit ? `${d.limit.name} at ${d.limit.used} of ${d.limit.max}` : ''}`, 'warn'];
    case 'budget.exceeded':
      return [`Budget exceeded: ${d.limit} ${d.used} of ${d.max}`, 'error'];
    case 'budget.updated':
      return ['Budget updated', 'info'];
    case 'subagent.spawned':
      return [`Sub-agent ${shortId(d.child_id)} spawned${d.agent ? ` (${d.agent.name})` : ''}: ${truncate(d.input, 160)}`, 'info'];
    case 'subagent.completed':
      return [`Sub-agent ${shortId(d.child_id)} ${d.status}${d.stop_reason ? ` (${d.stop_reason})` : ''}${d.output ? ': ' + truncate(d.output, 160) : ''}`, d.status === 'completed' ? 'ok' : 'warn'];
    case 'signal.received':
      return [`Signal received: ${d.name || ''}`, 'info'];
    case 'wait.started':
      return [`Waiting (${d.kind || d.tool})${d.name ? ' for signal ' + d.name : ''}${d.until ? ' until ' + fmtTime(d.until) : ''}${d.ids ? ' for ' + d.ids.length + ' sub-agents' : ''}`, 'info'];
    case 'environment.lost':
      return [`Workspace lost: ${d.reason}`, 'warn'];
    case 'environment.restored':
      return [`Workspace restored${d.note ? ': ' + d.note : ` from snapshot ${truncate(d.snapshot || '', 16)} (${fmtInt(d.files)} files)`}`, 'info'];
    case 'environment.stopped':
      return [`Environment stopped (${d.reason})${d.runner ? ' on runner ' + d.runner : ''} at snapshot ${truncate(d.snapshot || '', 16)}`, 'info'];
    case 'environment.stopping':
      return [`Stopping the environment (${d.reason})${d.runner ? ' on runner ' + d.runner : ''} at snapshot ${truncate(d.snapshot || '', 16)}${d.person_changes_through ? `, holding the people's changes through event #${d.person_changes_through}` : ''}`, 'info'];
    case 'environment.stop_failed':
      return [`Environment not stopped (${d.reason}): ${d.error}`, 'warn'];
    case 'environment.provisioned':
      return [`Environment provisioned again${d.runner ? ' on runner ' + d.runner : ''}`, 'info'];
    case 'workspace.changed':
      return [`Workspace changed by ${d.by || 'person'}: ${d.op === 'delete' ? 'deleted' : 'wrote'} ${d.path}${d.op === 'delete' ? '' : ` (${fmtInt(d.size)} bytes, sha256 ${truncate(d.sha256 || '', 16)})`}${d.action_id ? ' answering ' + shortId(d.action_id) : ''}`, 'warn'];
    case 'workspace.change_not_applied':
      if (d.reason === 'failed') {
        return [`Person's change #${d.change_seq} not applied: ${d.op === 'delete' ? 'delete of' : 'write to'} ${d.path}: ${d.error}`, 'warn'];
      }
      return [`Person's change #${d.change_seq} not applied (${d.reason}): ${d.op === 'delete' ? 'delete of' : 'write to'} ${d.path}; it was based on ${truncate(d.based_on || '', 23)}, the file held ${truncate(d.found || '', 23)}. The agent's version is kept`, 'warn'];
    default:
      return [ev.type, 'info'];
  }
}

// Timeline renders into el and follows the stream until the scope ends.
// onEvent(ev) hears every event after it is shown.
export function startTimeline(scope, sessionId, onEvent) {
  const list = h('ol', { class: 'timeline', id: 'timeline', dataset: { filter: 'all' } });
  const state = h('span', { class: 'stream-state', id: 'stream-state', dataset: { state: 'connecting' } }, 'connecting…');
  const filter = h('select', { 'aria-label': 'Show', id: 'timeline-filter' },
    h('option', { value: 'all' }, 'All events'),
    h('option', { value: 'model' }, 'Model calls'),
    h('option', { value: 'tool' }, 'Tool calls'),
    h('option', { value: 'action' }, 'Approvals and actions'),
    h('option', { value: 'ckpt' }, 'Checkpoints and artifacts'),
    h('option', { value: 'sub' }, 'Sub-agents'));
  filter.addEventListener('change', () => { list.dataset.filter = filter.value; });
  const follow_ = h('label', { class: 'inline' }, h('input', { type: 'checkbox', checked: true, id: 'timeline-follow' }), ' follow');
  const errorEl = h('div');
  const el = h('section', { class: 'timeline-wrap' },
    h('div', { class: 'toolbar' }, state, filter, follow_), errorEl, list);

  const deltas = new Map(); // live text of model calls still streaming
  const deltaKey = (ev, d) => `${ev.session_id}/${d.step}/${d.attempt || 1}/${d.purpose || ''}`;
  let count = 0;

  const add = (ev) => {
    const d = ev.data || {};
    if (ev.type === 'model.delta') {
      const k = deltaKey(ev, d);
      let item = deltas.get(k);
      if (!item) {
        item = h('li', { class: ['ev', 'k-model', 'delta', ev.session_id !== sessionId && 'sub'], dataset: { type: 'model.delta' } },
          h('div', { class: 'ev-line' }, h('span', { class: 'ev-type' }, 'streaming'), h('span', { class: 'ev-text delta-text' })));
        deltas.set(k, item);
        list.append(item);
      }
      const t = item.querySelector('.delta-text');
      t.textContent = truncate((t.textContent || '') + (d.text || ''), 2000);
      return;
    }
    if (ev.type === 'model.responded' || ev.type === 'model.failed' || ev.type === 'context.compacted' || ev.type === 'acceptance.verified') {
      for (const [k, item] of deltas) {
        if (k.startsWith(`${ev.session_id}/${d.step}/`)) {
          item.remove();
          deltas.delete(k);
        }
      }
    }
    const [text, level] = describe(ev);
    const sub = ev.session_id !== sessionId;
    const body = h('div', { class: 'ev-body' });
    const details = h('details', null,
      h('summary', { class: 'ev-line' },
        h('span', { class: 'ev-seq mono' }, `#${ev.seq}`),
        h('span', { class: 'ev-time' }, time(ev.time)),
        sub ? h('a', { class: 'chip sub-chip mono', href: `#/sessions/${enc(ev.session_id)}`, title: `sub-agent ${ev.session_id}` }, shortId(ev.session_id)) : null,
        h('span', { class: 'ev-type' }, ev.type),
        h('span', { class: 'ev-text' }, text),
        actorOf(ev)),
      body);
    details.addEventListener('toggle', () => {
      if (!details.open || body.childElementCount) return;
      body.append(detailsOf(ev));
    }, { once: false });
    const item = h('li', {
      class: ['ev', `k-${kindOf(ev.type)}`, `lvl-${level}`, sub && 'sub'],
      dataset: { type: ev.type, seq: String(ev.seq), session: ev.session_id },
    }, details);
    list.append(item);
    count++;
    if (count > maxItems) {
      list.firstElementChild && list.firstElementChild.remove();
      count--;
    }
    // The list scrolls in its own box, so following the newest event never
    // moves the page under a person reading or typing elsewhere.
    if (follow_.querySelector('input').checked) list.scrollTop = list.scrollHeight;
  };

  const states = { connecting: 'connecting…', live: 'live', retrying: 'reconnecting…', failed: 'stopped' };
  const stream = follow({
    path: `/v1/sessions/${enc(sessionId)}/events/stream?include=subagents`,
    onEvent: (ev) => {
      add(ev);
      onEvent(ev);
    },
    onState: (st, err) => {
      state.dataset.state = st;
      state.textContent = states[st] || st;
      replace(errorEl, st === 'failed' && err ? errorBox(err) : null);
    },
  });
  scope.onDispose(stream.stop);
  return el;
}

// actorOf is who made the decision an event records, when it records one
// (a blob's preview does not say).
function actorOf(ev) {
  const d = ev.data || {};
  if (isBlob(d)) return null;
  const el = byActor(d.actor);
  if (el) el.classList.add('ev-actor');
  return el;
}

// detailsOf is the fold of an event: the data as JSON, with the arguments
// and output of tool events shown first.
function detailsOf(ev) {
  const d = ev.data || {};
  const out = [];
  if (isBlob(d)) {
    const load = h('button', { type: 'button' }, `Load the full payload (${fmtInt(d.blob.size)} bytes)`);
    const box = h('div');
    load.addEventListener('click', async () => {
      load.disabled = true;
      try {
        const blob = await fetchBlob(`/v1/blobs/${enc(d.blob.sha256)}`);
        const text = await blob.text();
        let v = text;
        try {
          v = pretty(JSON.parse(text));
        } catch {
          // Not JSON: show the text.
        }
        replace(box, code(v));
      } catch (err) {
        replace(box, errorBox(err));
      } finally {
        load.disabled = false;
      }
    });
    out.push(code(d.preview), load, box);
  } else {
    if (d.arguments !== undefined) out.push(h('p', { class: 'label' }, 'Arguments'), code(pretty(d.arguments)));
    if (d.output !== undefined) out.push(h('p', { class: 'label' }, 'Result'), code(pretty(d.output)));
    if (d.error) out.push(h('p', { class: 'label' }, 'Error'), code(String(d.error)));
    if (d.text) out.push(h('p', { class: 'label' }, 'Text'), code(d.text));
    if (d.summary && ev.type === 'context.compacted') out.push(h('p', { class: 'label' }, 'Summary'), code(d.summary));
    out.push(h('p', { class: 'label' }, 'Event'), code(pretty({ ...ev, data: d })));
  }
  return h('div', null, out);
}
