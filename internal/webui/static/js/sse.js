// Server-sent events read with fetch() and a ReadableStream, so the API key
// goes in the Authorization header (EventSource cannot send one, and a key
// in the URL would end up in logs). The stream resumes itself with
// Last-Event-ID after a drop, like EventSource, from the id of the last
// frame it delivered: a plain seq, or a tree cursor (t1.…) for a stream
// with ?include=subagents. The server then sends every event once, in
// order, with no gap.

import { authHeaders, errorFrom } from './api.js';

// SSEParser turns text into frames per the WHATWG event-stream rules: lines
// end with CRLF, LF or CR; "field: value" lines; a blank line dispatches;
// ":" starts a comment; the id persists across frames.
export class SSEParser {
  constructor(onFrame, onComment) {
    this.onFrame = onFrame;
    this.onComment = onComment || (() => {});
    this.decoder = new TextDecoder();
    this.rest = '';
    this.skipLF = false; // the last chunk ended with CR: a leading LF belongs to it
    this.data = [];
    this.event = '';
    this.lastId = '';
  }

  // push takes the next bytes of the body.
  push(bytes) {
    this.feed(this.decoder.decode(bytes, { stream: true }));
  }

  // feed takes the next text of the body.
  feed(text) {
    let s = this.rest + text;
    this.rest = '';
    let start = 0;
    if (this.skipLF && s.length > 0) {
      if (s[0] === '\n') start = 1;
      this.skipLF = false;
    }
    for (let i = start; i < s.length; i++) {
      const c = s[i];
      if (c !== '\n' && c !== '\r') continue;
      this.line(s.slice(start, i));
      if (c === '\r') {
        if (i + 1 === s.length) this.skipLF = true;
        else if (s[i + 1] === '\n') i++;
      }
      start = i + 1;
    }
    this.rest = s.slice(start);
  }

  line(l) {
    if (l === '') {
      this.dispatch();
      return;
    }
    if (l[0] === ':') {
      this.onComment(l.slice(1).trim());
      return;
    }
    const i = l.indexOf(':');
    const field = i < 0 ? l : l.slice(0, i);
    let value = i < 0 ? '' : l.slice(i + 1);
    if (value[0] === ' ') value = value.slice(1);
    switch (field) {
      case 'event':
        this.event = value;
        break;
      case 'data':
        this.data.push(value);
        break;
      case 'id':
        if (!value.includes('\0')) this.lastId = value;
        break;
      default:
        // retry and unknown fields: the reconnect delay is ours to choose.
        break;
    }
  }

  dispatch() {
    if (this.data.length === 0) {
      this.event = '';
      return;
    }
    const frame = { id: this.lastId, event: this.event || 'message', data: this.data.join('\n') };
    this.data = [];
    this.event = '';
    this.onFrame(frame);
  }
}

// Without a byte for this long (the server pings every 15 s by default) the
// connection is taken for dead and opened again.
const idleTimeoutMs = 45000;
const minBackoffMs = 500;
const maxBackoffMs = 15000;

// follow streams path's events until stop() is called. onEvent(event, id)
// gets each decoded event and the frame's id (the resume point after it);
// onState(state, detail) hears 'connecting', 'live', 'retrying' (with the
// error) and 'failed' (an error that a retry cannot fix: 4xx). cursor is
// where to start ('' for the beginning).
export function follow({ path, cursor = '', onEvent, onState = () => {} }) {
  let stopped = false;
  let conn = null;
  let backoff = minBackoffMs;
  let retryTimer = null;

  const stop = () => {
    stopped = true;
    clearTimeout(retryTimer);
    if (conn) conn.abort();
  };

  const retry = (err) => {
    if (stopped) return;
    onState('retrying', err);
    retryTimer = setTimeout(run, backoff);
    backoff = Math.min(backoff * 2, maxBackoffMs);
  };

  async function run() {
    if (stopped) return;
    onState('connecting');
    conn = new AbortController();
    let idle = null;
    const touch = () => {
      clearTimeout(idle);
      idle = setTimeout(() => conn.abort(new Error('the stream went quiet')), idleTimeoutMs);
    };
    try {
      const headers = authHeaders({ Accept: 'text/event-stream' });
      if (cursor) headers.set('Last-Event-ID', cursor);
      touch();
      const resp = await fetch(path, { headers, signal: conn.signal, cache: 'no-store' });
      if (!resp.ok) {
        clearTimeout(idle);
        const err = await errorFrom(resp);
        // A 4xx will not change by asking again (a 401 shows the sign-in
        // screen); 408, 429 and 5xx (503 while the server restarts) may.
        if (resp.status >= 400 && resp.status < 500 && resp.status !== 408 && resp.status !== 429) {
          stopped = true;
          onState('failed', err);
          return;
        }
        retry(err);
        return;
      }
      onState('live');
      const parser = new SSEParser((frame) => {
        let ev;
        try {
          ev = JSON.parse(frame.data);
        } catch {
          return; // not an event of ours
        }
        cursor = frame.id || cursor;
        backoff = minBackoffMs;
        onEvent(ev, cursor);
      });
      const reader = resp.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        touch();
        parser.push(value);
      }
      clearTimeout(idle);
      retry(new Error('the server closed the stream'));
    } catch (err) {
      clearTimeout(idle);
      if (stopped) return;
      retry(err);
    }
  }

  run();
  return { stop, get cursor() { return cursor; } };
}
