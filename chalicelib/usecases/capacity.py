"""Load shedding: refuse new uploads while the queue's backlog is over its bound."""
from __future__ import annotations

from datetime import datetime
from typing import Optional

from chalicelib.errors import Overloaded, TransientError
from chalicelib.logs import get_logger
from chalicelib.usecases.context import Context

log = get_logger("capacity")


class Capacity:
    def __init__(self, ctx: Context):
        self._ctx = ctx
        self._seen: tuple[Optional[datetime], int] = (None, 0)

    def check(self) -> None:
        """503 overloaded while the backlog is over the bound. The depth is read at most
        every few seconds: a busy API must not add a queue call to every upload."""
        ctx = self._ctx
        if ctx.backlog is None:
            return
        now = ctx.clock()
        seen_at, depth = self._seen
        if seen_at is None or (now - seen_at).total_seconds() >= ctx.settings.backlog_cache_seconds:
            try:
                depth = ctx.backlog.depth()
            except TransientError:
                depth = 0  # the queue's health is the worker's business, not a reason to refuse
            self._seen = (now, depth)
        if depth > ctx.settings.max_backlog:
            log.warning("upload_shed", backlog=depth)
            raise Overloaded("Too many images are waiting; try again later",
                             retry_after=max(ctx.settings.retry_after_seconds, 5))
