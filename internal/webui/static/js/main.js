// The app shell: sign-in when the server asks for a key, the routes
// (#/sessions, #/sessions/{id}, #/inbox, #/reports), the navigation and the
// count of pending actions beside "Inbox".

import { api, auth, onAuthRequired, APIError } from './api.js';
import { h, replace, errorBox } from './dom.js';
import { Scope, poll } from './live.js';
import { setInboxCount, setInboxRefresher } from './badge.js';
import { sessionsPage } from './pages/sessions.js';
import { sessionPage } from './pages/session.js';
import { inboxPage } from './pages/inbox.js';
import { reportsPage } from './pages/reports.js';

const app = document.getElementById('app');
const nav = document.getElementById('nav');
const account = document.getElementById('account');

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
  if (!signedIn) return;
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

function showApp() {
  signedIn = true;
  nav.hidden = false;
  account.hidden = !auth.key;
  startShell();
  route();
}

function signOut(message) {
  signedIn = false;
  auth.clear();
  if (page) page.dispose();
  if (shell) shell.dispose();
  page = null;
  nav.hidden = true;
  account.hidden = true;
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
      await probe();
      showApp();
    } catch (err) {
      auth.clear();
      replace(status, errorBox(err.status === 401 ? 'That API key was refused.' : err));
      input.select();
    } finally {
      button.disabled = false;
    }
  });
  app.append(form);
  input.focus();
}

function probe() {
  return api.get('/v1/sessions', { limit: 1 });
}

async function boot() {
  onAuthRequired(() => {
    if (signedIn) signOut(auth.key ? 'The server refused the API key; sign in again.' : 'This server requires an API key.');
  });
  document.getElementById('sign-out').addEventListener('click', () => signOut());
  window.addEventListener('hashchange', route);
  try {
    await probe();
    showApp();
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
