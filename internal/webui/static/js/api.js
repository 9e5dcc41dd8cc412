// The HTTP API, as the UI uses it: JSON requests under /v1 with the API key
// (when there is one) as a bearer token, errors in the API's shape, and
// lists followed cursor by cursor.

const keyName = 'longhaul.apiKey';

// APIError is a non-2xx answer: its status, the API's error code and
// message, and the field at fault when one input was.
export class APIError extends Error {
  constructor(status, code, message, field) {
    super(message || `HTTP ${status}`);
    this.name = 'APIError';
    this.status = status;
    this.code = code || '';
    this.field = field || '';
  }

  // describe is the error as a person reads it: "field: message".
  describe() {
    return this.field ? `${this.field}: ${this.message}` : this.message;
  }
}

// The key lives in this tab's sessionStorage: it survives a reload but not
// the tab, and is never written to a URL.
export const auth = {
  get key() {
    try {
      return sessionStorage.getItem(keyName) || '';
    } catch {
      return '';
    }
  },
  set(key) {
    sessionStorage.setItem(keyName, key);
  },
  clear() {
    try {
      sessionStorage.removeItem(keyName);
    } catch {
      // Storage disabled: nothing was kept.
    }
  },
};

let authRequired = () => {};

// onAuthRequired registers what to do when the server answers 401 (show the
// sign-in screen).
export function onAuthRequired(fn) {
  authRequired = fn;
}

export function authHeaders(extra) {
  const h = new Headers(extra);
  const k = auth.key;
  if (k) h.set('Authorization', `Bearer ${k}`);
  return h;
}

// newKey returns a random Idempotency-Key. One is made per thing a person
// asks for, so a double click or a retry is answered by the first result.
export function newKey() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return 'ui-' + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

export function withQuery(path, query) {
  if (!query) return path;
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

export async function errorFrom(resp) {
  let code = '';
  let message = resp.statusText || `HTTP ${resp.status}`;
  let field = '';
  try {
    const body = await resp.json();
    if (body && body.error) {
      code = body.error.code;
      message = body.error.message;
      field = body.error.field || '';
    }
  } catch {
    // Not the API's error shape (a proxy's page): keep the status text.
  }
  const err = new APIError(resp.status, code, message, field);
  if (resp.status === 401) authRequired(err);
  return err;
}

// request sends one API request and returns the decoded JSON (null for an
// empty answer). It throws APIError for a non-2xx answer.
export async function request(method, path, opts = {}) {
  const init = { method, headers: authHeaders(), cache: 'no-store', signal: opts.signal };
  if (opts.body !== undefined) {
    init.body = JSON.stringify(opts.body);
    init.headers.set('Content-Type', 'application/json');
  }
  if (opts.idempotencyKey) init.headers.set('Idempotency-Key', opts.idempotencyKey);
  const resp = await fetch(withQuery(path, opts.query), init);
  if (!resp.ok) throw await errorFrom(resp);
  if (resp.status === 204) return null;
  const text = await resp.text();
  return text ? JSON.parse(text) : null;
}

export const api = {
  get: (path, query, opts = {}) => request('GET', path, { ...opts, query }),
  post: (path, body, opts = {}) =>
    request('POST', path, { ...opts, body, idempotencyKey: opts.idempotencyKey || newKey() }),
  patch: (path, body, opts = {}) => request('PATCH', path, { ...opts, body }),
};

// listAll follows next_cursor from the first page until the list ends or
// max items are read; it returns {data, truncated}.
export async function listAll(path, query, { max = 1000, signal } = {}) {
  const out = [];
  let cursor = '';
  for (;;) {
    const page = await api.get(path, { ...query, cursor }, { signal });
    out.push(...page.data);
    if (!page.next_cursor || page.data.length === 0) return { data: out, truncated: false };
    if (out.length >= max) return { data: out, truncated: true };
    cursor = page.next_cursor;
  }
}

// fetchBlob reads bytes with the API key (artifact content, blobs), for a
// preview or a download.
export async function fetchBlob(path, signal) {
  const resp = await fetch(path, { headers: authHeaders(), signal });
  if (!resp.ok) throw await errorFrom(resp);
  return resp.blob();
}

// fetchFile reads a workspace file with the API key: its bytes and its
// ETag (its SHA-256, quoted), which an edit of it sends back as If-Match.
export async function fetchFile(path, signal) {
  const resp = await fetch(path, { headers: authHeaders(), signal, cache: 'no-store' });
  if (!resp.ok) throw await errorFrom(resp);
  return { blob: await resp.blob(), etag: resp.headers.get('ETag') || '' };
}

export const enc = encodeURIComponent;

// putFile uploads a person's file: the raw bytes as
// application/octet-stream (the file routes' one exception to JSON
// bodies), with the API key; it returns the workspace change. With ifMatch
// (the ETag of the bytes an edit started from) the server refuses the
// write (409) when the file changed since.
export async function putFile(path, body, query, signal, ifMatch) {
  const headers = authHeaders({ 'Content-Type': 'application/octet-stream', ...(ifMatch ? { 'If-Match': ifMatch } : {}) });
  const resp = await fetch(withQuery(path, query), { method: 'PUT', headers, body, cache: 'no-store', signal });
  if (!resp.ok) throw await errorFrom(resp);
  return resp.json();
}

// filePath escapes a workspace-relative path for a URL, segment by segment;
// "." and ".." are escaped too, so the browser does not resolve them away
// and the server judges the path as typed.
export function filePath(p) {
  return p.split('/').map((seg) => (seg === '.' || seg === '..' ? seg.replaceAll('.', '%2E') : encodeURIComponent(seg))).join('/');
}
