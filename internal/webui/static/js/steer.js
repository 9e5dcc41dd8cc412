// The steer control of a session page: a message to the turn that is not
// done yet (POST /v1/sessions/{id}/steer). The model reads it verbatim at
// its next call; "interrupt" abandons a model call in flight and makes it
// again with the message. The timeline shows it as turn.steered.

import { api, newKey } from './api.js';
import { h, replace, errorBox, busy } from './dom.js';

// steerForm returns the control; path is the session's API path, and
// onSent is called once a message is journaled.
export function steerForm(path, onSent) {
  const input = h('textarea', { rows: 2, id: 'steer-input', placeholder: 'A message to the running turn: the model reads it at its next call' });
  const interrupt = h('input', { type: 'checkbox', id: 'steer-interrupt' });
  const go = h('button', { type: 'button', class: 'primary', id: 'steer' }, 'Steer');
  const res = h('div');
  // One key per message: a double click or a retry is answered once; an
  // edited message is a new one.
  let key = newKey();
  const fresh = () => { key = newKey(); };
  input.addEventListener('input', fresh);
  interrupt.addEventListener('change', fresh);
  go.addEventListener('click', async () => {
    replace(res);
    if (!input.value.trim()) {
      replace(res, errorBox('input: required'));
      return;
    }
    try {
      const body = { input: input.value };
      if (interrupt.checked) body.interrupt = true;
      await busy(go, api.post(`${path}/steer`, body, { idempotencyKey: key }));
      input.value = '';
      interrupt.checked = false;
      fresh();
      replace(res, h('p', { class: 'ok', id: 'steer-sent' }, body.interrupt
        ? 'Sent: a model call in flight is abandoned and made again with it.'
        : 'Sent: the model reads it at its next call.'));
      onSent();
    } catch (err) {
      replace(res, errorBox(err));
    }
  });
  return h('div', { class: 'control', id: 'steer-control' }, h('h3', null, 'Steer'), input,
    h('label', { class: 'inline' }, interrupt, ' Interrupt a model call in flight'),
    h('div', { class: 'buttons' }, go), res);
}
