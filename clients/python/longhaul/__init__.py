"""A client for the Longhaul HTTP API, standard library only.

    from longhaul import Client
    lh = Client(base_url="http://127.0.0.1:8080", api_key="lh_…")
    session = lh.create_session(agent="researcher", input="Write a brief")
    for event in lh.stream_events(session["id"]):
        ...
"""

from .client import Client
from .errors import (
    ConflictError,
    ConnectionFailedError,
    ForbiddenError,
    InvalidRequestError,
    LonghaulError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    ServerError,
    UnauthorizedError,
)

__all__ = [
    "Client",
    "ConflictError",
    "ConnectionFailedError",
    "ForbiddenError",
    "InvalidRequestError",
    "LonghaulError",
    "NotFoundError",
    "PayloadTooLargeError",
    "RateLimitedError",
    "ServerError",
    "UnauthorizedError",
]

__version__ = "0.1.0"
