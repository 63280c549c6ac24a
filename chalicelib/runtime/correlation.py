"""One correlation id per request or message: on every log line it handles, and as `instance`
in its problem bodies, so that a client's error report leads to the log lines behind it.

In the cloud the id is the Lambda request id; locally `chalice local` and the runner's
workers make a fresh one per request. A context variable carries it (each thread has its
own), and chalicelib/runtime/logs.py adds it to every line, so no logger is passed anything. It is
not kept in structlog's context: a request that logs nothing never imports structlog.
"""
from __future__ import annotations

import contextvars
import uuid
from typing import Optional

KEY = "correlation_id"
_current: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar(KEY, default=None)


def begin(request_id: Optional[str] = None) -> str:
    """Forget the previous request's id (threads are reused) and start this one's."""
    correlation_id = request_id or str(uuid.uuid4())
    _current.set(correlation_id)
    return correlation_id


def end() -> None:
    """This thread handles no request now (a kept-alive connection's last one is done)."""
    _current.set(None)


def current() -> Optional[str]:
    return _current.get()


def instance() -> Optional[str]:
    """RFC 9457's `instance`: a URI naming this occurrence. Lambda's request ids are UUIDs."""
    correlation_id = current()
    if correlation_id is None:
        return None
    try:
        return uuid.UUID(correlation_id).urn
    except ValueError:
        return f"urn:image-jobs:request:{correlation_id}"


def of_context(context: object) -> Optional[str]:
    """The request id of a Lambda context object (or the local stand-ins for one)."""
    return getattr(context, "aws_request_id", None) or None
