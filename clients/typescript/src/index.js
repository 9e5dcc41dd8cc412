// A client for the Longhaul HTTP API: ESM, fetch-based, no runtime
// dependencies (Node.js 18+, Deno, Bun and browsers have fetch and
// ReadableStream). Types are in index.d.ts.

import { ConnectionFailedError, LonghaulError, RateLimitedError, ServerError, errorFor } from './errors.js';

export * from './errors.js';

const sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => { clearTimeout(t); reject(signal.reason); }, { once: true });
  });

/** An id as one path segment: an id with a slash cannot escape its route. */
function seg(id) {
  if (typeof id !== 'string' || id === '') {
    throw new TypeError(`an id must be a non-empty string, got ${JSON.stringify(id)}`);
  }
  return encodeURIComponent(id);
}

/** The typed error for a non-2xx answer. */
async function apiError(res) {
  let code = '';
  let message = '';
  let field = null;
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text);
    code = body?.error?.code ?? '';
    message = body?.error?.message ?? '';
    field = body?.error?.field ?? null;
  } catch {
    message = text.slice(0, 200);
  }
  if (!message) message = `HTTP ${res.status}`;
  const ra = Number.parseFloat(res.headers.get('retry-after') ?? '');
  return errorFor(res.status, code, message, {
    field,
    retryAfter: Number.isFinite(ra) ? ra : null,
    requestId: res.headers.get('x-request-id'),
  });
}

/**
 * Parse a text/event-stream body into the events' JSON data. Frames are
 * id:, event: and data: lines ended by a blank line; comments (": ping")
 * and other fields are skipped.
 * @param {ReadableStream<Uint8Array>} body
 */
async function* readEvents(body) {
  const decoder = new TextDecoder();
  let buf = '';
  let data = [];
  for await (const chunk of body) {
    buf += decoder.decode(chunk, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      let line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line === '') {
        if (data.length > 0) {
          const event = JSON.parse(data.join('\n'));
          data = [];
          yield event;
        }
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const name = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (name === 'data') data.push(value);
    }
  }
}

/** A client of one Longhaul server. */
export class Client {
  #apiKey;

  /**
   * @param {{baseUrl: string, apiKey?: string, fetch?: typeof fetch}} options
   */
  constructor({ baseUrl, apiKey, fetch: fetchImpl } = {}) {
    let url;
    try {
      url = new URL(baseUrl);
    } catch {
      throw new TypeError(`baseUrl must be an http(s) URL, got ${JSON.stringify(baseUrl)}`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new TypeError(`baseUrl must be an http(s) URL, got ${JSON.stringify(baseUrl)}`);
    }
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.#apiKey = apiKey;
    this.fetch = fetchImpl ?? globalThis.fetch.bind(globalThis);
  }

  #url(path, query) {
    let url = this.baseUrl + path;
    if (query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) {
        if (v !== undefined && v !== null) q.set(k, String(v));
      }
      const s = q.toString();
      if (s) url += '?' + s;
    }
    return url;
  }

  #headers(extra) {
    const h = { Accept: 'application/json', ...extra };
    if (this.#apiKey) h.Authorization = `Bearer ${this.#apiKey}`;
    return h;
  }

  /**
   * Send one request and return its decoded JSON answer (null when empty).
   * The other methods are built on it; use it for routes they do not cover.
   */
  async request(method, path, { body, query, idempotencyKey, signal } = {}) {
    const headers = this.#headers();
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (idempotencyKey) headers['Idempotency-Key'] = idempotencyKey;
    let res;
    try {
      res = await this.fetch(this.#url(path, query), {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
      });
    } catch (err) {
      if (signal?.aborted) throw err;
      throw new ConnectionFailedError(0, '', `${method} ${path}: ${err?.cause?.message ?? err?.message ?? err}`);
    }
    if (!res.ok) throw await apiError(res);
    const text = await res.text();
    return text ? JSON.parse(text) : null;
  }

  // Sessions.

  /** Create a session and start its first turn. */
  createSession(body, { idempotencyKey } = {}) {
    return this.request('POST', '/v1/sessions', { body, idempotencyKey });
  }

  /** One session, with its pending required_actions. */
  getSession(id, { includeSubagents = false } = {}) {
    return this.request('GET', `/v1/sessions/${seg(id)}`, { query: includeSubagents ? { include: 'subagents' } : undefined });
  }

  /** A page of sessions: {data, next_cursor}. */
  listSessions({ status, agent, parentId, limit, cursor } = {}) {
    return this.request('GET', '/v1/sessions', { query: { status, agent, parent_id: parentId, limit, cursor } });
  }

  /** Every session matching the filters, page after page. */
  async *iterSessions(filters = {}) {
    let cursor;
    do {
      const page = await this.listSessions({ ...filters, cursor });
      yield* page.data;
      cursor = page.next_cursor;
    } while (cursor);
  }

  /** Send a follow-up turn (queued while a turn runs); returns the turn. */
  send(id, input, { idempotencyKey } = {}) {
    return this.request('POST', `/v1/sessions/${seg(id)}/turns`, { body: { input }, idempotencyKey });
  }

  /** Stop the running turn before its next call; returns the session. */
  cancel(id, reason) {
    return this.request('POST', `/v1/sessions/${seg(id)}/cancel`, { body: reason ? { reason } : {} });
  }

  // Required actions.

  /** The session's required actions ({status: 'pending'} for the open ones). */
  listActions(id, { status } = {}) {
    return this.request('GET', `/v1/sessions/${seg(id)}/actions`, { query: { status } });
  }

  /** Every session's actions (by default the pending ones): a page. */
  inbox({ status = 'pending', type, sessionId, limit, cursor } = {}) {
    return this.request('GET', '/v1/actions', { query: { status, type, session_id: sessionId, limit, cursor } });
  }

  /** One action. */
  getAction(actionId) {
    return this.request('GET', `/v1/actions/${seg(actionId)}`);
  }

  /** Decide a required action; returns it, resolved. */
  decide(id, actionId, body, { idempotencyKey } = {}) {
    return this.request('POST', `/v1/sessions/${seg(id)}/actions/${seg(actionId)}`, { body, idempotencyKey });
  }

  /** Approve a tool call (with edited arguments if given). */
  approve(id, actionId, { arguments: args } = {}) {
    return this.decide(id, actionId, args === undefined ? { decision: 'approve' } : { decision: 'approve', arguments: args });
  }

  /** Refuse a tool call; the reason goes back to the model. */
  reject(id, actionId, reason) {
    return this.decide(id, actionId, { decision: 'reject', reason });
  }

  /** Answer a function call with its output (any JSON), or {error}. */
  submitOutput(id, actionId, output, { error } = {}) {
    return this.decide(id, actionId, error !== undefined ? { error } : { output: output ?? null });
  }

  // The journal.

  /** A page of the session's events with seq greater than `after`. */
  listEvents(id, { after = 0, limit } = {}) {
    return this.request('GET', `/v1/sessions/${seg(id)}/events`, { query: { after, limit } });
  }

  /**
   * Follow the session's journal as it is written: yields every event with
   * seq greater than `after`, in order, until the caller stops iterating (or
   * `signal` aborts). A dropped connection is reconnected with Last-Event-ID
   * set to the last event yielded: no gap, no duplicate. After `maxRetries`
   * attempts in a row that bring no event, the last error is thrown; an
   * answer the API refuses (404, 401, 403…) is thrown at once.
   */
  async *streamEvents(id, { after = 0, maxRetries = 10, signal } = {}) {
    const path = `/v1/sessions/${seg(id)}/events/stream`;
    let last = after;
    let failures = 0;
    let delay = 100;
    for (;;) {
      const headers = this.#headers({ Accept: 'text/event-stream', 'Cache-Control': 'no-cache' });
      if (last > 0) headers['Last-Event-ID'] = String(last);
      const ctrl = new AbortController();
      const onAbort = () => ctrl.abort(signal.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      let err;
      try {
        const res = await this.fetch(this.#url(path), { headers, signal: ctrl.signal });
        if (!res.ok) {
          err = await apiError(res);
          if (!(err instanceof RateLimitedError || err instanceof ServerError)) throw err;
        } else {
          for await (const event of readEvents(res.body)) {
            if (event.seq <= last) continue; // never a duplicate
            last = event.seq;
            failures = 0;
            delay = 100;
            yield event;
          }
          err = new ConnectionFailedError(0, '', `GET ${path}: the server closed the stream`);
        }
      } catch (e) {
        if (e instanceof LonghaulError && !(e instanceof RateLimitedError || e instanceof ServerError)) throw e;
        if (signal?.aborted) throw signal.reason ?? e;
        err = e instanceof LonghaulError ? e : new ConnectionFailedError(0, '', `GET ${path}: ${e?.cause?.message ?? e?.message ?? e}`);
      } finally {
        signal?.removeEventListener('abort', onAbort);
        ctrl.abort(); // ends the response body when the caller stopped early
      }
      failures += 1;
      if (failures > maxRetries) throw err;
      let wait = delay;
      if (err instanceof RateLimitedError && err.retryAfter) wait = Math.max(wait, err.retryAfter * 1000);
      await sleep(wait, signal);
      delay = Math.min(delay * 2, 5000);
    }
  }

  // The rest.

  /** Who the API key is: name, role, project, permissions. */
  me() {
    return this.request('GET', '/v1/me');
  }

  /** The server's OpenAPI 3.1 document. */
  openapi() {
    return this.request('GET', '/v1/openapi.json');
  }
}
