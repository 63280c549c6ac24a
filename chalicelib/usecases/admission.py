"""Who may add load, and how much: a request rate per owner, and, as the last resort for
everyone, shedding uploads while the queue's backlog is over its bound. (Each owner's
quota of unfinished jobs is a store precondition: JobStore.create.)"""
from __future__ import annotations

import math
import threading
import time
from datetime import datetime
from typing import Optional

from chalicelib.domain.errors import ConditionFailed, Overloaded, RateLimited, TransientError
from chalicelib.runtime.logs import get_logger
from chalicelib.usecases.context import Context
from chalicelib.usecases.leases import Lease

log = get_logger("capacity")

# Owners remembered by the rate limiter before idle ones are forgotten.
_MAX_TRACKED_OWNERS = 10_000
# A full quota is reconciled (its finished jobs' places given back) at most this often.
_RECONCILE_EVERY_SECONDS = 5.0


class Admission:
    def __init__(self, ctx: Context, monotonic=time.monotonic):
        self._ctx = ctx
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._seen: tuple[Optional[datetime], int] = (None, 0)
        self._buckets: dict[str, tuple[float, float]] = {}  # owner -> (tokens, at)
        self._reconciled: dict[str, float] = {}
        self._leases: dict[str, Lease] = {}

    def check_rate(self, owner: str) -> None:
        """429 rate_limited past the owner's rate: a token bucket per owner, shared by every
        API process through ctx.rates.

        This process leases the shared bucket's tokens a few at a time (one conditional write
        for them all) and spends them here without a write; a lease left unspent expires
        (chalicelib/usecases/leases.py says how big and for how long). This process's own
        bucket is checked first: it never holds fewer tokens than the shared one, and it is
        what holds while the table is down."""
        s = self._ctx.settings
        rate, burst = s.owner_requests_per_second, s.owner_burst
        now = self._monotonic()
        with self._lock:
            tokens = self._tokens(owner, now, rate, burst)
            if tokens < 1:
                self._refuse(owner, tokens, now, rate)
            wall = self._ctx.clock().timestamp()
            lease = self._leases.get(owner)
            if lease is None:
                lease = self._leases[owner] = Lease()
            ask = lease.spend_or_ask(wall, burst)
            if ask == 0:
                self._keep(owner, tokens - 1, now, rate, burst)
                return
            if ask < 0:
                self._refuse_for(lease.paused_until - wall)
        got = self._lease_shared(owner, lease, ask, wall, rate, burst)
        with self._lock:
            tokens = self._tokens(owner, now, rate, burst)
            if got is None:
                self._refuse_for(lease.paused_until - wall)
            self._keep(owner, tokens - 1, now, rate, burst)
            if len(self._leases) > _MAX_TRACKED_OWNERS:
                self._leases = {o: l for o, l in self._leases.items() if l.live(wall)}

    def _tokens(self, owner: str, now: float, rate: float, burst: int) -> float:
        tokens, at = self._buckets.get(owner, (float(burst), now))
        return min(float(burst), tokens + (now - at) * rate)

    def _keep(self, owner: str, tokens: float, now: float, rate: float, burst: int) -> None:
        self._buckets[owner] = (tokens, now)
        if len(self._buckets) > _MAX_TRACKED_OWNERS:
            self._forget_idle(now, rate, burst)

    def _refuse(self, owner: str, tokens: float, now: float, rate: float):
        self._refuse_for((1 - tokens) / rate)

    def _refuse_for(self, seconds: float):
        log.warning("request_rate_limited", reason="rate")
        raise RateLimited("Too many requests; slow down", retry_after=max(1, math.ceil(seconds - 1e-9)))

    def _lease_shared(self, owner: str, lease: "Lease", ask: int, now: float, rate: float,
                      burst: int) -> Optional[int]:
        """Lease `ask` tokens (fewer when the shared bucket has fewer) and spend one: the
        tokens leased, None when there are none. One conditional write when this process
        knows the bucket's state (it is alone on the owner, or the owner is idle); when
        another took tokens meanwhile, a read and a second write."""
        rates = self._ctx.rates
        cost, depth = 1 / rate, burst / rate
        try:
            for attempt in range(2):
                count = min(ask, lease.available(now, cost, depth, burst))
                if not lease.worth(count, ask, now):
                    break
                step = rates.take_from_full if lease.full(now) else rates.take
                try:
                    full_at = step(owner, now, count * cost, depth)
                except ConditionFailed:
                    if attempt == 0:
                        lease.known(rates.full_at(owner))
                    continue
                with self._lock:
                    lease.granted(count, full_at, now, cost, depth)
                return count
        except TransientError:
            # The table is down: fairness is not worth refusing everyone for; this
            # process's own bucket still holds.
            log.warning("rate_store_unavailable")
            return burst
        with self._lock:
            lease.pause(now, cost, depth, ask)
        return None

    def _forget_idle(self, now: float, rate: float, burst: int) -> None:
        full = [o for o, (tokens, at) in self._buckets.items() if tokens + (now - at) * rate >= burst]
        for owner in full:
            del self._buckets[owner]

    def may_reconcile(self, owner: str) -> bool:
        """Reconciling a full quota costs a read per place: at most once in a while per owner,
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
