// Who is signed in (GET /v1/me) and what their role may do, and how the
// pages name the person behind a decision.
//
// The UI offers only what the role may do: can(method) asks the list of
// operations the server gave for this key (the names of app.Permissions:
// "DecideAction", "Cancel", "Steer", …), so a control that would only earn
// a 403 is not shown. The server checks every request all the same; this
// is about not offering dead buttons, not about security.

import { h } from './dom.js';

let me = null;

// setIdentity keeps the answer of GET /v1/me (null when signed out).
export function setIdentity(identity) {
  me = identity || null;
}

export function identity() {
  return me;
}

// can reports whether the signed-in role may call the API operation
// method. Before the identity is known (or from a server that gave no
// list) it says yes: the server's answer is then the judge, as it always
// is.
export function can(method) {
  if (!me || !Array.isArray(me.permissions)) return true;
  return me.permissions.includes(method);
}

// actorText is "alice (approver)", or "" for no actor.
export function actorText(actor) {
  if (!actor || typeof actor !== 'object' || !actor.name) return '';
  return actor.role ? `${actor.name} (${actor.role})` : String(actor.name);
}

// byActor is the "by alice (approver)" of a decision, as an element the
// tests and the styles find (.actor, data-actor the name), or null when
// the journal recorded no actor.
export function byActor(actor, prefix = 'by ') {
  const text = actorText(actor);
  if (!text) return null;
  return h('span', { class: 'actor', dataset: { actor: actor.name, role: actor.role || '' }, title: actor.key_id || '' }, prefix, text);
}

// isMe reports whether actor is the signed-in key (by key id when both
// have one, else by name and role: a bootstrap key has no id).
export function isMe(actor) {
  if (!me || !actor) return false;
  if (me.key_id || actor.key_id) return me.key_id === actor.key_id;
  return me.name === actor.name && me.role === actor.role;
}

// approversText describes an approval's requirement on who decides it
// ({roles, names, not_creator}: every condition given must hold), or ""
// when there is none.
export function approversText(ap) {
  if (!ap || typeof ap !== 'object') return '';
  const parts = [];
  if (Array.isArray(ap.roles) && ap.roles.length) parts.push(`a key of role ${ap.roles.join(' or ')}`);
  if (Array.isArray(ap.names) && ap.names.length) parts.push(`named ${ap.names.join(' or ')}`);
  if (ap.not_creator) parts.push('not who started the session');
  return parts.join('; ');
}

// excludedBy says why the signed-in key may not decide under the
// requirement ap ("" when it may, or when that cannot be told here: the
// server decides). session, when known, names its creator (for a
// sub-agent the server judges by its root's creator, which the page may
// not know: then it says nothing).
export function excludedBy(ap, session) {
  if (!me || !ap || typeof ap !== 'object') return '';
  if (Array.isArray(ap.roles) && ap.roles.length && !ap.roles.includes(me.role)) {
    return `You are ${actorText(me)}: your role is not among them.`;
  }
  if (Array.isArray(ap.names) && ap.names.length && !ap.names.includes(me.name)) {
    return `You are ${actorText(me)}: your name is not among them.`;
  }
  if (ap.not_creator && session && !session.parent_id && session.created_by && isMe(session.created_by)) {
    return 'You started this session, so someone else must decide.';
  }
  return '';
}
