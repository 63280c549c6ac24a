"""Push: every status change of an owner's jobs, to each WebSocket connection the owner has
open (docs/contract.md "Push"). An addition to polling, never in its way: nothing here may
fail or slow a write, a worker or another client. A change that cannot be sent is a log line
and a metric; the client, told that delivery may be lost, reads by GET after a reconnect.

Two triggers hand a job's new state to `Push.publish`: in the cloud the table's stream
(app.py's push_job_changes, through `publish_changes`); where the stage has no stream (the
local runner, on every backend) `PushingJobStore`, which offers each status write to a
`Fanout` thread once the write has landed.
"""
from __future__ import annotations

import contextlib
import json
import queue
import threading
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Callable, Iterator, Optional, Union

from chalicelib.domain.errors import ConnectionGone, PushConnectionsFull, RateLimited, TransientError
from chalicelib.domain.jobs import Job
from chalicelib.runtime import deadline
from chalicelib.runtime.logs import get_logger
from chalicelib.runtime.metrics import Dimension, Metric
from chalicelib.usecases.admission import Admission
from chalicelib.usecases.context import Context
from chalicelib.usecases.results import Urls

log = get_logger("push")
# How long a new connection may still be opening: the connect function's timeout
# (.chalice/config.json). Until $connect returns, a send finds the connection gone.
OPENING_SECONDS = 10


def message(body: dict) -> str:
    """A push message's text: its body (Context.push_body), compact."""
    return json.dumps(body, separators=(",", ":"))


class Refusal(StrEnum):
    """Why a connect was refused (the metric's Reason; the contract's status beside each)."""

    UNAUTHORIZED = "unauthorized"   # 401: no good token offered
    RATE = "rate"                   # 429: past the owner's request rate (a connect is a request)
    FULL = "full"                   # 429: the owner's cap of open connections
    UNAVAILABLE = "unavailable"     # 503: the connection could not be recorded


class Push:
    def __init__(self, ctx: Context, urls: Callable[[Job], Optional[Urls]], admission: Admission):
        self._ctx = ctx
        self._urls = urls
        self._admission = admission

    def connect(self, owner: str, connection_id: str) -> None:
        """Record an accepted connection. RateLimited past the owner's request rate, which a
        connect takes from as a request does (it costs a function run, table writes and a
        draw on the account's new-connection rate); PushConnectionsFull past the owner's cap
        (MAX_PUSH_CONNECTIONS_PER_OWNER); TransientError when it cannot be recorded: refuse
        it, since it would receive nothing."""
        ctx = self._ctx
        try:
            self._admission.check_rate(owner)
        except RateLimited:
            self.refused(Refusal.RATE)
            raise
        now = ctx.clock()
        until = now + timedelta(seconds=ctx.settings.push_connection_seconds)
        try:
            ctx.push_connections.add(owner, connection_id, until, ctx.settings.max_push_connections_per_owner,
                                     opened_at=now)
        except PushConnectionsFull:
            self.refused(Refusal.FULL)
            raise
        except TransientError:
            self.refused(Refusal.UNAVAILABLE)
            raise
        ctx.metrics.emit({Metric.PUSH_CONNECTS: 1})
        log.info("push_connected", connection_id=connection_id)

    def refused(self, reason: "Refusal") -> None:
        """Count a connect refused (the app refuses a bad token before any owner is known)."""
        self._ctx.metrics.emit({Metric.PUSH_REFUSED: 1}, {Dimension.REASON: reason})
        log.info("push_refused", reason=reason.value)

    def disconnect(self, connection_id: str) -> None:
        self._ctx.metrics.emit({Metric.PUSH_DISCONNECTS: 1})
        self._forget(connection_id)

    def publish(self, job: Job) -> int:
        """Send the job's state to every connection of its owner, never another's; the
        connections a send finds closed are forgotten. Returns the messages handed over.
        Within the invocation's time budget: a read or send that no longer fits is not
        started, and the messages left are counted as failures."""
        ctx = self._ctx
        if not deadline.has_time_for(1):
            ctx.metrics.emit({Metric.PUSH_FAILURES: 1})  # its connections are not even read
            self._out_of_time(job, 1)
            return 0
        try:
            connections = ctx.push_connections.of_owner(job.owner)
        except Exception:
            log.exception("push_connections_unread", job_id=job.job_id)
            ctx.metrics.emit({Metric.PUSH_FAILURES: 1})
            return 0
        if not connections:
            return 0
        try:
            body = message(ctx.push_body(job, self._urls(job)))
        except Exception:
            log.exception("push_message_unmade", job_id=job.job_id)
            ctx.metrics.emit({Metric.PUSH_FAILURES: 1})
            return 0
        sent = failed = gone = 0
        for n, connection_id in enumerate(connections):
            if not deadline.has_time_for(1):
                failed += self._out_of_time(job, len(connections) - n)  # counted below
                break
            try:
                ctx.push_sender.send(connection_id, body)
                sent += 1
            except ConnectionGone:
                gone += 1
                # Gone until its connect returns, too: one that opened just now is kept (the
                # client re-reads by GET once open, so this message is not missed).
                self._forget(connection_id, job.owner,
                             opened_before=ctx.clock() - timedelta(seconds=OPENING_SECONDS))
            except Exception:
                failed += 1
                log.warning("push_send_failed", job_id=job.job_id, connection_id=connection_id)
        values = {Metric.PUSH_MESSAGES: sent, Metric.PUSH_GONE: gone, Metric.PUSH_FAILURES: failed,
                  Metric.PUSH_LATENCY: round((ctx.clock() - job.updated_at).total_seconds() * 1000, 1)}
        ctx.metrics.emit({metric: value for metric, value in values.items() if value or metric is Metric.PUSH_LATENCY})
        return sent

    def publish_changes(self, records: list[dict]) -> int:
        """A batch of the table's stream records: each job they moved, a job's changes in
        order, different jobs side by side on PUSH_SEND_THREADS threads (one shard is read by
        one invocation at a time, so its sends one after another would cap a shard's changes a
        second; docs/scale.md). Never raises: a retried batch would hold the shard's later
        changes back."""
        try:
            jobs = self._ctx.job_changes.changed_jobs(records)
        except Exception:
            log.exception("push_records_unread", records=len(records))
            self._ctx.metrics.emit({Metric.PUSH_FAILURES: 1})
            return 0
        by_job: dict[str, list[Job]] = {}
        for job in jobs:
            by_job.setdefault(job.job_id, []).append(job)
        threads = min(self._ctx.settings.push_send_threads, len(by_job))
        if threads <= 1:
            return sum(self.publish(job) for job in jobs)
        return sum(deadline.run_in_pool(lambda changes: sum(self.publish(job) for job in changes),
                                        list(by_job.values()), threads, "push-send"))

    @staticmethod
    def _out_of_time(job: Job, messages: int) -> int:
        """Messages the invocation has no time left for are dropped, never waited for: the
        function's timeout would fail the whole batch, and Lambda retry it."""
        log.warning("push_out_of_time", job_id=job.job_id, messages=messages)
        return messages

    def _forget(self, connection_id: str, owner: Optional[str] = None,
                opened_before: Optional[datetime] = None) -> None:
        try:
            self._ctx.push_connections.remove(connection_id, owner, opened_before)
        except Exception:
            # Its item's time removes it, or the next send that finds it gone.
            log.warning("push_connection_not_forgotten", connection_id=connection_id)


class Fanout:
    """Publishes offered jobs on a thread of its own, in the order offered, so a write never
    waits for a gateway or a client. Bounded: past `capacity` waiting changes, an offer is
    dropped and counted, never blocks."""

    def __init__(self, publish: Callable[[Job], int], metrics, capacity: int = 1000):
        self._publish = publish
        self._metrics = metrics
        self._waiting: queue.Queue = queue.Queue(maxsize=capacity)
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    def offer(self, job: Union[Job, Callable[[], Optional[Job]]]) -> None:
        """A job to publish, or a read that gives one (None: nothing to publish)."""
        try:
            self._waiting.put_nowait(job)
        except queue.Full:
            self._metrics.emit({Metric.PUSH_FAILURES: 1})
            return
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="push-fanout", daemon=True)
                    self._thread.start()

    def drain(self, timeout: float = 5.0) -> bool:
        """Tests and shutdown: True once every offered job has been published."""
        done = threading.Event()
        threading.Thread(target=lambda: (self._waiting.join(), done.set()), daemon=True).start()
        return done.wait(timeout)

    def _run(self) -> None:
        while True:
            offered = self._waiting.get()
            try:
                job = offered if isinstance(offered, Job) else offered()
                if job is not None:
                    self._publish(job)
            except Exception:
                log.exception("push_publish_failed", job_id=getattr(offered, "job_id", None))
            finally:
                self._waiting.task_done()


class PushingJobStore:
    """A JobStore that offers each status it writes to a Fanout, once the write has landed:
    the trigger where the table has no stream. Every other call goes to the store as is.

    A write that failed as unavailable may still have landed (an answer lost, every re-send
    timed out; the upload's retry then replays the job): a stream would carry it, so here the
    fan-out reads the job and publishes what is stored. If nothing landed that is the state
    already sent, which clients drop as one they hold (its ETag)."""

    def __init__(self, store, fanout: Fanout):
        self._store = store
        self._fanout = fanout

    def __getattr__(self, name):
        return getattr(self._store, name)

    @contextlib.contextmanager
    def _unsure(self, job_id: str) -> Iterator[None]:
        try:
            yield
        except TransientError:
            self._fanout.offer(lambda: self._store.get(job_id))
            raise

    def create(self, job: Job, quota: int) -> None:
        with self._unsure(job.job_id):
            self._store.create(job, quota)
        self._fanout.offer(job)

    def create_with_key(self, job: Job, record, now, quota: int) -> None:
        with self._unsure(job.job_id):
            self._store.create_with_key(job, record, now, quota)
        self._fanout.offer(job)

    def move(self, job: Job, from_status) -> None:
        with self._unsure(job.job_id):
            self._store.move(job, from_status)
        self._fanout.offer(job)

    def claim(self, job_id: str, now, lease, max_attempts: int, source=None) -> Job:
        with self._unsure(job_id):
            job = self._store.claim(job_id, now, lease, max_attempts, source)
        self._fanout.offer(job)
        return job

    def finish_attempt(self, job: Job, attempt: int) -> None:
        with self._unsure(job.job_id):
            self._store.finish_attempt(job, attempt)
        self._fanout.offer(job)

    def update_if_unchanged(self, job: Job, seen: Job) -> None:
        with self._unsure(job.job_id):
            self._store.update_if_unchanged(job, seen)
        if job.version != seen.version:  # a resend or a new sweep time is no change to a client
            self._fanout.offer(job)
