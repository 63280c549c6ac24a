"""Structured logs: one JSON object a line, with job_id where there is one.

structlog renders the lines; Lambda and the local runner both read stdout.
Never log image bytes or tokens.

structlog is imported and set up when the first line is logged, not when a module asks for
its logger: a request that logs nothing (most GETs) never pays for it on a cold start.
"""
from __future__ import annotations

import logging
import sys
import threading

_level = logging.INFO
_configured = False
_lock = threading.Lock()
# One lock for every line the service writes, log or metric: a line is one write under it.
# (structlog's PrintLogger writes the text and its newline in two calls under a lock of its
# own, so a metric line written between them joined a log line: two JSON objects on a line.)
_line_lock = threading.Lock()


def write_line(file, line: str) -> None:
    """`line` and its newline as one write, whole whatever the threads."""
    with _line_lock:
        file.write(line + "\n")
        file.flush()


class _Lines:
    """structlog's logger: each rendered line through write_line, to sys.stdout as it is at
    the time (as structlog's PrintLogger did: the runner's Tee and pytest's capture swap it)."""

    def msg(self, message: str) -> None:
        write_line(sys.stdout, message)

    log = debug = info = warn = warning = error = err = critical = exception = fatal = failure = msg


def configure(level: int = logging.INFO) -> None:
    """The level of the service's lines; the set-up itself waits for the first line."""
    global _level
    _level = level


def _with_correlation_id(_logger, _method: str, event: dict) -> dict:
    from chalicelib.runtime import correlation

    correlation_id = correlation.current()
    if correlation_id is not None:
        event.setdefault(correlation.KEY, correlation_id)
    return event


def _setup():
    global _configured
    import structlog

    with _lock:
        if _configured:
            return structlog
        structlog.configure(
            processors=[
                _with_correlation_id,
                structlog.contextvars.merge_contextvars,
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                structlog.processors.format_exc_info,
                structlog.processors.JSONRenderer(),
            ],
            wrapper_class=structlog.make_filtering_bound_logger(_level),
            logger_factory=lambda *args, _lines=_Lines(): _lines,
            cache_logger_on_first_use=True,
        )
        # Libraries' INFO chatter (connections, credentials) is not the service's story.
        for noisy in ("pika", "botocore", "boto3", "urllib3"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
        _configured = True
    return structlog


class _Logger:
    """A component's logger; on first use it becomes structlog's bound logger."""

    def __init__(self, component: str):
        self._component = component
        self._logger = None

    def __getattr__(self, method: str):
        if self._logger is None:
            self._logger = _setup().get_logger(component=self._component)
        return getattr(self._logger, method)


def get_logger(name: str):
    return _Logger(name)
