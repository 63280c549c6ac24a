"""One API process's lease on an owner's shared token bucket (chalicelib/usecases/admission.py):
tokens taken from the table in one write and spent here without one.

How many: a lease starts small and doubles each time it is spent before it expires, up to
MAX_TOKENS (a busy owner's process writes once per MAX_TOKENS requests); one that expires
unspent halves the next (an owner seen now and then costs one token per write). It asks for
at least as many tokens as this process has requests waiting for it: concurrent requests
share one write. While other processes lease from the same bucket, a lease takes at most a
SHARE of what is left, so that tokens one process holds unspent near the bottom of a burst
stay few.
How long: a lease lives LIFETIME times as long as its tokens take to come back, at least
MIN_LIFETIME (at 1,000 a second a lease would otherwise expire between two requests of one
client). What is left then is given back with this process's next lease of the owner (no
write of its own), unless the bucket has been full since: the fill forgave them.
Ahead: a lease may take tokens the bucket will have within HORIZON, each to be spent no
earlier than the bucket has it; a request given such a token waits for it. So an owner at
its rate still costs a write per lease, not one a request, and a request that finds the
table short because another process holds tokens it has not spent waits (at most HORIZON)
for the bucket to make up for them instead of being refused. Only a bucket with no token
within HORIZON refuses, and then this process writes nothing until one can be.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

MAX_TOKENS = 10
FIRST_TOKENS = 1
LIFETIME = 1.5
MIN_LIFETIME = 1.0  # seconds
HORIZON = 1.0  # seconds; at most MIN_LIFETIME, so a lease lives until its last token is due
SHARE = 4
# Of a token: what float arithmetic on epoch seconds may lose (the table's condition allows it).
SLACK = 1e-3


@dataclass
class Lease:
    tokens: int = 0                  # leased and not yet spent
    until: float = 0.0               # when they expire (epoch seconds)
    last_at: float = 0.0             # when the bucket has the last of them
    size: int = FIRST_TOKENS         # the next lease asked for
    full_at: Optional[float] = None  # the shared bucket as last seen; None: full
    paused_until: float = 0.0        # no token within HORIZON before then
    writing: bool = False            # one request of this process is leasing
    waiting: int = 0                 # requests of this process waiting for that lease
    stale: bool = False              # full_at is from before a pause: others took since
    leased_at: float = 0.0           # when the last lease was written
    unspent: int = 0                 # its tokens that expired unspent, to give back
    crowded_until: float = 0.0       # others lease from the bucket too (seen lately)

    def spend(self, now: float, cost: float) -> Optional[float]:
        """Spend the next leased token: when the bucket has it (now or later), or None when
        this process holds none."""
        if self.tokens < 1 or now >= self.until:
            return None
        due = self.last_at - (self.tokens - 1) * cost
        self.tokens -= 1
        return max(now, due)

    def ask(self, now: float, burst: int) -> int:
        """The tokens to lease now, none being held: more when the last lease was spent in
        time, fewer when it expired unspent."""
        if self.tokens >= 1:
            self.size = max(1, self.size // 2)  # expired unspent: it asked for too many
            self.unspent = self.tokens
        elif now < self.until:
            self.size = min(MAX_TOKENS, self.size * 2)  # spent in time: it may ask for more
        self.tokens = 0
        return min(max(self.size, self.waiting + 1), burst, MAX_TOKENS)

    def full(self, now: float) -> bool:
        return self.full_at is None or self.full_at <= now

    def available(self, now: float, cost: float, depth: float, burst: int) -> int:
        """The shared bucket's tokens within HORIZON as last seen (more than it has when
        others took some)."""
        if self.full(now):
            return burst
        return max(0, math.floor((now + depth + HORIZON - self.full_at) / cost + SLACK))

    def known(self, full_at: Optional[float], now: float, depth: float) -> None:
        """The bucket as the table answered; another process took from it when it is not
        what this process left."""
        if not (self.full(now) and (full_at is None or full_at <= now)) and (
                full_at is None or self.full_at is None or abs(full_at - self.full_at) > 1e-6):
            self.crowded_until = now + depth
        self.full_at = full_at
        self.stale = False

    def share(self, now: float, left: int) -> int:
        """The most to lease of the `left` tokens: all of them while this process is alone
        on the owner, a part while others lease too (what one leases and does not spend,
        another's requests wait for)."""
        return left if now >= self.crowded_until else math.ceil(left / SHARE)

    def granted(self, count: int, full_at: float, now: float, cost: float, depth: float) -> None:
        self.tokens = count
        self.leased_at = now
        self.full_at = full_at
        self.stale = False
        self.last_at = full_at - depth
        self.until = now + max(MIN_LIFETIME, LIFETIME * count * cost)

    def pause(self, now: float, cost: float, depth: float) -> None:
        """No token within HORIZON: wait until there is one."""
        self.paused_until = max(now + cost, self.next_due(cost, depth) - HORIZON)
        self.stale = True

    def next_due(self, cost: float, depth: float) -> float:
        """When the shared bucket, as last seen, has a token again."""
        return (self.full_at or 0.0) - depth + cost

    def live(self, now: float) -> bool:
        return self.writing or now < max(self.until, self.paused_until) or not self.full(now)
