// Tests of the TypeScript client against a real Longhaul server. They need
// LONGHAUL_TEST_URL (and LONGHAUL_TEST_API_KEY when it has keys); the Go
// test e2e/TestClients starts `longhaul serve` and runs them. Without the
// variables the server tests are skipped.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';

import {
  Client,
  ConflictError,
  ConnectionFailedError,
  InvalidRequestError,
  LonghaulError,
  NotFoundError,
  RateLimitedError,
  ServerError,
  UnauthorizedError,
  errorFor,
} from '../src/index.js';

const URL_ = process.env.LONGHAUL_TEST_URL;
const KEY = process.env.LONGHAUL_TEST_API_KEY;
const skip = URL_ ? false : 'LONGHAUL_TEST_URL is not set: run through the Go test e2e/TestClients';

const sendEmail = {
  name: 'send_email',
  type: 'function',
  effect: 'irreversible',
  parameters: { type: 'object', properties: { to: { type: 'string' }, subject: { type: 'string' } } },
};

/** An inline agent on the scripted model: deterministic, offline. */
function scripted(script, { tools, policies } = {}) {
  return {
    model: { provider: 'scripted', name: 'client-test', script },
    instructions: 'You are a test agent.',
    ...(tools ? { tools } : {}),
    ...(policies ? { policies } : {}),
  };
}

const pause = (ms) => new Promise((r) => setTimeout(r, ms));

/** Poll until the session's status is one of `statuses` (or fail). */
async function waitStatus(lh, id, statuses, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await lh.getSession(id);
    if (statuses.includes(s.status)) return s;
    if (Date.now() > deadline) assert.fail(`session ${id} is ${s.status}, not ${statuses} after ${timeoutMs} ms`);
    await pause(50);
  }
}

/** Wait for a pending action of the given type. */
async function pendingAction(lh, id, type, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { data } = await lh.listActions(id, { status: 'pending' });
    const a = data.find((x) => x.type === type);
    if (a) return a;
    if (Date.now() > deadline) assert.fail(`no pending ${type} action on ${id}: ${JSON.stringify(data)}`);
    await pause(50);
  }
}

describe('against a server', { skip }, () => {
  const lh = () => new Client({ baseUrl: URL_, apiKey: KEY });

  it('creates, gets and lists a session', async () => {
    const c = lh();
    const s = await c.createSession({ agent_spec: scripted([{ text: 'hello' }]), input: 'Say hello', goal: 'a greeting', metadata: { ticket: 'TS-1' } });
    assert.match(s.id, /^ses_/);
    const got = await c.getSession(s.id);
    assert.equal(got.goal, 'a greeting');
    assert.deepEqual(got.metadata, { ticket: 'TS-1' });
    const done = await waitStatus(c, s.id, ['idle']);
    assert.equal(done.usage.model_calls, 1);
    const ids = [];
    for await (const x of c.iterSessions()) ids.push(x.id);
    assert.ok(ids.includes(s.id));
  });

  it('creates once per idempotency key', async () => {
    const c = lh();
    const key = randomUUID();
    const body = { agent_spec: scripted([{ text: 'once' }]), input: 'once' };
    const a = await c.createSession(body, { idempotencyKey: key });
    const b = await c.createSession(body, { idempotencyKey: key });
    assert.equal(a.id, b.id);
  });

  it('streams with no gap or duplicate across disconnects', async () => {
    // The Go test's proxy drops every stream after a few events, so the
    // client reconnects with Last-Event-ID several times on the way.
    const c = lh();
    const s = await c.createSession({ agent_spec: scripted([{ text: 'one' }, { text: 'two' }, { text: 'three' }]), input: 'first' });
    await waitStatus(c, s.id, ['idle']);
    await c.send(s.id, 'second');
    await waitStatus(c, s.id, ['idle']);
    const turn = await c.send(s.id, 'third');
    assert.match(turn.id, /^turn_/);
    await waitStatus(c, s.id, ['idle']);
    const last = (await c.getSession(s.id)).last_event_seq;

    const seqs = [];
    for await (const e of c.streamEvents(s.id)) {
      assert.equal(e.session_id, s.id);
      seqs.push(e.seq);
      if (e.seq >= last) break;
    }
    assert.deepEqual(seqs, Array.from({ length: last }, (_, i) => i + 1));

    const later = [];
    for await (const e of c.streamEvents(s.id, { after: last - 2 })) {
      later.push(e.seq);
      if (e.seq >= last) break;
    }
    assert.deepEqual(later, [last - 1, last]);

    const page = await c.listEvents(s.id, { after: 0, limit: 2 });
    assert.deepEqual(page.data.map((e) => e.seq), [1, 2]);
    assert.notEqual(page.next_cursor, null);
  });

  it('follows a live session', async () => {
    const c = lh();
    const s = await c.createSession({ agent_spec: scripted([{ text: 'live', delay_ms: 300 }]), input: 'go' });
    const types = [];
    for await (const e of c.streamEvents(s.id)) {
      types.push(e.type);
      if (e.type === 'turn.completed') break;
    }
    assert.equal(types[0], 'session.created');
    assert.ok(types.includes('model.responded'));
  });

  it('approves a call, then answers the function call', async () => {
    const c = lh();
    const script = [{ tool_calls: [{ name: 'send_email', arguments: { to: 'ceo@acme.com', subject: 'Q3' } }] }, { text: 'Email sent.' }];
    const s = await c.createSession({
      agent_spec: scripted(script, { tools: [sendEmail], policies: [{ tool: 'send_email', decision: 'ask' }] }),
      input: 'Email the CEO',
    });
    const approval = await pendingAction(c, s.id, 'approval');
    assert.equal(approval.tool, 'send_email');
    assert.deepEqual(approval.arguments, { to: 'ceo@acme.com', subject: 'Q3' });
    const inbox = await c.inbox({ sessionId: s.id });
    assert.ok(inbox.data.some((a) => a.id === approval.id));
    assert.equal((await c.approve(s.id, approval.id)).status, 'resolved');
    assert.equal((await c.decide(s.id, approval.id, { decision: 'approve' })).id, approval.id);

    const call = await pendingAction(c, s.id, 'function_call');
    await c.submitOutput(s.id, call.id, { message_id: 'm-1' });
    assert.equal((await c.getAction(call.id)).status, 'resolved');

    const done = await waitStatus(c, s.id, ['idle']);
    assert.deepEqual(done.required_actions, []);
    const { data } = await c.listEvents(s.id, { limit: 500 });
    const completed = data.filter((e) => e.type === 'tool.completed');
    assert.equal(completed.length, 1);
    assert.match(JSON.stringify(completed[0].data), /m-1/);
  });

  it('rejects, refuses a different decision, cancels', async () => {
    const c = lh();
    const call = { tool_calls: [{ name: 'send_email', arguments: { to: 'x@y.z' } }] };
    const s = await c.createSession({
      agent_spec: scripted([call, call], { tools: [sendEmail], policies: [{ tool: 'send_email', decision: 'ask' }] }),
      input: 'Email x',
    });
    const first = await pendingAction(c, s.id, 'approval');
    await c.reject(s.id, first.id, 'not now');
    await assert.rejects(c.approve(s.id, first.id), (e) => e instanceof ConflictError && e.status === 409);
    await pendingAction(c, s.id, 'approval');
    assert.equal((await c.cancel(s.id, 'enough')).id, s.id);
    await waitStatus(c, s.id, ['idle', 'cancelled']);
  });

  it('throws typed errors', async () => {
    const c = lh();
    await assert.rejects(c.getSession('ses_doesnotexist'), (e) => {
      assert.ok(e instanceof NotFoundError);
      assert.ok(e instanceof LonghaulError);
      assert.equal(e.status, 404);
      assert.equal(e.code, 'not_found');
      assert.ok(e.apiMessage);
      return true;
    });
    await assert.rejects(
      c.createSession({ input: 'x', budget: { max_cost_usd: -1 }, agent_spec: scripted([{ text: 'x' }]) }),
      (e) => e instanceof InvalidRequestError && e.code === 'invalid_request' && Boolean(e.field),
    );
    if (KEY) {
      await assert.rejects(new Client({ baseUrl: URL_, apiKey: 'lh_wrong' }).getSession('ses_x'), (e) => {
        assert.ok(e instanceof UnauthorizedError);
        assert.ok(!e.message.includes('lh_wrong'));
        return true;
      });
    }
    await assert.rejects(c.streamEvents('ses_doesnotexist').next(), NotFoundError);
  });

  it('serves its OpenAPI document and says who the key is', async () => {
    const c = lh();
    const doc = await c.openapi();
    assert.equal(doc.openapi, '3.1.0');
    assert.ok('/v1/sessions' in doc.paths);
    assert.ok((await c.me()).role);
  });
});

describe('offline', () => {
  it('refuses a base URL that is not http(s)', () => {
    assert.throws(() => new Client({ baseUrl: 'localhost:8080' }), TypeError);
  });

  it('reports a refused connection as a typed error', async () => {
    const c = new Client({ baseUrl: 'http://127.0.0.1:1' });
    await assert.rejects(c.getSession('ses_x'), (e) => e instanceof ConnectionFailedError && e.status === 0);
  });

  it('picks the error class by code, then by status', () => {
    assert.ok(errorFor(409, 'conflict', 'm') instanceof ConflictError);
    assert.ok(errorFor(429, 'rate_limited', 'm', { retryAfter: 2 }) instanceof RateLimitedError);
    assert.ok(errorFor(503, 'unavailable', 'm') instanceof ServerError);
    assert.ok(errorFor(404, '', 'm') instanceof NotFoundError);
    assert.equal(errorFor(400, 'invalid_request', 'bad', { field: 'budget' }).message, 'invalid_request: bad (field budget)');
  });

  it('does not keep the key where it would print', () => {
    const c = new Client({ baseUrl: 'http://127.0.0.1:1', apiKey: 'secret-key' });
    assert.ok(!JSON.stringify(c).includes('secret-key'));
  });
});
