"""Who may add load, and how much: a request rate per owner, and, as the last resort for
everyone, shedding uploads while the queue's backlog is over its bound. (Each owner's
quota of unfinished jobs is a store precondition: JobStore.create.)"""
from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Optional

from chalicelib.domain.errors import ConditionFailed, Overloaded, RateLimited, TransientError
from chalicelib.runtime.logs import get_logger
from chalicelib.usecases.context import Context

log = get_logger("capacity")

# Owners remembered by the rate limiter before idle ones are forgotten.
_MAX_TRACKED_OWNERS = 10_000
# A full quota is reconciled (its finished jobs' slots given back) at most this often.
_RECONCILE_EVERY_SECONDS = 5.0


class Admission:
    def __init__(self, ctx: Context, monotonic=time.monotonic):
        self._ctx = ctx
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._seen: tuple[Optional[datetime], int] = (None, 0)
        self._buckets: dict[str, tuple[float, float]] = {}  # owner -> (tokens, at)
        self._reconciled: dict[str, float] = {}

    def check_rate(self, owner: str) -> None:
        """429 rate_limited past the owner's rate: a token bucket per owner, shared by every
        API process through ctx.rates (without one, this process's bucket alone).

        This process's own bucket is checked first and takes a token only for a request the
        shared one admitted, so it never holds fewer tokens than the shared one: a request it
        refuses, the shared bucket would refuse too, and costs no write."""
        s = self._ctx.settings
        rate, burst = s.owner_requests_per_second, s.owner_burst
        now = self._monotonic()
        with self._lock:
            tokens = self._tokens(owner, now, rate, burst)
            if tokens < 1:
                self._refuse(owner, tokens, now, rate)
            if self._ctx.rates is None:
                self._keep(owner, tokens - 1, now, rate, burst)
                return
        shared = self._take_shared(owner, rate, burst, full=tokens >= burst)
        with self._lock:
            tokens = self._tokens(owner, now, rate, burst)
            if shared is None:
                # Empty everywhere: refuse here too until a token comes back, at most 1 / rate
                # from now (the shared bucket's may come a little sooner).
                self._buckets[owner] = (0.0, now)
                self._refuse(owner, 0.0, now, rate)
            self._keep(owner, min(tokens - 1, shared), now, rate, burst)

    def _tokens(self, owner: str, now: float, rate: float, burst: int) -> float:
        tokens, at = self._buckets.get(owner, (float(burst), now))
        return min(float(burst), tokens + (now - at) * rate)

    def _keep(self, owner: str, tokens: float, now: float, rate: float, burst: int) -> None:
        self._buckets[owner] = (tokens, now)
        if len(self._buckets) > _MAX_TRACKED_OWNERS:
            self._forget_idle(now, rate, burst)

    def _refuse(self, owner: str, tokens: float, now: float, rate: float):
        wait = max(1, int((1 - tokens) / rate + 0.999))
        log.warning("request_rate_limited", reason="rate")
        raise RateLimited("Too many requests; slow down", retry_after=wait)

    def _take_shared(self, owner: str, rate: float, burst: int, full: bool) -> Optional[float]:
        """A token from the shared bucket: the tokens left after it, or None when it is
        empty. One conditional write when this process guessed the bucket's state right
        (full, or neither full nor empty), two when not; a third only when another process
        filled the gap between them."""
        rates = self._ctx.rates
        cost, depth = 1 / rate, burst / rate
        now = self._ctx.clock().timestamp()
        steps = (rates.take_from_full, rates.take) if full else (rates.take, rates.take_from_full, rates.take)
        try:
            for step in steps:
                try:
                    full_at = step(owner, now, cost, depth)
                except ConditionFailed:
                    continue
                return (now + depth - full_at) / cost
        except TransientError:
            # The table is down: fairness is not worth refusing everyone for; this
            # process's own bucket still holds.
            log.warning("rate_store_unavailable")
            return float(burst)
        return None

    def _forget_idle(self, now: float, rate: float, burst: int) -> None:
        full = [o for o, (tokens, at) in self._buckets.items() if tokens + (now - at) * rate >= burst]
        for owner in full:
            del self._buckets[owner]

    def may_reconcile(self, owner: str) -> bool:
        """Reconciling a full quota costs a read per slot: at most once in a while per owner,
        so that an owner hammering at its limit cannot turn each refusal into many reads."""
        now = self._monotonic()
        with self._lock:
            if now - self._reconciled.get(owner, -1e9) < _RECONCILE_EVERY_SECONDS:
                return False
            self._reconciled[owner] = now
            if len(self._reconciled) > _MAX_TRACKED_OWNERS:
                self._reconciled = {o: t for o, t in self._reconciled.items()
                                    if now - t < _RECONCILE_EVERY_SECONDS}
            return True

    def check_backlog(self) -> None:
        """503 overloaded while the backlog is over the bound: the last resort, for all
        owners at once. The depth is read at most every few seconds: a busy API must not
        add a queue call to every upload."""
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
