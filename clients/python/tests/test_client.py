"""Tests of the Python client against a real Longhaul server.

They need a running server: LONGHAUL_TEST_URL (and LONGHAUL_TEST_API_KEY
when it has keys). The Go test e2e/TestClients starts `longhaul serve` and
runs them; without the variables they are skipped.
"""

import os
import time
import unittest
import uuid

import longhaul
from longhaul import Client

URL = os.environ.get("LONGHAUL_TEST_URL")
KEY = os.environ.get("LONGHAUL_TEST_API_KEY")

SEND_EMAIL = {
    "name": "send_email",
    "type": "function",
    "effect": "irreversible",
    "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"}}},
}


def scripted(script, tools=None, policies=None):
    """An inline agent on the scripted model: deterministic, offline."""
    spec = {"model": {"provider": "scripted", "name": "client-test", "script": script},
            "instructions": "You are a test agent."}
    if tools:
        spec["tools"] = tools
    if policies:
        spec["policies"] = policies
    return spec


def wait_status(lh, session_id, statuses, timeout=90.0):
    """Poll the session until its status is one of statuses (or fail)."""
    deadline = time.monotonic() + timeout
    while True:
        s = lh.get_session(session_id)
        if s["status"] in statuses:
            return s
        if time.monotonic() > deadline:
            raise AssertionError(f"session {session_id} is {s['status']}, not {statuses} after {timeout}s")
        time.sleep(0.05)


def pending_action(lh, session_id, type_, timeout=90.0):
    """Wait for a pending action of the given type and return it."""
    deadline = time.monotonic() + timeout
    while True:
        acts = lh.list_actions(session_id, status="pending")["data"]
        for a in acts:
            if a["type"] == type_:
                return a
        if time.monotonic() > deadline:
            raise AssertionError(f"no pending {type_} action on {session_id} after {timeout}s: {acts}")
        time.sleep(0.05)


@unittest.skipUnless(URL, "LONGHAUL_TEST_URL is not set: run through the Go test e2e/TestClients")
class ClientTest(unittest.TestCase):
    def setUp(self):
        self.lh = Client(base_url=URL, api_key=KEY)

    def test_create_get_list(self):
        s = self.lh.create_session(agent_spec=scripted([{"text": "hello"}]), input="Say hello",
                                   goal="a greeting", metadata={"ticket": "PY-1"})
        self.assertTrue(s["id"].startswith("ses_"))
        got = self.lh.get_session(s["id"])
        self.assertEqual(got["id"], s["id"])
        self.assertEqual(got["goal"], "a greeting")
        self.assertEqual(got["metadata"], {"ticket": "PY-1"})
        done = wait_status(self.lh, s["id"], {"idle"})
        self.assertEqual(done["usage"]["model_calls"], 1)
        ids = [x["id"] for x in self.lh.iter_sessions()]
        self.assertIn(s["id"], ids)

    def test_idempotent_create(self):
        key = str(uuid.uuid4())
        body = {"agent_spec": scripted([{"text": "once"}]), "input": "once"}
        a = self.lh.create_session(idempotency_key=key, **body)
        b = self.lh.create_session(idempotency_key=key, **body)
        self.assertEqual(a["id"], b["id"])

    def test_stream_resumes_without_gap_or_duplicate(self):
        # Three turns' worth of events; the server under test (through the
        # Go test's proxy) drops every stream after a few events, so the
        # client reconnects with Last-Event-ID several times on the way.
        s = self.lh.create_session(agent_spec=scripted([{"text": "one"}, {"text": "two"}, {"text": "three"}]),
                                   input="first")
        wait_status(self.lh, s["id"], {"idle"})
        self.lh.send(s["id"], "second")
        wait_status(self.lh, s["id"], {"idle"})
        turn = self.lh.send(s["id"], "third")
        self.assertTrue(turn["id"].startswith("turn_"))
        wait_status(self.lh, s["id"], {"idle"})
        last = self.lh.get_session(s["id"])["last_event_seq"]

        seqs = []
        for event in self.lh.stream_events(s["id"]):
            self.assertEqual(event["session_id"], s["id"])
            seqs.append(event["seq"])
            if event["seq"] >= last:
                break
        self.assertEqual(seqs, list(range(1, last + 1)))

        # Resuming from a given seq starts right after it.
        later = []
        for event in self.lh.stream_events(s["id"], after=last - 2):
            later.append(event["seq"])
            if event["seq"] >= last:
                break
        self.assertEqual(later, [last - 1, last])

        page = self.lh.list_events(s["id"], after=0, limit=2)
        self.assertEqual([e["seq"] for e in page["data"]], [1, 2])
        self.assertIsNotNone(page["next_cursor"])

    def test_stream_follows_a_live_session(self):
        # Events written while the client is streaming arrive too.
        s = self.lh.create_session(agent_spec=scripted([{"text": "live", "delay_ms": 300}]), input="go")
        types = []
        for event in self.lh.stream_events(s["id"]):
            types.append(event["type"])
            if event["type"] == "turn.completed":
                break
        self.assertEqual(types[0], "session.created")
        self.assertIn("model.responded", types)

    def test_approval_then_function_call(self):
        script = [{"tool_calls": [{"name": "send_email", "arguments": {"to": "ceo@acme.com", "subject": "Q3"}}]},
                  {"text": "Email sent."}]
        s = self.lh.create_session(
            agent_spec=scripted(script, tools=[SEND_EMAIL], policies=[{"tool": "send_email", "decision": "ask"}]),
            input="Email the CEO")

        approval = pending_action(self.lh, s["id"], "approval")
        self.assertEqual(approval["tool"], "send_email")
        self.assertEqual(approval["arguments"], {"to": "ceo@acme.com", "subject": "Q3"})
        inbox_ids = [a["id"] for a in self.lh.inbox(session_id=s["id"])["data"]]
        self.assertIn(approval["id"], inbox_ids)
        decided = self.lh.approve(s["id"], approval["id"])
        self.assertEqual(decided["status"], "resolved")
        # The same decision again returns the first result.
        again = self.lh.decide(s["id"], approval["id"], {"decision": "approve"})
        self.assertEqual(again["id"], approval["id"])

        call = pending_action(self.lh, s["id"], "function_call")
        self.assertEqual(call["tool"], "send_email")
        self.lh.submit_output(s["id"], call["id"], output={"message_id": "m-1"})
        self.assertEqual(self.lh.get_action(call["id"])["status"], "resolved")

        done = wait_status(self.lh, s["id"], {"idle"})
        self.assertEqual(done["required_actions"], [])
        completed = [e for e in self.lh.list_events(s["id"], limit=500)["data"] if e["type"] == "tool.completed"]
        self.assertEqual(len(completed), 1)
        self.assertIn("m-1", str(completed[0]["data"]))

    def test_reject_and_cancel(self):
        script = [{"tool_calls": [{"name": "send_email", "arguments": {"to": "x@y.z"}}]},
                  {"tool_calls": [{"name": "send_email", "arguments": {"to": "x@y.z"}}]}]
        s = self.lh.create_session(
            agent_spec=scripted(script, tools=[SEND_EMAIL], policies=[{"tool": "send_email", "decision": "ask"}]),
            input="Email x")
        first = pending_action(self.lh, s["id"], "approval")
        self.lh.reject(s["id"], first["id"], "not now")
        with self.assertRaises(longhaul.ConflictError) as cm:
            self.lh.approve(s["id"], first["id"])
        self.assertEqual(cm.exception.status, 409)
        pending_action(self.lh, s["id"], "approval")
        cancelled = self.lh.cancel(s["id"], reason="enough")
        self.assertEqual(cancelled["id"], s["id"])
        wait_status(self.lh, s["id"], {"idle", "cancelled"})

    def test_typed_errors(self):
        with self.assertRaises(longhaul.NotFoundError) as cm:
            self.lh.get_session("ses_doesnotexist")
        e = cm.exception
        self.assertIsInstance(e, longhaul.LonghaulError)
        self.assertEqual((e.status, e.code), (404, "not_found"))
        self.assertTrue(e.message)

        with self.assertRaises(longhaul.InvalidRequestError) as cm:
            self.lh.create_session(input="no agent", budget={"max_cost_usd": -1},
                                   agent_spec=scripted([{"text": "x"}]))
        self.assertEqual(cm.exception.status, 400)
        self.assertEqual(cm.exception.code, "invalid_request")
        self.assertTrue(cm.exception.field, "a 400 names the field")

        if KEY:
            with self.assertRaises(longhaul.UnauthorizedError) as cm:
                Client(base_url=URL, api_key="lh_wrong").get_session("ses_x")
            self.assertEqual(cm.exception.status, 401)
            self.assertNotIn("lh_wrong", str(cm.exception))

        with self.assertRaises(longhaul.NotFoundError):
            next(self.lh.stream_events("ses_doesnotexist"))

    def test_openapi_and_me(self):
        doc = self.lh.openapi()
        self.assertEqual(doc["openapi"], "3.1.0")
        self.assertIn("/v1/sessions", doc["paths"])
        self.assertIn("role", self.lh.me())


class OfflineTest(unittest.TestCase):
    """What needs no server."""

    def test_bad_base_url(self):
        with self.assertRaises(ValueError):
            Client(base_url="localhost:8080")

    def test_repr_hides_the_key(self):
        self.assertNotIn("secret-key", repr(Client(base_url="http://127.0.0.1:1", api_key="secret-key")))

    def test_connection_refused_is_typed(self):
        lh = Client(base_url="http://127.0.0.1:1", timeout=2)
        with self.assertRaises(longhaul.ConnectionFailedError) as cm:
            lh.get_session("ses_x")
        self.assertEqual(cm.exception.status, 0)

    def test_error_classes_by_code_and_status(self):
        from longhaul.errors import error_for
        self.assertIsInstance(error_for(409, "conflict", "m"), longhaul.ConflictError)
        self.assertIsInstance(error_for(429, "rate_limited", "m", retry_after=2), longhaul.RateLimitedError)
        self.assertIsInstance(error_for(503, "unavailable", "m"), longhaul.ServerError)
        self.assertIsInstance(error_for(507, "insufficient_storage", "m"), longhaul.ServerError)
        self.assertIsInstance(error_for(404, "", "m"), longhaul.NotFoundError)


if __name__ == "__main__":
    unittest.main()
