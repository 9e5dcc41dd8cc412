"""The Longhaul HTTP API client (standard library only)."""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterator, Optional

from .errors import (
    ConnectionFailedError,
    LonghaulError,
    RateLimitedError,
    ServerError,
    error_for,
)

__all__ = ["Client"]

_USER_AGENT = "longhaul-python/0.1"


class Client:
    """A client of one Longhaul server.

    ``base_url`` is the server's address (``http://127.0.0.1:8080``);
    ``api_key`` its bearer token (omit it for a server without keys, which
    answers loopback callers only). Every method returns the decoded JSON of
    the answer (dicts and lists, as in the API's documentation) or raises a
    :class:`~longhaul.errors.LonghaulError` subclass.
    """

    def __init__(self, base_url: str, api_key: Optional[str] = None, timeout: float = 30.0,
                 stream_timeout: float = 60.0):
        parsed = urllib.parse.urlparse(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self.timeout = timeout
        # An event stream is quiet between events but for its ": ping"
        # (every 15 s by default): a read that waits longer than this is a
        # dead connection, and the stream reconnects.
        self.stream_timeout = stream_timeout

    def __repr__(self) -> str:  # never shows the key
        return f"Client(base_url={self.base_url!r})"

    # -- transport -------------------------------------------------------

    def _url(self, path: str, query: Optional[Dict[str, Any]] = None) -> str:
        url = self.base_url + path
        if query:
            q = {k: _query_value(v) for k, v in query.items() if v is not None}
            if q:
                url += "?" + urllib.parse.urlencode(q)
        return url

    def _headers(self, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        h = {"Accept": "application/json", "User-Agent": _USER_AGENT}
        if self._api_key:
            h["Authorization"] = "Bearer " + self._api_key
        if extra:
            h.update(extra)
        return h

    def request(self, method: str, path: str, body: Any = None, query: Optional[Dict[str, Any]] = None,
                idempotency_key: Optional[str] = None) -> Any:
        """Send one request to the API and return its decoded JSON answer
        (None for an empty one). The other methods are built on it; use it
        for routes they do not cover."""
        headers = self._headers()
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        req = urllib.request.Request(self._url(path, query), data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raise _api_error(e) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            raise ConnectionFailedError(0, "", f"{method} {path}: {_reason(e)}") from None
        if not raw:
            return None
        return json.loads(raw)

    # -- sessions --------------------------------------------------------

    def create_session(self, idempotency_key: Optional[str] = None, **body: Any) -> Dict[str, Any]:
        """Create a session and start its first turn: ``agent`` (a
        configured agent's name) or ``agent_spec``, ``input``, and optionally
        ``goal``, ``constraints``, ``acceptance_criteria``, ``budget``,
        ``metadata``, ``webhook_url``."""
        return self.request("POST", "/v1/sessions", body, idempotency_key=idempotency_key)

    def get_session(self, session_id: str, include_subagents: bool = False) -> Dict[str, Any]:
        """One session, with its pending ``required_actions``."""
        q = {"include": "subagents"} if include_subagents else None
        return self.request("GET", "/v1/sessions/" + _seg(session_id), query=q)

    def list_sessions(self, status: Optional[str] = None, agent: Optional[str] = None,
                      parent_id: Optional[str] = None, limit: Optional[int] = None,
                      cursor: Optional[str] = None) -> Dict[str, Any]:
        """A page of sessions: ``{"data": [...], "next_cursor": ...}``."""
        return self.request("GET", "/v1/sessions", query={
            "status": status, "agent": agent, "parent_id": parent_id, "limit": limit, "cursor": cursor})

    def iter_sessions(self, **filters: Any) -> Iterator[Dict[str, Any]]:
        """Every session matching the filters of list_sessions, page after page."""
        cursor = None
        while True:
            page = self.list_sessions(cursor=cursor, **filters)
            yield from page["data"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def send(self, session_id: str, input: str, idempotency_key: Optional[str] = None) -> Dict[str, Any]:
        """Send a follow-up turn (queued while a turn runs); returns the turn."""
        return self.request("POST", f"/v1/sessions/{_seg(session_id)}/turns", {"input": input},
                            idempotency_key=idempotency_key)

    def cancel(self, session_id: str, reason: Optional[str] = None) -> Dict[str, Any]:
        """Stop the running turn before its next call; returns the session."""
        body = {"reason": reason} if reason else {}
        return self.request("POST", f"/v1/sessions/{_seg(session_id)}/cancel", body)

    # -- required actions --------------------------------------------------

    def list_actions(self, session_id: str, status: Optional[str] = None) -> Dict[str, Any]:
        """The session's required actions (``status="pending"`` for the open ones)."""
        return self.request("GET", f"/v1/sessions/{_seg(session_id)}/actions", query={"status": status})

    def inbox(self, status: Optional[str] = "pending", type: Optional[str] = None,
              session_id: Optional[str] = None, limit: Optional[int] = None,
              cursor: Optional[str] = None) -> Dict[str, Any]:
        """Every session's actions (by default the pending ones): a page."""
        return self.request("GET", "/v1/actions", query={
            "status": status, "type": type, "session_id": session_id, "limit": limit, "cursor": cursor})

    def get_action(self, action_id: str) -> Dict[str, Any]:
        """One action."""
        return self.request("GET", "/v1/actions/" + _seg(action_id))

    def decide(self, session_id: str, action_id: str, body: Dict[str, Any],
               idempotency_key: Optional[str] = None) -> Dict[str, Any]:
        """Decide a required action; returns it, resolved. ``body`` is
        ``{"decision": "approve"}``, ``{"decision": "reject", "reason": …}``,
        ``{"output": …}`` for a function call, ``{"answer": …}``…"""
        return self.request("POST", f"/v1/sessions/{_seg(session_id)}/actions/{_seg(action_id)}", body,
                            idempotency_key=idempotency_key)

    def approve(self, session_id: str, action_id: str, arguments: Any = None) -> Dict[str, Any]:
        """Approve a tool call (with edited ``arguments`` if given)."""
        body: Dict[str, Any] = {"decision": "approve"}
        if arguments is not None:
            body["arguments"] = arguments
        return self.decide(session_id, action_id, body)

    def reject(self, session_id: str, action_id: str, reason: str) -> Dict[str, Any]:
        """Refuse a tool call; the reason goes back to the model."""
        return self.decide(session_id, action_id, {"decision": "reject", "reason": reason})

    def submit_output(self, session_id: str, action_id: str, output: Any = None,
                      error: Optional[str] = None) -> Dict[str, Any]:
        """Answer a function call with its output (any JSON) or an error."""
        body = {"error": error} if error is not None else {"output": output}
        return self.decide(session_id, action_id, body)

    # -- the journal -------------------------------------------------------

    def list_events(self, session_id: str, after: int = 0, limit: Optional[int] = None) -> Dict[str, Any]:
        """A page of the session's events with seq greater than ``after``."""
        return self.request("GET", f"/v1/sessions/{_seg(session_id)}/events",
                            query={"after": after, "limit": limit})

    def stream_events(self, session_id: str, after: int = 0, max_retries: int = 10) -> Iterator[Dict[str, Any]]:
        """Follow the session's journal as it is written: yields every event
        with seq greater than ``after``, in order, for as long as the caller
        iterates (break out of the loop, or close the generator, to stop).

        A dropped connection is reconnected with ``Last-Event-ID`` set to the
        last event yielded, so the events come with no gap and no duplicate
        across disconnects and server restarts. After ``max_retries``
        attempts in a row that bring no event, the last error is raised; an
        answer the API refuses (404, 401, 403…) is raised at once.
        """
        last = after
        failures = 0
        delay = 0.1
        path = f"/v1/sessions/{_seg(session_id)}/events/stream"
        while True:
            headers = self._headers({"Accept": "text/event-stream", "Cache-Control": "no-cache"})
            if last > 0:
                headers["Last-Event-ID"] = str(last)
            req = urllib.request.Request(self._url(path), headers=headers, method="GET")
            err: Optional[LonghaulError] = None
            try:
                resp = urllib.request.urlopen(req, timeout=self.stream_timeout)
            except urllib.error.HTTPError as e:
                err = _api_error(e)
                if not isinstance(err, (RateLimitedError, ServerError)):
                    raise err from None
            except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
                err = ConnectionFailedError(0, "", f"GET {path}: {_reason(e)}")
            else:
                try:
                    for event in _read_events(resp):
                        seq = event.get("seq", 0)
                        if seq <= last:  # never a duplicate, even from a server that repeats
                            continue
                        last = seq
                        failures, delay = 0, 0.1
                        yield event
                    err = ConnectionFailedError(0, "", f"GET {path}: the server closed the stream")
                except (OSError, http.client.HTTPException, ValueError) as e:
                    err = ConnectionFailedError(0, "", f"GET {path}: {_reason(e)}")
                finally:
                    resp.close()
            failures += 1
            if failures > max_retries:
                raise err
            wait = delay
            if isinstance(err, RateLimitedError) and err.retry_after:
                wait = max(wait, err.retry_after)
            time.sleep(wait)
            delay = min(delay * 2, 5.0)

    # -- the rest ----------------------------------------------------------

    def me(self) -> Dict[str, Any]:
        """Who the API key is: name, role, project, permissions."""
        return self.request("GET", "/v1/me")

    def openapi(self) -> Dict[str, Any]:
        """The server's OpenAPI 3.1 document."""
        return self.request("GET", "/v1/openapi.json")


def _read_events(resp) -> Iterator[Dict[str, Any]]:
    """Parse a text/event-stream body into the events' JSON data.

    Frames are ``id:``, ``event:`` and ``data:`` lines ended by a blank
    line; comments (``: ping``) and unknown fields are skipped.
    """
    data = []
    while True:
        line = resp.readline()
        if not line:
            return
        line = line.decode("utf-8").rstrip("\r\n")
        if line == "":
            if data:
                yield json.loads("\n".join(data))
                data = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)


def _api_error(e: urllib.error.HTTPError) -> LonghaulError:
    """The typed error for an error answer."""
    raw = b""
    try:
        raw = e.read()
    except (OSError, http.client.HTTPException):
        pass
    finally:
        e.close()
    code, message, field = "", "", None
    try:
        body = json.loads(raw)
        inner = body.get("error", {}) if isinstance(body, dict) else {}
        code = inner.get("code", "") or ""
        message = inner.get("message", "") or ""
        field = inner.get("field") or None
    except ValueError:
        message = raw[:200].decode("utf-8", "replace")
    if not message:
        message = f"HTTP {e.code}"
    retry_after = None
    ra = e.headers.get("Retry-After") if e.headers else None
    if ra:
        try:
            retry_after = float(ra)
        except ValueError:
            pass
    request_id = e.headers.get("X-Request-Id") if e.headers else None
    return error_for(e.code, code, message, field, retry_after, request_id)


def _reason(e: BaseException) -> str:
    if isinstance(e, urllib.error.URLError) and not isinstance(e, urllib.error.HTTPError):
        return str(e.reason)
    if isinstance(e, socket.timeout):
        return "timed out"
    return str(e) or type(e).__name__


def _seg(s: str) -> str:
    """An id as one path segment (an id with a slash cannot escape its route)."""
    if not isinstance(s, str) or not s:
        raise ValueError(f"an id must be a non-empty string, got {s!r}")
    return urllib.parse.quote(s, safe="")


def _query_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)
