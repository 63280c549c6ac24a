"""Waits (RFC 7240 `Prefer: wait`): hold a read until the job changes, so a client learns its
result when it exists instead of at its next poll.

The held request reads the job again on a schedule (consistent reads, fastest while the job
is processing, backing off the longer it keeps its status): the one way that works on every
backend and across instances, with nothing new to deploy. A wait is a courtesy: refused,
never an error, when the owner already holds its share of waits, when the service is loaded,
or when the invocation has too little time left.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Callable, Optional

from chalicelib.config import WAIT_MARGIN_SECONDS
from chalicelib.domain.errors import JobNotFound, Overloaded, TransientError
from chalicelib.domain.jobs import Job, JobStatus
from chalicelib.runtime import deadline
from chalicelib.runtime.logs import get_logger
from chalicelib.runtime.metrics import Metric
from chalicelib.usecases.admission import Admission
from chalicelib.usecases.context import Context

log = get_logger("waits")

# Seconds between reads while held, by the status the job has and how long it has had it
# (step, until that many seconds in the status), then the last step. A processing job is
# about to be ready: read it fastest, since each step's half is what a client learns late.
# A queued one can only be claimed first (a step shorter than the worker's time, so the fast
# reads begin before the result; awaiting_upload reads as queued). A job long in its
# status is in no hurry: its reads back off, and a long wait costs few (docs/scale.md §8).
_STEPS = {
    JobStatus.PROCESSING: ((0.02, 2.0), (0.1, 4.0), (0.25, 8.0), (0.5, 12.0)),
    JobStatus.QUEUED: ((0.04, 2.0), (0.1, 4.0), (0.25, 8.0), (0.5, 12.0)),
}
_LAST_STEP = 1.0
# How long a wait that saw `cancelled` looks for the delete that may follow it.
_SETTLE_STEP, _SETTLE_READS = 0.1, 5


def step_after(status: JobStatus, age: float) -> float:
    """Seconds to sleep before the next read of a job that has had `status` for `age` seconds."""
    for step, until in _STEPS.get(status, _STEPS[JobStatus.QUEUED]):
        if age < until:
            return step
    return _LAST_STEP


@dataclass(frozen=True)
class Held:
    """The job as it is at the end of the wait; `applied`: the longest the request was
    allowed to be held, in whole seconds, or None when it was not held at all."""

    job: Job
    applied: Optional[int] = None


class Waits:
    def __init__(self, ctx: Context, admission: Admission, sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic):
        self._ctx = ctx
        self._admission = admission
        self._sleep = sleep
        self._monotonic = monotonic

    def hold_until_changed(self, job: Job, seconds: int, known: Optional[frozenset[str]] = None) -> Held:
        """GET: held until the job's version is none of `known` (the client's If-None-Match),
        or, without them, until its status differs from the status it has now. Returns at
        once when the client's version is already stale or the job is terminal."""
        if known is not None:
            if job.version not in known:
                return Held(job)
            return self._hold(job, seconds, lambda now: now.version not in known)
        return self._hold(job, seconds, lambda now: now.status is not job.status)

    def hold_until_finished(self, job: Job, seconds: int) -> Held:
        """POST /images: held until the job is terminal."""
        return self._hold(job, seconds, lambda now: now.status.terminal)

    def _hold(self, job: Job, seconds: int, done: Callable[[Job], bool]) -> Held:
        ctx = self._ctx
        limit = self._limit(seconds)
        if job.status.terminal or done(job) or limit <= 0:
            return Held(job)
        holder = uuid.uuid4().hex
        slot = self._take_slot(job.owner, holder, limit)
        if slot is None:
            ctx.metrics.emit({Metric.WAITS_REFUSED: 1})
            return Held(job)
        started = self._monotonic()
        try:
            current = self._follow(job, started + limit, done)
        finally:
            try:
                ctx.wait_slots.give_back(job.owner, slot, holder)
            except TransientError:
                log.warning("wait_slot_not_given_back", job_id=job.job_id)  # its time frees it
            ctx.metrics.emit({Metric.WAITS_HELD: 1,
                              Metric.WAIT_TIME: round((self._monotonic() - started) * 1000, 1)})
        return Held(current, applied=int(limit))

    def _limit(self, seconds: int) -> float:
        """The longest this request may be held: what it asked, within the stage's cap and
        the invocation's time, less what answering needs."""
        limit = float(min(seconds, self._ctx.settings.max_wait_seconds))
        budget = deadline.current()
        if budget is not None:
            limit = min(limit, budget.remaining() - WAIT_MARGIN_SECONDS)
        return limit

    def _take_slot(self, owner: str, holder: str, limit: float) -> Optional[int]:
        ctx = self._ctx
        try:
            self._admission.check_backlog()
        except Overloaded:
            return None
        now = ctx.clock()
        # A slot outlives its request by the answer's margin: a holder still answering keeps it.
        until = now + timedelta(seconds=limit + WAIT_MARGIN_SECONDS)
        try:
            return ctx.wait_slots.take(owner, holder, until, now, ctx.settings.max_waits_per_owner)
        except TransientError:
            return None

    def _follow(self, job: Job, ends: float, done: Callable[[Job], bool]) -> Job:
        """Read the job on the schedule until `done` or `ends`; the job as last read. A job
        deleted meanwhile ends the wait with JobNotFound, as a GET would."""
        current, since = job, self._since(job)
        while True:
            now = self._monotonic()
            left = ends - now
            if left <= 0:
                return current
            self._sleep(min(step_after(current.status, now - since), left))
            try:
                read = self._ctx.jobs.get(job.job_id)
            except TransientError:
                continue  # a slow read only shortens the wait; the answer is the last read
            if read is None or read.owner != job.owner:
                raise JobNotFound()
            if read.version != current.version:
                since = self._since(read)
            current = read
            if current.status is JobStatus.CANCELLED:
                return self._unless_deleted(current)
            if current.status.terminal or done(current):
                return current

    def _since(self, job: Job) -> float:
        """The moment, on this wait's clock, the job took its status: its record's last write
        (on the writer's clock; a skew between the two only shifts the schedule)."""
        age = (self._ctx.clock() - job.updated_at).total_seconds()
        return self._monotonic() - max(age, 0.0)

    def _unless_deleted(self, cancelled: Job) -> Job:
        """A DELETE cancels the job before it removes it: look a few times more, so that a
        job being deleted ends the wait as 404, not as the `cancelled` it passed through."""
        for _ in range(_SETTLE_READS):
            self._sleep(_SETTLE_STEP)
            try:
                read = self._ctx.jobs.get(cancelled.job_id)
            except TransientError:
                continue
            if read is None:
                raise JobNotFound()
        return cancelled
