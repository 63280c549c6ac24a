"""Who may add load, and how much: a request rate per owner, and, as the last resort for
everyone, shedding uploads while the queue's backlog is over its bound. (Each owner's
quota of unfinished jobs is a store precondition: JobStore.create.)"""
from __future__ import annotations

import math
import threading
import time
from datetime import datetime
from typing import Optional

from chalicelib.domain.errors import BucketMoved, Overloaded, RateLimited, TransientError
from chalicelib.runtime.logs import get_logger
from chalicelib.usecases.context import Context
from chalicelib.usecases.leases import HORIZON, SLACK, Lease

log = get_logger("capacity")

# Owners remembered by the rate limiter before idle ones are forgotten.
_MAX_TRACKED_OWNERS = 10_000
# A full quota is reconciled (its finished jobs' places given back) at most this often.
_RECONCILE_EVERY_SECONDS = 5.0
# Writes of one lease before giving up on a table others keep changing under it.
_LEASE_ATTEMPTS = 8


class Admission:
    def __init__(self, ctx: Context, monotonic=time.monotonic, sleep=time.sleep):
        self._ctx = ctx
        self._monotonic = monotonic
        self._sleep = sleep
        self._lock = threading.Lock()
        self._turn = threading.Condition(self._lock)  # a lease written: its waiters spend it
        self._seen: tuple[Optional[datetime], int] = (None, 0)
        self._buckets: dict[str, tuple[float, float]] = {}  # owner -> (tokens, at)
        self._reconciled: dict[str, float] = {}
        self._leases: dict[str, Lease] = {}

    def check_rate(self, owner: str) -> None:
        """429 rate_limited past the owner's rate: a token bucket per owner, shared by every
        API process through ctx.rates.

        This process leases the shared bucket's tokens a few at a time (one conditional write
        for them all) and spends them here without a write; one request at a time leases for
        the process, the others wait for its lease (chalicelib/usecases/leases.py says how
        big, for how long, and why a request may wait for its token). This process's own
        bucket is checked first: it never holds fewer tokens than the shared one, and it is
        what holds while the table is down."""
        s = self._ctx.settings
        rate, burst = s.owner_requests_per_second, s.owner_burst
        now = self._monotonic()
        with self._turn:
            tokens = self._tokens(owner, now, rate, burst)
            if tokens < 1 - SLACK:
                self._refuse(owner, tokens, now, rate)
            self._keep(owner, tokens - 1, now, rate, burst)
            lease = self._leases.get(owner)
            if lease is None:
                lease = self._leases[owner] = Lease()
            try:
                due = self._spend(owner, lease, rate, burst)
            except RateLimited:  # a refused request spends nothing, here either
                self._keep(owner, min(burst, self._tokens(owner, now, rate, burst) + 1), now, rate, burst)
                raise
            wall = self._ctx.clock().timestamp()
            if len(self._leases) > _MAX_TRACKED_OWNERS:
                self._leases = {o: l for o, l in self._leases.items() if l.live(wall)}
        if due > wall:
            self._sleep(due - wall)  # its token is the shared bucket's once another's is back

    def _spend(self, owner: str, lease: Lease, rate: float, burst: int) -> float:
        """Under the lock: spend a leased token, leasing more when this process holds none;
        when the bucket has it. One request leases at a time (the lock is let go for its
        write); the others wait for its lease, so that concurrent requests never race one
        another for the owner's item."""
        cost, depth = 1 / rate, burst / rate
        while True:
            wall = self._ctx.clock().timestamp()
            due = lease.spend(wall, cost)
            if due is not None:
                return due
            if lease.writing:
                lease.waiting += 1
                self._turn.wait()
                lease.waiting -= 1
                continue
            if wall < lease.paused_until:
                self._refuse_for(lease.next_due(cost, depth) - wall)
            ask = lease.ask(wall, burst)
            lease.writing = True
            self._lock.release()
            try:
                leased = self._lease_shared(owner, lease, ask, rate, burst)
            finally:
                self._lock.acquire()
                lease.writing = False
                self._turn.notify_all()
            if leased is None:  # the table is down: this process's own bucket holds
                return wall
            count, full_at, at = leased
            if count:
                lease.granted(count, full_at, at, cost, depth)
            else:
                lease.pause(at, cost, depth)

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

    def _lease_shared(self, owner: str, lease: Lease, ask: int, rate: float,
                      burst: int) -> Optional[tuple[int, Optional[float], float]]:
        """Outside the lock: lease up to `ask` tokens, as many as the shared bucket has within
        the horizon: (how many, the bucket's full_at, when), or None when the table is down.
        Only this request touches the lease meanwhile (its `writing`). One conditional write when
        this process knows the bucket's state (it is alone on the owner, or the owner is
        idle); when another took tokens meanwhile, a read and a write again, until the lease
        is written or the read shows no token (the lease then pauses until one is due)."""
        rates = self._ctx.rates
        cost, depth = 1 / rate, burst / rate
        reach = depth + HORIZON + SLACK * cost
        try:
            # Each lost condition is another process's lease written: a few at most.
            if lease.stale:  # others may have taken tokens while this process paused
                lease.known(rates.full_at(owner), self._ctx.clock().timestamp(), depth)
            for _ in range(_LEASE_ATTEMPTS):
                now = self._ctx.clock().timestamp()
                if lease.full(now):
                    lease.unspent = 0  # a full bucket has forgiven them
                give = lease.unspent
                left = lease.available(now, cost, depth, burst)
                count = min(ask, lease.share(now, left) + give)
                if count < 1:
                    break
                try:
                    if lease.full(now):
                        full_at = rates.take_from_full(owner, now, count * cost, reach)
                    else:
                        full_at = rates.take(owner, now, count * cost, reach, give * cost, lease.leased_at)
                        lease.known(full_at - (count - give) * cost, now, depth)
                except BucketMoved as moved:  # another's lease was written: now it holds this
                    lease.known(moved.full_at, now, depth)
                    if give and count - give <= lease.available(now, cost, depth, burst):
                        lease.unspent = 0  # it would have fitted: a fill since forgave them
                    continue
                lease.unspent = 0
                return count, full_at, now
        except TransientError:
            # The table is down: fairness is not worth refusing everyone for; this
            # process's own bucket still holds.
            log.warning("rate_store_unavailable")
            return None
        return 0, lease.full_at, self._ctx.clock().timestamp()

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
