"""Typed errors of the Longhaul HTTP API.

Every error the server answers is ``{"error": {"code", "message", "field"}}``
with the HTTP status of its code; the client raises the subclass of
:class:`LonghaulError` for that code, so an application can catch what it
can handle (``except NotFoundError``) and let the rest through.
"""

from __future__ import annotations

from typing import Optional


class LonghaulError(Exception):
    """An error answered by the server (or the transport to it).

    ``status`` is the HTTP status (0 when no answer came), ``code`` the
    API's error code (``not_found``, ``conflict``…), ``message`` what went
    wrong in words, and ``field`` the request field at fault, if any.
    """

    def __init__(self, status: int, code: str, message: str, field: Optional[str] = None,
                 retry_after: Optional[float] = None, request_id: Optional[str] = None):
        text = f"{code}: {message}" if code else message
        if field:
            text += f" (field {field})"
        super().__init__(text)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.retry_after = retry_after
        self.request_id = request_id


class InvalidRequestError(LonghaulError):
    """400 invalid_request: the request was wrong; ``field`` names where."""


class UnauthorizedError(LonghaulError):
    """401 unauthorized: no API key, or an unknown or revoked one."""


class ForbiddenError(LonghaulError):
    """403 forbidden: the key's role or project may not do this."""


class NotFoundError(LonghaulError):
    """404 not_found: no such session, action, artifact… (in this project)."""


class ConflictError(LonghaulError):
    """409 conflict: the state does not allow it (an action decided
    otherwise, an Idempotency-Key reused with another body…)."""


class PayloadTooLargeError(LonghaulError):
    """413 payload_too_large: the body is over the server's limit."""


class RateLimitedError(LonghaulError):
    """429 rate_limited: slow down; ``retry_after`` says for how long (s)."""


class ServerError(LonghaulError):
    """5xx: the server failed (internal), is not ready (unavailable) or is
    out of space (insufficient_storage). Worth retrying later."""


class ConnectionFailedError(LonghaulError):
    """No answer: the server could not be reached, or the connection broke."""


_BY_CODE = {
    "invalid_request": InvalidRequestError,
    "unauthorized": UnauthorizedError,
    "forbidden": ForbiddenError,
    "not_found": NotFoundError,
    "conflict": ConflictError,
    "payload_too_large": PayloadTooLargeError,
    "rate_limited": RateLimitedError,
}

_BY_STATUS = {
    400: InvalidRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    405: InvalidRequestError,
    409: ConflictError,
    413: PayloadTooLargeError,
    429: RateLimitedError,
}


def error_for(status: int, code: str, message: str, field: Optional[str] = None,
              retry_after: Optional[float] = None, request_id: Optional[str] = None) -> LonghaulError:
    """The typed error for an answer: by the API's code, else by the status."""
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else LonghaulError
    return cls(status, code, message, field, retry_after, request_id)
