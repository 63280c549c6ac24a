"""One API process's lease on an owner's shared token bucket (chalicelib/usecases/admission.py):
tokens taken from the table in one write and spent here without one.

How many: a lease starts small and doubles each time it is spent before it expires, up to
MAX_TOKENS (a busy owner's process writes once per MAX_TOKENS requests); one that expires
unspent halves the next (an owner seen now and then costs one token per write, as before).
How long: a lease lives LIFETIME times as long as its tokens take to come back, so tokens a
process took and did not spend add at most that much to a burst; what is left then is
dropped, not given back (a write to save a write is no saving). At least MIN_LIFETIME,
though: at a high rate (1,000 a second) a lease would otherwise expire between two requests
of one client, and every request would write again; the tokens it keeps then are at most
MAX_TOKENS, a small part of such a burst.
Once the bucket has run short (fewer tokens than LEAST of a lease: what is left of it is
taken then), the process waits until it has that many rather than lease one at a time: the
owner is at its limit, and tokens are not lost by waiting (they stay in the shared bucket).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

MAX_TOKENS = 10
FIRST_TOKENS = 1
LIFETIME = 1.5
MIN_LIFETIME = 1.0  # seconds
LEAST = 0.7


@dataclass
class Lease:
    tokens: int = 0                  # leased and not yet spent
    until: float = 0.0               # when they expire (epoch seconds)
    size: int = FIRST_TOKENS         # the next lease asked for
    full_at: Optional[float] = None  # the shared bucket as last seen; None: full
    paused_until: float = 0.0
    short: bool = False              # the bucket ran short since it was last seen full

    def spend_or_ask(self, now: float, burst: int) -> int:
        """0 when a leased token was spent; else the tokens to lease (-1: wait, refuse)."""
        if self.tokens >= 1 and now < self.until:
            self.tokens -= 1
            return 0
        if now < self.paused_until:
            return -1
        if self.tokens >= 1:
            self.size = max(1, self.size // 2)  # expired unspent: it asked for too many
        elif now < self.until:
            self.size = min(MAX_TOKENS, self.size * 2)  # spent in time: it may ask for more
        self.tokens = 0
        return min(self.size, burst, MAX_TOKENS)

    def full(self, now: float) -> bool:
        return self.full_at is None or self.full_at <= now

    def available(self, now: float, cost: float, depth: float, burst: int) -> int:
        """The shared bucket's tokens as last seen (more than it has when others took some)."""
        if self.full(now):
            return burst
        return max(0, math.floor((now + depth - self.full_at) / cost + 1e-9))

    def worth(self, count: int, ask: int, now: float) -> bool:
        """Whether leasing `count` of the `ask` tokens is worth a write: any once the bucket
        runs short (the last of a burst), then only LEAST of a lease."""
        if self.full(now):
            self.short = False
        return count >= (self._least(ask) if self.short else 1)

    def _least(self, ask: int) -> int:
        return max(1, math.ceil(ask * LEAST))

    def known(self, full_at: Optional[float]) -> None:
        self.full_at = full_at

    def granted(self, count: int, full_at: float, now: float, cost: float, depth: float) -> None:
        """`count` tokens leased, one of them spent by the request that asked; fewer than
        asked for: the bucket is short, and the next lease waits."""
        self.tokens += count - 1
        self.until = now + max(MIN_LIFETIME, LIFETIME * count * cost)
        self.full_at = full_at
        if count < self.size:
            self.pause(now, cost, depth, self.size)

    def pause(self, now: float, cost: float, depth: float, ask: int) -> None:
        """Wait until the bucket has the least worth a write."""
        full_at = self.full_at if self.full_at is not None else now
        self.paused_until = max(now + cost, full_at - depth + self._least(ask) * cost)
        self.short = True

    def live(self, now: float) -> bool:
        return now < max(self.until, self.paused_until) or not self.full(now)
