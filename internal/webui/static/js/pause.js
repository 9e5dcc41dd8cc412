// Pause and resume on the session page: a control with a Pause button (and
// an optional reason) while the session works, and a Resume button while
// it is paused or a pause waits for its safe point. A pause lets the call
// in flight finish; a paused session holds no worker, its actions stay
// pending and its timers wait (POST /v1/sessions/{id}/pause, /resume). A
// pause reaches the session's running sub-agents, which go on with it.

import { api, newKey } from './api.js';
import { h, replace, errorBox, busy, chip, time } from './dom.js';
import { can } from './identity.js';

const ended = new Set(['idle', 'failed', 'cancelled']);

// pauseControl returns the control's element and update(session), which
// shows the button that applies to the session as it now is. path is the
// session's API path; changed is called after a request succeeded.
export function pauseControl(path, changed) {
  const reason = h('input', { type: 'text', placeholder: 'Reason (optional)', class: 'pause-reason', id: 'pause-reason' });
  const pause = h('button', { type: 'button', id: 'pause' }, 'Pause');
  const resume = h('button', { type: 'button', class: 'primary', id: 'resume' }, 'Resume');
  const state = h('div', { class: 'pause-state' });
  const res = h('div');
  let pauseKey = newKey();
  let resumeKey = newKey();

  pause.addEventListener('click', async () => {
    replace(res);
    try {
      const body = reason.value.trim() ? { reason: reason.value.trim() } : {};
      const s = await busy(pause, api.post(`${path}/pause`, body, { idempotencyKey: pauseKey }));
      pauseKey = newKey();
      reason.value = '';
      replace(res, h('p', { class: 'ok' }, s.status === 'paused'
        ? 'Paused: it holds no worker until resumed.'
        : 'Pause requested: the call in flight finishes, then the session pauses.'));
      changed();
    } catch (err) {
      replace(res, errorBox(err));
    }
  });
  resume.addEventListener('click', async () => {
    replace(res);
    try {
      const s = await busy(resume, api.post(`${path}/resume`, {}, { idempotencyKey: resumeKey }));
      resumeKey = newKey();
      replace(res, h('p', { class: 'ok' }, `Resumed (${s.status.replace('_', ' ')}).`));
      changed();
    } catch (err) {
      replace(res, errorBox(err));
    }
  });

  const el = h('div', { class: 'control', id: 'pause-control' },
    h('h3', null, 'Pause'), state, reason, h('div', { class: 'buttons' }, pause, resume), res);

  // The answer to a click is dropped once the session moves on: the state
  // line says where it stands.
  let shown = null;

  function update(s) {
    const now = s.status === 'paused' ? 'paused' : s.pause_requested ? 'requested' : 'working';
    if (shown !== null && now !== shown) replace(res);
    shown = now;
    const parked = s.status === 'paused' || s.pause_requested;
    // Only the button the role may use: a role that may do neither (an
    // approver, a reader) sees no pause control.
    const mayPause = can('Pause');
    const mayResume = can('Resume');
    el.hidden = ended.has(s.status) || (parked ? !mayResume : !mayPause);
    pause.hidden = parked || !mayPause;
    reason.hidden = parked || !mayPause;
    // A sub-agent paused with its parent goes on with it: the line links to
    // the parent. Its own Resume stays: the server answers it with a 409
    // naming the session to resume while the parent is paused, and carries
    // it out once the parent is not (a parent's resume cut short).
    const withParent = parked && s.pause_parent_id
      ? [' with its parent ', h('a', { href: `#/sessions/${encodeURIComponent(s.pause_parent_id)}`, class: 'mono', id: 'pause-parent' }, s.pause_parent_id), ': it goes on when its parent does (a resume of the parent, or a decision on its monitor action)']
      : null;
    resume.hidden = !parked || !mayResume;
    replace(state, s.status === 'paused'
      ? h('p', null, 'Paused', s.paused_at ? [' since ', time(s.paused_at)] : null, s.pause_reason ? ': ' + s.pause_reason : null, withParent, '. Nothing runs until it is resumed; decisions are recorded meanwhile.')
      : s.pause_requested
        ? h('p', null, 'A pause is requested', withParent, ': the call in flight finishes first.')
        : null);
  }

  return { el, update };
}

// pauseChip is the session head's sign of a pause that has not taken
// effect yet (null when there is none).
export function pauseChip(s) {
  return s.pause_requested ? chip('pause requested', 'warn') : null;
}

// pausedSeconds is how much of the time since t0 (ms) up to end (ms) the
// session spent paused: its wall-clock budget does not count it.
export function pausedSeconds(s, end) {
  let secs = s.paused_seconds || 0;
  if (s.paused_at) secs += Math.max(0, (end - new Date(s.paused_at).getTime()) / 1000);
  return secs;
}
