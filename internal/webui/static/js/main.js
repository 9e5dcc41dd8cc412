// The app shell: sign-in when the server asks for a key, who is signed in
// (GET /v1/me: name, role, project) with a sign-out, the routes
// (#/sessions, #/sessions/{id}, #/inbox, #/reports), the navigation and the
// count of pending actions beside "Inbox".

import { api, auth, onAuthRequired, APIError } from './api.js';
import { h, replace, errorBox, chip } from './dom.js';
import { setIdentity, can } from './identity.js';
import { Scope, poll } from './live.js';
import { setInboxCount, setInboxRefresher } from './badge.js';
import { sessionsPage } from './pages/sessions.js';
import { sessionPage } from './pages/session.js';
import { inboxPage } from './pages/inbox.js';
import { reportsPage } from './pages/reports.js';

const app = document.getElementById('app');
const nav = document.getElementById('nav');
const account = document.getElementById('account');
const whoami = document.getElementById('whoami');
const signOutButton = document.getElementById('sign-out');

const routes = [
  [/^\/sessions\/([^/?]+)$/, (m) => ['sessions', (el, scope, q) => sessionPage(el, scope, decodeURIComponent(m[1]), q)]],
  [/^\/sessions$/, () => ['sessions', sessionsPage]],
  [/^\/inbox$/, () => ['inbox', inboxPage]],
  [/^\/reports$/, () => ['reports', reportsPage]],
];

let page = null; // the Scope of the page shown
let shell = null; // the Scope of the signed-in shell (the inbox badge)
let signedIn = false;

// parseHash splits "#/sessions?status=idle" into the path and the query.
function parseHash(hash = location.hash) {
  const raw = hash.replace(/^#/, '') || '/sessions';
  const [path, query] = raw.split('?', 2);
  return { path, query: new URLSearchParams(query || '') };
}

function route() {
  // A key that may not read sessions (a runner's) has no page to see.
  if (!signedIn || !can('ListSessions')) return;
  const { path, query } = parseHash();
  if (page) page.dispose();
  page = new Scope();
  for (const [re, make] of routes) {
    const m = re.exec(path);
    if (!m) continue;
    const [section, render] = make(m);
    for (const a of nav.querySelectorAll('a')) a.classList.toggle('active', a.dataset.nav === section);
    clearPage();
    window.scrollTo(0, 0);
    Promise.resolve(render(app, page, query)).catch((err) => {
      if (err instanceof APIError && err.status === 401) return;
      app.append(errorBox(err));
    });
    return;
  }
  location.replace('#/sessions');
}

function clearPage() {
  replace(app);
  document.title = 'Longhaul';
}

// The badge is kept current on every page, slowly; the inbox page polls
// faster and sets it too.
function startShell() {
  if (shell) shell.dispose();
  shell = new Scope();
  const badge = poll(shell, async () => {
    const page1 = await api.get('/v1/actions', { status: 'pending', limit: 500 }, { signal: shell.signal });
    setInboxCount(page1.next_cursor ? 500 : page1.data.length);
  }, { interval: 15000, max: 60000 });
  setInboxRefresher(badge.now);
}

// showApp shows the signed-in shell for the identity me (GET /v1/me). A
// key whose role reads nothing (a runner's) is told so, rather than shown
// pages that would each be a 403.
function showApp(me) {
  setIdentity(me);
  signedIn = true;
  showIdentity(me);
  account.hidden = false;
  signOutButton.hidden = !auth.key;
  if (!can('ListSessions')) {
    nav.hidden = true;
    clearPage();
    app.append(h('div', { class: 'card', id: 'no-access' }, h('h1', null, 'Nothing to show to this key'),
      h('p', null, `The ${me.role} role may not read sessions, so this UI has nothing to offer it.`),
      h('p', { class: 'muted' }, 'Sign in with a key of another role.')));
    return;
  }
  nav.hidden = false;
  startShell();
  route();
}

// showIdentity names who is signed in, in the header: name, role and
// project ("all projects" for an admin key that is not bound to one).
function showIdentity(me) {
  replace(whoami,
    h('span', { class: 'whoami-name', id: 'whoami-name', title: me.key_id || '' }, me.name),
    ' ', chip(me.role, `role role-${me.role}`),
    ' ', h('span', { class: 'whoami-project muted', id: 'whoami-project' }, me.project ? `project ${me.project}` : 'all projects'));
  whoami.dataset.role = me.role;
}

function signOut(message) {
  signedIn = false;
  auth.clear();
  setIdentity(null);
  if (page) page.dispose();
  if (shell) shell.dispose();
  page = null;
  nav.hidden = true;
  account.hidden = true;
  replace(whoami);
  showLogin(message);
}

function showLogin(message) {
  clearPage();
  document.title = 'Sign in · Longhaul';
  const input = h('input', {
    type: 'password', id: 'api-key', name: 'api-key', autocomplete: 'current-password',
    required: true, placeholder: 'API key', spellcheck: 'false',
  });
  const status = h('div', { class: 'login-status' }, message ? errorBox(message) : null);
  const button = h('button', { type: 'submit', class: 'primary', id: 'sign-in' }, 'Sign in');
  const form = h('form', { class: 'card login', id: 'login-form' },
    h('h1', null, 'Sign in'),
    h('p', { class: 'muted' }, 'This server requires an API key. It is kept in this tab only and sent with each request as a bearer token.'),
    h('label', { class: 'field' }, h('span', { class: 'field-label' }, 'API key'), input),
    button, status);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const key = input.value.trim();
    if (!key) return;
    auth.set(key);
    button.disabled = true;
    replace(status);
    try {
      showApp(await probe());
    } catch (err) {
      auth.clear();
      if (err instanceof APIError && err.status === 403) {
        // A key the server knows but tells nothing, not even who it is (a
        // runner's, which opens its connection and nothing else): there is
        // nothing to sign in to.
        replace(status, h('div', { class: 'card', id: 'no-access' }, h('h1', null, 'Nothing to show to this key'),
          h('p', null, err.message),
          h('p', { class: 'muted' }, 'Sign in with a key of another role.')));
      } else {
        replace(status, errorBox(err.status === 401 ? 'That API key was refused.' : err));
      }
      input.select();
    } finally {
      button.disabled = false;
    }
  });
  app.append(form);
  input.focus();
}

// probe asks who the key is: it proves the key and tells the shell what
// to offer.
function probe() {
  return api.get('/v1/me');
}

async function boot() {
  onAuthRequired(() => {
    if (signedIn) signOut(auth.key ? 'The server refused the API key; sign in again.' : 'This server requires an API key.');
  });
  signOutButton.addEventListener('click', () => signOut());
  window.addEventListener('hashchange', route);
  try {
    showApp(await probe());
  } catch (err) {
    if (err instanceof APIError && err.status === 401) {
      auth.clear();
      showLogin();
      return;
    }
    clearPage();
    if (err instanceof APIError && err.status === 403) {
      app.append(h('div', { class: 'card' }, h('h1', null, 'Not allowed from here'),
        h('p', null, err.message),
        h('p', { class: 'muted' }, 'Start the server with an API key (longhaul serve --api-key …) to use it from another machine.')));
      return;
    }
    app.append(h('div', { class: 'card' }, h('h1', null, 'The server did not answer'), errorBox(err),
      h('button', { type: 'button', onclick: () => location.reload() }, 'Try again')));
  }
}

boot();
