"""Time budgets: how long the current invocation may still run, and what that allows.

Lambda kills a function at its timeout, and nothing after the kill runs: not a `finally`,
not the compensation of a half-done upload. So every invocation (API request, worker
message, sweep) runs inside `invocation(seconds)`, and the SDK asks `current()` before
each attempt of each call (chalicelib/adapters/sdk_limits.py): an attempt that could not end
before the deadline, with the reserve for compensation still left, is not started. The
compensation itself runs inside `compensating()`, which may spend the reserve.

No SDK here: the use cases consult it too (the sweeper stops taking jobs when time runs out).
"""
from __future__ import annotations

import contextvars
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Sequence, TypeVar

# Lambda's own overhead and the clock's slack: never plan the last second.
SAFETY_SECONDS = 1.0
# Compensations are at most two writes (fail the job, release its key).
RESERVED_ATTEMPTS = 2

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(frozen=True)
class SdkLimits:
    """Per-attempt timeouts and attempts for every SDK client, derived from the shortest
    function timeout, so one attempt is a small part of any invocation."""

    connect_timeout: float
    read_timeout: float
    max_attempts: int

    @classmethod
    def within(cls, shortest_timeout_seconds: float) -> "SdkLimits":
        # One attempt may take at most a sixth of the shortest function's time: the work,
        # a retry and the compensation's two writes all fit in it.
        attempt = max(1.0, min(12.0, shortest_timeout_seconds / 6))
        connect = min(2.0, attempt / 3)
        # As many attempts (at most 3) as fit with botocore's backoff between them, after the
        # safety margin and the compensation's reserve: even a call that never gets an
        # answer ends in time, before the per-attempt check of the budget even matters.
        room = shortest_timeout_seconds - SAFETY_SECONDS - RESERVED_ATTEMPTS * attempt
        attempts = 1
        while attempts < 3 and (attempts + 1) * attempt + _backoff(attempts + 1) <= room:
            attempts += 1
        return cls(connect_timeout=round(connect, 2), read_timeout=round(attempt - connect, 2),
                   max_attempts=attempts)

    @classmethod
    def for_settings(cls, settings) -> "SdkLimits":
        return cls.within(min(settings.api_timeout_seconds, settings.worker_timeout_seconds,
                              settings.sweep_timeout_seconds))

    @property
    def attempt_seconds(self) -> float:
        """The longest one attempt can take before its timeouts end it."""
        return self.connect_timeout + self.read_timeout


def _backoff(attempts: int) -> float:
    """botocore's standard mode sleeps at most 1, 2, 4 ... s before each retry."""
    return float(sum(min(20, 2 ** n) for n in range(attempts - 1)))


class Budget:
    """The deadline of one invocation, and the part of it kept for compensation."""

    def __init__(self, seconds: float, attempt_seconds: float,
                 monotonic: Callable[[], float] = time.monotonic):
        self._monotonic = monotonic
        self._deadline = monotonic() + seconds - SAFETY_SECONDS
        self.attempt_seconds = attempt_seconds
        self._reserve = RESERVED_ATTEMPTS * attempt_seconds

    def remaining(self) -> float:
        return self._deadline - self._monotonic()

    def allows(self, seconds: float) -> bool:
        """Whether `seconds` of work still fit before the deadline, leaving the reserve."""
        return self.remaining() - self._reserve >= seconds

    def allows_calls(self, calls: int) -> bool:
        """Whether `calls` SDK calls fit, each at its slowest single attempt."""
        return self.allows(calls * self.attempt_seconds)

    @contextmanager
    def compensating(self) -> Iterator[None]:
        """Inside, the reserve may be spent: this is what it was kept for."""
        kept, self._reserve = self._reserve, 0.0
        try:
            yield
        finally:
            self._reserve = kept


_current: contextvars.ContextVar[Optional[Budget]] = contextvars.ContextVar("budget", default=None)


def current() -> Optional[Budget]:
    """The budget of the invocation this thread runs, if any (tests and tools have none)."""
    return _current.get()


def has_time_for(calls: int) -> bool:
    """For loops that take on more work (the sweeper): True outside an invocation."""
    budget = current()
    return budget is None or budget.allows_calls(calls)


@contextmanager
def invocation(seconds: float, limits: SdkLimits,
               monotonic: Callable[[], float] = time.monotonic) -> Iterator[Budget]:
    budget = Budget(seconds, limits.attempt_seconds, monotonic)
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


def run_in_pool(call: Callable[[Item], Result], items: Sequence[Item], threads: int,
                name: str) -> list[Result]:
    """call(item) for every item, on at most `threads` threads named `name`: the results in
    the items' order. Each call runs in a copy of this thread's context, so that the
    invocation's budget binds the pool's threads and their SDK calls too."""
    from concurrent.futures import ThreadPoolExecutor  # on the first pool: a GET makes none

    contexts = [contextvars.copy_context() for _ in items]
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name) as pool:
        return list(pool.map(lambda item, context: context.run(call, item), items, contexts))


@contextmanager
def compensating() -> Iterator[None]:
    """Run compensation with the reserve (a no-op outside an invocation)."""
    budget = current()
    if budget is None:
        yield
        return
    with budget.compensating():
        yield


def seconds_left(lambda_context, configured_seconds: float) -> float:
    """The time this invocation has: Lambda's own count where there is one, never more than
    the function's configured timeout (`chalice local` and tests pass generous contexts)."""
    remaining = getattr(lambda_context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return configured_seconds
    return min(configured_seconds, remaining() / 1000)


def function_invocation(lambda_context, configured_seconds: float, settings):
    """The time budget of one function's invocation: what Lambda says is left (`seconds_left`),
    with the SDK limits every client is built with (`settings`: Settings)."""
    return invocation(seconds_left(lambda_context, configured_seconds), SdkLimits.for_settings(settings))
