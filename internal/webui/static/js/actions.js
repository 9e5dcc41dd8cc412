// A required action as a card with its decision form, shared by the inbox
// and the session page. Every card shows what the server says about the
// action (in plain language, who or what it affects, the evidence, the
// consequence, the policy) and the exact arguments with their SHA-256. An
// approval sends that SHA-256 back, so the server refuses it (409) if the
// arguments changed since the page showed them. A decided action says who
// decided it (resolved_by), a pending one who may (approvers), and a role
// that may not decide sees no decision form.

import { api, enc, filePath, newKey, putFile } from './api.js';
import { h, replace, code, pretty, chip, errorBox, busy, fmtCost, fmtInt, fmtTokens, shortId, time, field, truncate } from './dom.js';
import { validate, parseJSON } from './schema.js';
import { can, identity, byActor, approversText, excludedBy } from './identity.js';

const typeNames = {
  approval: 'Approval',
  function_call: 'Function call',
  input: 'Question',
  in_doubt: 'In doubt',
  budget: 'Budget',
  environment_connection: 'Waiting for a runner',
  monitor: 'Monitor finding',
  browser_permission: 'Site permission',
};

// typeName is an action's kind as people read it: a monitor action raised
// by the model monitor's pause is not a detector's finding.
function typeName(action) {
  if (action.type === 'monitor' && action.review) return 'Model monitor pause';
  return typeNames[action.type] || action.type;
}

const resolvedText = {
  approve: 'Approved: the session goes on.',
  reject: 'Rejected: the agent is told why.',
  stop: 'Stopped: the turn ends.',
  happened: 'Recorded as happened.',
  did_not_happen: 'Recorded as not happened: the call runs again.',
  skip: 'Skipped: the call is not run again.',
  connected: 'A runner connected: the session goes on.',
  continue: 'Continued: the session goes on.',
  allow: 'Allowed: the browser goes on to the site.',
  deny: 'Denied: the agent is told why.',
};

// budgetFields maps a budget action's dimension to its budget fields.
const budgetFields = {
  cost_usd: ['max_cost_usd', 'soft_cost_usd', 'USD'],
  tokens: ['max_tokens', 'soft_tokens', 'tokens'],
  model_calls: ['max_model_calls', 'soft_model_calls', 'model calls'],
  tool_calls: ['max_tool_calls', 'soft_tool_calls', 'tool calls'],
  wall_seconds: ['max_wall_seconds', 'soft_wall_seconds', 'seconds'],
};

function fmtLimitValue(name, v) {
  if (v === undefined || v === null) return '—';
  return name === 'cost_usd' ? fmtCost(v) : fmtInt(v);
}

// Schemas of function tools, from the agent's stored spec; sessions with an
// inline spec (agent "inline") have none the API can give back, and
// built-in tools' schemas live in the server: then the server's check is
// the only one, and its 400 names the field.
const schemaCache = new Map();

export function toolSchema(agentRef, tool) {
  if (!agentRef || !agentRef.name || agentRef.name === 'inline' || !tool) return Promise.resolve(null);
  const key = `${agentRef.name}@${agentRef.version}`;
  if (!schemaCache.has(key)) {
    schemaCache.set(key, api.get(`/v1/agents/${enc(agentRef.name)}`, agentRef.version ? { version: agentRef.version } : undefined)
      .then((agent) => agent.spec.tools || [])
      .catch(() => []));
  }
  return schemaCache.get(key).then((tools) => {
    const t = tools.find((x) => x.name === tool);
    return t && t.parameters ? t.parameters : null;
  });
}

function list(items) {
  return h('ul', { class: 'plain' }, items.map((x) => h('li', null, x)));
}

// evidenceList shows each piece of evidence; one of several lines (a
// script the command runs, the diff a write makes) keeps its lines, under
// its first line.
function evidenceList(items) {
  return h('ul', { class: 'plain evidence' }, items.map((x) => {
    const text = String(x);
    const nl = text.indexOf('\n');
    if (nl < 0) return h('li', null, text);
    return h('li', null, text.slice(0, nl), code(text.slice(nl + 1), 'evidence-text'));
  }));
}

// cardActions is the action each card shows.
const cardActions = new WeakMap();

// actionCard renders one action. opts: session (the session object, when
// known, for its goal and agent), showSession (link to it), onDecided(action).
export function actionCard(action, opts = {}) {
  const card = h('article', {
    class: ['card', 'action', `action-${action.type}`],
    dataset: { actionId: action.id, type: action.type, sessionId: action.session_id },
  });
  cardActions.set(card, action);
  const result = h('div', { class: 'result', role: 'status' });
  const decide = h('div', { class: 'decide' });

  const headline = action.type === 'input' ? (action.question || action.summary) : (action.summary || action.type);
  const meta = h('p', { class: 'meta' },
    chip(typeName(action), `type-${action.type}`), ' ',
    opts.showSession !== false
      ? h('a', { href: `#/sessions/${enc(action.session_id)}`, class: 'mono', title: action.session_id }, shortId(action.session_id))
      : null,
    ' · asked ', time(action.created_at),
    action.expires_at ? [' · expires ', time(action.expires_at)] : null);
  const goal = h('p', { class: 'goal muted' });
  if (opts.session) setGoal(goal, opts.session);

  const facts = [];
  if (action.origin) facts.push(['Site', h('code', { class: 'origin' }, action.origin)]);
  if (action.purpose) facts.push(['Purpose', h('span', { class: 'purpose' }, action.purpose)]);
  if (action.request_id) facts.push(['Request', h('span', { class: 'mono request-id' }, action.request_id)]);
  if (action.tool) facts.push(['Tool', h('code', null, action.tool)]);
  if (action.call) facts.push(['Call', h('code', { class: 'call' }, action.call)]);
  if (action.affects && action.affects.length) facts.push(['Affects', list(action.affects)]);
  if (action.evidence && action.evidence.length) facts.push(['Evidence', evidenceList(action.evidence)]);
  if (action.consequence) facts.push(['Consequence', action.consequence]);
  if (action.policy) facts.push(['Policy', h('code', null, action.policy)]);
  const approvers = approversText(action.approvers);
  if (approvers) facts.push(['Who may decide', approversFact(action, opts.session)]);
  if (action.effect_id) facts.push(['Effect', h('span', { class: 'mono' }, action.effect_id)]);
  if (action.idempotency_key) facts.push(['Idempotency key', h('span', { class: 'mono' }, action.idempotency_key)]);
  if (action.limit) {
    const l = action.limit;
    facts.push(['Limit', `${l.name}: used ${fmtLimitValue(l.name, l.used)} of soft ${fmtLimitValue(l.name, l.soft)}` +
      (l.max ? `, hard ${fmtLimitValue(l.name, l.max)}` : ', no hard limit')]);
  }
  if (action.runner) {
    const r = action.runner;
    facts.push(['Runner', r.name ? h('code', null, r.name) : `labels ${(r.labels || []).join(', ')}`]);
  }
  if (action.reason) facts.push(['Why', action.reason]);
  if (action.review) {
    const r = action.review;
    const what = r.trigger === 'before' ? `before ${r.tool} (${r.call_id})` : `at step ${r.step}`;
    facts.push(['Model monitor', `paused ${what}${r.failed ? ' (failed closed)' : ''}`]);
    facts.push(['Reasons', h('ul', { class: 'review-reasons' }, ...(r.reasons || []).map((x) => h('li', null, x)))]);
  }
  if (action.finding) {
    const f = action.finding;
    facts.push(['Finding', [h('code', null, f.detector), ` (${f.severity}): ${f.summary}`]]);
    facts.push(['Events', h('span', { class: 'mono evidence-seqs' }, (f.evidence || []).join(', '))]);
  }
  if (action.usage) {
    const u = action.usage;
    facts.push(['Usage', `${fmtCost(u.cost_usd)} · ${fmtTokens((u.input_tokens || 0) + (u.output_tokens || 0), u)} tokens${u.estimated ? ' (estimated)' : ''} · ${fmtInt(u.model_calls)} model calls · ${fmtInt(u.tool_calls)} tool calls`]);
  }
  const dl = h('dl', { class: 'kv' });
  for (const [k, v] of facts) dl.append(h('dt', null, k), h('dd', null, v));

  const args = action.arguments !== undefined && action.arguments !== null
    ? h('div', { class: 'arguments' },
      h('p', { class: 'label' }, 'Arguments, exactly as they would run'),
      code(pretty(action.arguments), 'args'),
      action.arguments_sha256 ? h('p', { class: 'sha mono', title: 'SHA-256 of the canonical arguments' }, 'SHA-256 ', h('span', { class: 'sha-value' }, action.arguments_sha256)) : null)
    : null;

  replace(card, meta, h('h3', { class: 'summary' }, headline), goal, dl, args, decide, result);

  const ctx = {
    action, card, result, decide, opts,
    done(resolved, text) {
      card.classList.add('decided');
      replace(decide);
      replace(result, h('p', { class: 'ok' }, text),
        resolved && resolved.resolved_by ? h('p', { class: 'decided-by' }, byActor(resolved.resolved_by, 'Decided by ')) : null);
      if (opts.onDecided) opts.onDecided(resolved || action);
    },
  };
  const forms = { approval: approvalForm, function_call: functionForm, input: inputForm, in_doubt: inDoubtForm, budget: budgetForm, environment_connection: environmentForm, monitor: monitorForm, browser_permission: sitePermissionForm };
  if (action.status !== 'pending') {
    decide.append(h('p', { class: 'muted resolved-line' }, `${action.status}${action.resolution ? ': ' + truncate(JSON.stringify(action.resolution), 200) : ''}`,
      action.resolved_by ? [' ', byActor(action.resolved_by)] : null));
  } else if (!mayDecide(action)) {
    const me = identity();
    decide.append(h('p', { class: 'role-note', id: `no-decide-${action.id}` },
      `Waiting for a decision: your role${me ? ` (${me.role})` : ''} may not ${action.type === 'input' && action.kind === 'file' ? 'upload files' : 'decide actions'}.`));
  } else if (forms[action.type]) {
    forms[action.type](ctx);
  }
  return card;
}

// decisionText says in a word or two how an action was resolved, from its
// resolution (the decision as recorded).
export function decisionText(action) {
  const r = action.resolution && typeof action.resolution === 'object' ? action.resolution : {};
  const words = { approve: 'approved', reject: 'rejected', stop: 'stopped', happened: 'recorded as happened', did_not_happen: 'recorded as not happened', skip: 'skipped', connected: 'a runner connected', continue: 'continued', allow: 'allowed', deny: 'denied' };
  if (r.decision) return words[r.decision] || r.decision;
  if (r.answer !== undefined) return `answered “${truncate(String(r.answer), 80)}”`;
  if (r.error) return 'failed with an error';
  if (r.output !== undefined) return 'output sent';
  return action.status;
}

// decidedRow is one line of a list of decided actions: what was asked,
// how it was decided, by whom and when.
export function decidedRow(action, opts = {}) {
  const headline = action.type === 'input' ? (action.question || action.summary) : (action.summary || action.tool || action.type);
  return h('li', { class: 'decided-row', dataset: { actionId: action.id, status: action.status } },
    chip(typeName(action), `type-${action.type}`), ' ',
    opts.showSession !== false ? [h('a', { href: `#/sessions/${enc(action.session_id)}`, class: 'mono', title: action.session_id }, shortId(action.session_id)), ' '] : null,
    h('span', { class: 'summary' }, truncate(headline, 160)), ': ',
    h('strong', { class: 'decision' }, decisionText(action)), ' ',
    byActor(action.resolved_by),
    action.resolved_at ? [' · ', time(action.resolved_at)] : null);
}

// mayDecide reports whether the signed-in role may answer action: a file
// input is answered by an upload, every other action by a decision.
function mayDecide(action) {
  return action.type === 'input' && action.kind === 'file' ? can('PutFileIfMatch') : can('DecideAction');
}

// approversFact is the card's "Who may decide" line, with a note when the
// signed-in key is not among them (the server refuses its decision with a
// 403 saying what the policy requires).
function approversFact(action, session) {
  const why = excludedBy(action.approvers, session);
  return h('span', { class: 'approvers' }, approversText(action.approvers), why ? [' ', h('span', { class: 'excluded' }, why)] : null);
}

function setGoal(el, session) {
  const text = session.goal || session.input || '';
  replace(el, session.agent ? h('span', { class: 'chip' }, `${session.agent.name} v${session.agent.version}`) : null, ' ', truncate(text, 240));
}

// setSession fills in the goal of a card rendered before its session was
// known.
export function setCardSession(card, session) {
  const el = card.querySelector('.goal');
  if (el) setGoal(el, session);
  // The session names its creator, whom a not_creator rule excludes.
  const action = cardActions.get(card);
  const ap = card.querySelector('.approvers');
  if (action && ap) ap.replaceWith(approversFact(action, session));
}

// post sends a decision and reports the outcome on the card. The one
// Idempotency-Key per form makes a double submit a replay.
async function post(ctx, button, body, key, doneText) {
  replace(ctx.result);
  try {
    const resolved = await busy(button, api.post(
      `/v1/sessions/${enc(ctx.action.session_id)}/actions/${enc(ctx.action.id)}`, body, { idempotencyKey: key }));
    ctx.done(resolved, doneText);
  } catch (err) {
    replace(ctx.result, errorBox(err));
    if (err.status === 409) {
      ctx.result.append(h('p', { class: 'muted' }, 'Someone may have decided it already, or the arguments changed: the list refreshes by itself.'));
    }
  }
}

function buttonRow(...buttons) {
  return h('div', { class: 'buttons' }, buttons);
}

function approvalForm(ctx) {
  const a = ctx.action;
  const key = newKey();
  const panel = h('div', { class: 'panel' });
  const sha = a.arguments_sha256 ? { arguments_sha256: a.arguments_sha256 } : {};

  const approve = h('button', { type: 'button', class: 'primary', dataset: { act: 'approve' } }, 'Approve');
  approve.addEventListener('click', () => post(ctx, approve, { decision: 'approve', ...sha }, key, resolvedText.approve));

  const edit = h('button', { type: 'button', dataset: { act: 'edit' } }, 'Edit arguments');
  const reject = h('button', { type: 'button', class: 'danger-outline', dataset: { act: 'reject-open' } }, 'Reject…');
  const stop = h('button', { type: 'button', class: 'danger-outline', dataset: { act: 'stop-open' } }, 'Stop the task…');

  edit.addEventListener('click', () => {
    replace(ctx.result);
    replace(panel, editor(ctx, key, sha));
  });
  reject.addEventListener('click', () => {
    replace(ctx.result);
    const reason = h('textarea', { rows: 2, required: true, class: 'reason', placeholder: 'Why not? The agent sees this.' });
    const go = h('button', { type: 'button', class: 'danger', dataset: { act: 'reject' } }, 'Reject');
    go.addEventListener('click', () => {
      if (!reason.value.trim()) {
        replace(ctx.result, errorBox('A reason is required: the agent is told why.'));
        reason.focus();
        return;
      }
      post(ctx, go, { decision: 'reject', reason: reason.value.trim(), ...sha }, key, resolvedText.reject);
    });
    replace(panel, field('Reason for rejecting', reason), buttonRow(go));
    reason.focus();
  });
  stop.addEventListener('click', () => {
    replace(ctx.result);
    const reason = h('textarea', { rows: 2, class: 'reason', placeholder: 'Optional: why the task stops' });
    const go = h('button', { type: 'button', class: 'danger', dataset: { act: 'stop' } }, 'Stop the task');
    go.addEventListener('click', () => {
      const body = { decision: 'stop', ...sha };
      if (reason.value.trim()) body.reason = reason.value.trim();
      post(ctx, go, body, key, resolvedText.stop);
    });
    replace(panel, h('p', { class: 'muted' }, 'The call does not run and the turn fails with stop_reason "stopped".'),
      field('Reason (optional)', reason), buttonRow(go));
  });
  ctx.decide.append(buttonRow(approve, edit, reject, stop), panel);
}

// editor is the argument editor of an approval: JSON text, checked as it is
// typed (JSON syntax, then the tool's schema when the agent's spec has one).
function editor(ctx, key, sha) {
  const a = ctx.action;
  const area = h('textarea', { class: 'args-editor mono', rows: 10, spellcheck: 'false', 'aria-label': 'Edited arguments (JSON)' });
  area.value = pretty(a.arguments ?? {});
  const check = h('div', { class: 'check', 'aria-live': 'polite' });
  const go = h('button', { type: 'button', class: 'primary', dataset: { act: 'approve-edited' } }, 'Approve with these arguments');
  const schemaNote = h('p', { class: 'hint' }, 'Checking for the tool\'s schema…');
  let schema = null;

  const run = () => {
    const parsed = parseJSON(area.value);
    let errs = [];
    if (parsed.error) errs = [{ path: 'arguments', message: parsed.error }];
    else if (parsed.value === null || typeof parsed.value !== 'object' || Array.isArray(parsed.value)) {
      errs = [{ path: 'arguments', message: 'must be a JSON object' }];
    } else if (schema) errs = validate(schema, parsed.value);
    replace(check, errs.length
      ? h('ul', { class: 'errors' }, errs.map((e) => h('li', { class: 'error' }, `${e.path}: ${e.message}`)))
      : h('p', { class: 'ok' }, schema ? 'Valid JSON that fits the tool\'s schema.' : 'Valid JSON.'));
    go.disabled = errs.length > 0;
    return parsed;
  };
  area.addEventListener('input', run);
  const agent = ctx.opts.session ? ctx.opts.session.agent : null;
  const schemaP = ctx.opts.sessionPromise
    ? ctx.opts.sessionPromise.then((s) => toolSchema(s && s.agent, a.tool))
    : toolSchema(agent, a.tool);
  schemaP.then((sch) => {
    schema = sch;
    replace(schemaNote, sch
      ? 'Checked here against the tool\'s JSON schema from the agent\'s spec; the server checks it again.'
      : 'The server checks the arguments against the tool\'s schema when you approve; an error names the field.');
    run();
  });
  go.addEventListener('click', () => {
    const parsed = run();
    if (parsed.error) return;
    post(ctx, go, { decision: 'approve', arguments: parsed.value, ...sha }, key, 'Approved with edited arguments: the call runs with them.');
  });
  const cancel = h('button', { type: 'button', class: 'link' }, 'Cancel edit');
  cancel.addEventListener('click', () => {
    replace(ctx.result);
    area.closest('.panel') && replace(area.closest('.panel'));
  });
  run();
  return [field('Arguments (JSON)', area), schemaNote, check, buttonRow(go, cancel)];
}

function functionForm(ctx) {
  const key = newKey();
  const out = h('textarea', { class: 'output-editor mono', rows: 5, spellcheck: 'false', placeholder: '{"ok": true}' });
  const check = h('div', { class: 'check' });
  const send = h('button', { type: 'button', class: 'primary', dataset: { act: 'output' } }, 'Send output');
  const errText = h('input', { type: 'text', class: 'error-text', placeholder: 'What went wrong' });
  const sendErr = h('button', { type: 'button', class: 'danger-outline', dataset: { act: 'error' } }, 'Send error');
  const run = () => {
    if (!out.value.trim()) {
      replace(check, h('p', { class: 'hint' }, 'The output is any JSON value the model will see.'));
      send.disabled = true;
      return null;
    }
    const p = parseJSON(out.value);
    replace(check, p.error ? h('p', { class: 'error' }, p.error) : h('p', { class: 'ok' }, 'Valid JSON.'));
    send.disabled = Boolean(p.error);
    return p;
  };
  out.addEventListener('input', run);
  send.addEventListener('click', () => {
    const p = run();
    if (p && !p.error) post(ctx, send, { output: p.value }, key, 'Output sent: the model sees it as the tool\'s result.');
  });
  sendErr.addEventListener('click', () => {
    if (!errText.value.trim()) {
      replace(ctx.result, errorBox('Write the error the model should see.'));
      return;
    }
    post(ctx, sendErr, { error: errText.value.trim() }, key, 'Error sent: the tool call fails with it.');
  });
  run();
  ctx.decide.append(
    h('p', { class: 'muted' }, 'This is an application function: the server does not run it. Supply its result.'),
    field('Output (JSON)', out), check, buttonRow(send),
    field('Or fail the call with an error', errText), buttonRow(sendErr));
}

function inputForm(ctx) {
  const key = newKey();
  const a = ctx.action;
  if (a.kind === 'file') {
    fileInputForm(ctx);
    return;
  }
  if (a.choices && a.choices.length) {
    const row = buttonRow(a.choices.map((c) => {
      const b = h('button', { type: 'button', class: 'choice', dataset: { act: 'choice', choice: c } }, c);
      b.addEventListener('click', () => post(ctx, b, { answer: c }, key, `Answered: ${c}`));
      return b;
    }));
    ctx.decide.append(h('p', { class: 'muted' }, 'Choose an answer:'), row);
    return;
  }
  const answer = h('textarea', { rows: 3, class: 'answer', placeholder: 'Your answer' });
  const go = h('button', { type: 'button', class: 'primary', dataset: { act: 'answer' } }, 'Answer');
  go.addEventListener('click', () => {
    if (!answer.value.trim()) {
      replace(ctx.result, errorBox('The answer must not be blank.'));
      return;
    }
    post(ctx, go, { answer: answer.value.trim() }, key, 'Answered.');
  });
  ctx.decide.append(field('Answer', answer), buttonRow(go));
}

function inDoubtForm(ctx) {
  const key = newKey();
  const out = h('textarea', { class: 'output-editor mono', rows: 3, spellcheck: 'false', placeholder: 'Optional: the output the model should see (JSON)' });
  const reason = h('input', { type: 'text', class: 'reason', placeholder: 'Optional: why it is skipped' });
  const happened = h('button', { type: 'button', class: 'primary', dataset: { act: 'happened' } }, 'It happened');
  const notHappened = h('button', { type: 'button', dataset: { act: 'did-not-happen' } }, 'It did not happen: run it again');
  const skip = h('button', { type: 'button', class: 'danger-outline', dataset: { act: 'skip' } }, 'Skip it');
  happened.addEventListener('click', () => {
    const body = { decision: 'happened' };
    if (out.value.trim()) {
      const p = parseJSON(out.value);
      if (p.error) {
        replace(ctx.result, errorBox(`output: ${p.error}`));
        return;
      }
      body.output = p.value;
    }
    post(ctx, happened, body, key, resolvedText.happened);
  });
  notHappened.addEventListener('click', () => post(ctx, notHappened, { decision: 'did_not_happen' }, key, resolvedText.did_not_happen));
  skip.addEventListener('click', () => {
    const body = { decision: 'skip' };
    if (reason.value.trim()) body.reason = reason.value.trim();
    post(ctx, skip, body, key, resolvedText.skip);
  });
  ctx.decide.append(
    h('p', { class: 'muted' }, 'The worker stopped before this irreversible call\'s outcome was recorded. Check the world, then say what happened.'),
    field('Output, if it happened (JSON)', out), buttonRow(happened, notHappened),
    field('Reason, if you skip it', reason), buttonRow(skip));
}

function budgetForm(ctx) {
  const key = newKey();
  const a = ctx.action;
  const dim = a.limit && budgetFields[a.limit.name];
  const inputs = {};
  const rows = [];
  if (dim) {
    const [maxName, softName, unit] = dim;
    const step = a.limit.name === 'cost_usd' ? '0.01' : '1';
    inputs[softName] = h('input', { type: 'number', min: 0, step, class: 'budget-soft', placeholder: 'keep' });
    inputs[maxName] = h('input', { type: 'number', min: 0, step, class: 'budget-max', placeholder: 'keep' });
    rows.push(h('div', { class: 'row' },
      field(`New soft limit (${unit})`, inputs[softName], 'Blank: the reached soft limit is removed.'),
      field(`New hard limit (${unit})`, inputs[maxName], 'Blank: kept as it is.')));
  }
  const approve = h('button', { type: 'button', class: 'primary', dataset: { act: 'budget-approve' } }, 'Approve spending past it');
  const reason = h('input', { type: 'text', class: 'reason', placeholder: 'Optional: why it stops' });
  const stop = h('button', { type: 'button', class: 'danger-outline', dataset: { act: 'budget-stop' } }, 'Stop the task');
  approve.addEventListener('click', () => {
    const budget = {};
    for (const [name, el] of Object.entries(inputs)) {
      if (el.value === '') continue;
      const v = Number(el.value);
      if (!Number.isFinite(v) || v < 0) {
        replace(ctx.result, errorBox(`budget.${name}: must be a number >= 0`));
        return;
      }
      budget[name] = v;
    }
    const body = { decision: 'approve' };
    if (Object.keys(budget).length) body.budget = budget;
    post(ctx, approve, body, key, 'Approved: the session goes on.');
  });
  stop.addEventListener('click', () => {
    const body = { decision: 'stop' };
    if (reason.value.trim()) body.reason = reason.value.trim();
    post(ctx, stop, body, key, 'Stopped: the turn fails with budget_exceeded.');
  });
  ctx.decide.append(...rows, buttonRow(approve), field('Or stop the task', reason), buttonRow(stop));
}

// environmentForm: an environment_connection action resolves by itself
// when a matching runner connects. A person may unpin a session whose
// environment is pinned to a runner (its key was replaced: any matching
// runner may then take it; the server answers 409 for a session pinned to
// none, shown as the error), or stop the task.
function environmentForm(ctx) {
  const key = newKey();
  const unpinKey = newKey(); // its own: a 409 for unpin must not answer a stop after it
  const unpinReason = h('input', { type: 'text', class: 'unpin-reason', placeholder: 'Optional: why (e.g. its key was replaced)' });
  const unpin = h('button', { type: 'button', dataset: { act: 'environment-unpin' } }, 'Unpin: let any matching runner take it');
  unpin.addEventListener('click', () => {
    const body = { decision: 'unpin' };
    if (unpinReason.value.trim()) body.reason = unpinReason.value.trim();
    post(ctx, unpin, body, unpinKey, 'Unpinned: the session goes on on a matching runner.');
  });
  const reason = h('input', { type: 'text', class: 'reason', placeholder: 'Optional: why it stops' });
  const stop = h('button', { type: 'button', class: 'danger-outline', dataset: { act: 'environment-stop' } }, 'Stop the task');
  stop.addEventListener('click', () => {
    const body = { decision: 'stop' };
    if (reason.value.trim()) body.reason = reason.value.trim();
    post(ctx, stop, body, key, 'Stopped: the turn ends.');
  });
  ctx.decide.append(h('p', { class: 'muted' }, 'The session goes on by itself when a matching runner connects.'),
    field('If its runner was replaced (a new key under the same name), unpin it', unpinReason), buttonRow(unpin),
    field('Or stop the task', reason), buttonRow(stop));
}

// monitorForm decides a monitor action: a detector of the trajectory
// monitor found something (the finding and its events are in the card);
// the session waits before its next call until a person lets it continue
// or stops the task.
function monitorForm(ctx) {
  const key = newKey();
  const go = h('button', { type: 'button', class: 'primary', dataset: { act: 'monitor-continue' } }, 'Let it continue');
  const reason = h('input', { type: 'text', class: 'reason', placeholder: 'Optional: why it stops' });
  const stop = h('button', { type: 'button', class: 'danger-outline', dataset: { act: 'monitor-stop' } }, 'Stop the task');
  go.addEventListener('click', () => post(ctx, go, { decision: 'continue' }, key, 'Continued: the session goes on.'));
  stop.addEventListener('click', () => {
    const body = { decision: 'stop' };
    if (reason.value.trim()) body.reason = reason.value.trim();
    post(ctx, stop, body, key, 'Stopped: the turn ends.');
  });
  ctx.decide.append(buttonRow(go), field('Or stop the task', reason), buttonRow(stop));
}

// sitePermissionForm decides a browser_permission action: allow the site
// for this call or for the session, or deny it with a reason the agent
// reads. Every decision names the action's request_id, the request this
// card showed: the server refuses (409) a decision on another.
function sitePermissionForm(ctx) {
  const key = newKey();
  const a = ctx.action;
  const once = h('button', { type: 'button', class: 'primary', dataset: { act: 'allow-once' } }, 'Allow once');
  const session = h('button', { type: 'button', dataset: { act: 'allow-session' } }, 'Allow for this session');
  const reason = h('input', { type: 'text', class: 'reason', placeholder: 'Why not (the agent reads it)' });
  const deny = h('button', { type: 'button', class: 'danger-outline', dataset: { act: 'deny' } }, 'Deny');
  once.addEventListener('click', () => post(ctx, once, { decision: 'allow', scope: 'once', request_id: a.request_id }, key, 'Allowed for this call: the browser goes on to the site.'));
  session.addEventListener('click', () => post(ctx, session, { decision: 'allow', scope: 'session', request_id: a.request_id }, key, 'Allowed for the rest of the session.'));
  deny.addEventListener('click', () => {
    if (!reason.value.trim()) {
      replace(ctx.result, errorBox('reason: say why; the agent reads it.'));
      return;
    }
    post(ctx, deny, { decision: 'deny', reason: reason.value.trim(), request_id: a.request_id }, key, resolvedText.deny);
  });
  ctx.decide.append(h('p', { class: 'muted' }, 'The agent\'s browser asks to visit ', h('code', null, a.origin), ' for the first time in this session.'),
    buttonRow(once, session), field('Or deny it', reason), buttonRow(deny));
}

// fileInputForm answers an input action that asks for a file: the upload
// goes to the path the agent named, and resolves the action in the same
// step (PUT /v1/sessions/{id}/files/{path}?action_id=…).
function fileInputForm(ctx) {
  const a = ctx.action;
  const file = h('input', { type: 'file', class: 'file-answer' });
  const go = h('button', { type: 'button', class: 'primary', dataset: { act: 'upload' } }, 'Upload');
  go.addEventListener('click', async () => {
    replace(ctx.result);
    const f = file.files && file.files[0];
    if (!f) {
      replace(ctx.result, errorBox('Choose the file to upload.'));
      return;
    }
    try {
      const url = `/v1/sessions/${enc(a.session_id)}/files/${filePath(a.path)}`;
      const ch = await busy(go, putFile(url, f, { action_id: a.id }));
      ctx.done(null, `Uploaded ${ch.path} (${ch.size} bytes).`);
    } catch (err) {
      replace(ctx.result, errorBox(err));
    }
  });
  ctx.decide.append(h('p', { class: 'muted' }, 'The agent asks for a file, to be placed at ', h('code', { class: 'file-path' }, a.path), '.'),
    field('File', file), buttonRow(go));
}
