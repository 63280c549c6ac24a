"""The crash-point harness.

A step of the service (an upload, a worker's delivery, a sweep) runs with its ports wrapped
by an Injector, which counts the external calls the step makes and fails the chosen one:
before it is sent or after it succeeded, as a kill (Killed: nothing after it runs, the way
Lambda's timeout or a SIGKILL ends a process) or as an error (TransientError: the call
failed, or timed out after it landed, and the code's own handling runs). Then the world goes
on: the client retries as the contract tells it to, the queue redelivers what was not
acknowledged, the sweeper runs, and the four invariants of issue 10 are checked.

The world is built from tests/fakes.py here (exhaustive, fast); tests/crash/test_crash_moto.py
builds it on moto's server for a representative subset.
"""
from __future__ import annotations

import itertools
import threading
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Optional

from chalicelib.config import Settings
from chalicelib.domain.errors import PoisonMessage, TransientError
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.jobs import TERMINAL, JobStatus
from chalicelib.usecases import UseCases
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, FakeQueue, fake_context
from tests.images import jpeg

START = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)
IMAGE = jpeg(96, 64)


def image_of(key: str) -> bytes:
    """The photo an upload under `key` sends: the same for the same key, as a retry sends it,
    and other bytes under another key, so that a job on a table shared across tests is never
    another test's duplicate (which would be copied, and reach no crash point of processing)."""
    return jpeg(96, 64, comment=key.encode())
HOWS = ("kill", "error")
WHENS = ("before", "after")
# A conditional write that landed but whose answer was lost: the SDK sends it again and the
# re-send fails its condition. The store knows its own write (its write id) unless another
# write came in between; then the caller sees the condition fail ("after retried").
CONDITIONAL_WRITES = {"jobs.create", "jobs.create_with_key", "jobs.move", "jobs.claim",
                      "jobs.release_lease", "jobs.finish_attempt", "jobs.update_if_unchanged"}
# Calls that compute locally and reach no service: nothing to crash.
LOCAL_CALLS = {"presign_get", "presign_post"}
# SQS's maxReceiveCount in infra/template.yaml: then the message is dead-lettered (lost).
MAX_RECEIVES = 5


class Killed(BaseException):
    """The process died at this point: no `except Exception`, no compensation runs."""


@dataclass(frozen=True)
class Point:
    index: int   # the n-th external call of the step under test (0-based)
    call: str    # e.g. "objects.put"
    when: str    # "before" | "after"
    how: str     # "kill" | "error"
    # Instead of the index: the nth call named `call` (for a world whose other calls vary).
    nth: Optional[int] = None

    def label(self) -> str:
        where = f"#{self.index}" if self.nth is None else f"{self.nth + 1}. of"
        return f"{where} {self.call} {self.when} {self.how}"


class Injector:
    """Wraps ports; while armed, records each external call and fails the chosen one."""

    def __init__(self, point: Optional[Point] = None):
        self.point = point
        self.armed = False
        self.calls: list[str] = []
        self.fired = False

    def wrap(self, name: str, target: Any) -> Any:
        return _Proxy(self, name, target)

    def run(self, name: str, call: Callable[[], Any]) -> Any:
        if not self.armed:
            return call()
        index = len(self.calls)
        self.calls.append(name)
        hit = self.point is not None and not self.fired and (
            index == self.point.index if self.point.nth is None
            else name == self.point.call and self.calls.count(name) == self.point.nth + 1)
        if hit and self.point.when == "before":
            self._fire()
        result = call()
        if hit and self.point.when == "after":
            self._fire()
        return result

    def _fire(self):
        self.fired = True
        if self.point.how == "kill":
            raise Killed(self.point.label())
        if self.point.how == "retried":
            from chalicelib.domain.errors import ConditionFailed, IdempotencyKeyTaken

            raise IdempotencyKeyTaken() if self.point.call == "jobs.create_with_key" else ConditionFailed()
        raise TransientError(f"injected: {self.point.label()}")


class _Proxy:
    def __init__(self, injector: Injector, name: str, target: Any):
        self._injector, self._name, self._target = injector, name, target

    def __getattr__(self, attr: str):
        value = getattr(self._target, attr)
        if attr.startswith("_") or attr in LOCAL_CALLS or not callable(value):
            return value

        def call(*args, **kwargs):
            def once():
                result = value(*args, **kwargs)
                # A listing is one call, whose pages the caller reads; read them now.
                return iter(list(result)) if attr == "list_keys" else result
            return self._injector.run(f"{self._name}.{attr}", once)

        return call


class Recording:
    """A job store that keeps every status each job was written with, in order. Mixed in
    before the store it records (the fake here; DynamoDB in tests/crash/test_model.py), which
    must offer `items` (job id -> Job) and `idempotency` (scope -> record) to the checks."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.history: list[tuple[str, JobStatus]] = []
        # (job id, attempt, sequence) after each write, in order.
        self.steps: list[tuple[str, int, int]] = []

    def _note(self, job_id: str) -> None:
        job = self.get(job_id)
        if job is not None:
            self.history.append((job_id, job.status))
            self.steps.append((job_id, job.attempt, job.sequence))

    def create(self, job, quota):
        super().create(job, quota)
        self._note(job.job_id)

    def create_with_key(self, job, record, now, quota):
        super().create_with_key(job, record, now, quota)
        self._note(job.job_id)

    def move(self, job, from_status):
        super().move(job, from_status)
        self._note(job.job_id)

    def claim(self, job_id, now, lease, max_attempts, source=None):
        claimed = super().claim(job_id, now, lease, max_attempts, source)
        self._note(job_id)
        return claimed

    def finish_attempt(self, job, attempt):
        super().finish_attempt(job, attempt)
        self._note(job.job_id)

    def update_if_unchanged(self, job, seen):
        super().update_if_unchanged(job, seen)
        self._note(job.job_id)


class RecordingJobStore(Recording, FakeJobStore):
    """The fake store, keeping every status each job was written with, in order."""


def default_settings() -> Settings:
    # One sweeper thread: the harness names a crash point by its place in the call order.
    return Settings(bucket="images", sweep_threads=1, orphan_scan_threads=1)


class World:
    """The service on fakes, with storage's notifications, a redelivering queue and a client."""

    def __init__(self, injector: Injector, settings: Optional[Settings] = None,
                 jobs: Optional[Recording] = None):
        """jobs: a recording job store other than the fake."""
        self.injector = injector
        self.settings = settings or default_settings()
        self.clock = Clock(START)
        self.queue = FakeQueue(self.clock)
        self.jobs = jobs if jobs is not None else RecordingJobStore()
        self.objects = FakeObjectStore(self.clock, on_created=self._notify)
        # Job ids in a fixed sequence: a job's shard, so the sweep's calls and their indices,
        # are the same in every run and every process (pytest-xdist collects the crash points
        # in each of its processes, and they must agree; a failing point's id is the same
        # when it is run again).
        ids = itertools.count(1)
        self.use_cases = UseCases(fake_context(
            settings=self.settings, clock=self.clock, new_id=lambda: str(uuid.UUID(int=next(ids), version=4)),
            jobs=injector.wrap("jobs", self.jobs), objects=injector.wrap("objects", self.objects),
            publisher=injector.wrap("queue", self.queue), backlog=injector.wrap("queue", self.queue),
        ))
        self.receives: Counter = Counter()
        self.dead_letters: list[ObjectCreated] = []
        # A worker so fast it handles an upload's event before the uploader hears back
        # from storage (the race behind an ambiguous put).
        self.fast_worker = False
        # Settle rounds during which the workers are busy elsewhere: a backlog.
        self.busy_rounds = 0

    # -- the world outside the service -----------------------------------------------------
    def _notify(self, key: str) -> None:
        """S3's object-created notification: sent by storage, not by our code."""
        if key.startswith(self.settings.originals_prefix):
            self.queue.waiting.append((self.clock(), ObjectCreated(self.settings.bucket, key, 0)))
            if self.fast_worker:
                self.deliver()

    def client_put(self, key: str, data: bytes = IMAGE) -> None:
        """The client's own POST to the presigned form."""
        self.objects.put(key, data, "image/jpeg")

    def deliver(self) -> None:
        """The workers take each waiting message once; one that fails or dies is shown again
        (its visibility timeout), until the queue dead-letters it."""
        batch, self.queue.waiting[:] = list(self.queue.waiting), []
        for message in batch:
            try:
                self.use_cases.worker.handle_object_created(message[1])
            except PoisonMessage:
                continue
            except (Killed, Exception):
                self.receives[id(message)] += 1
                if self.receives[id(message)] >= MAX_RECEIVES:
                    self.dead_letters.append(message[1])
                else:
                    self.queue.waiting.append(message)

    def sweep(self) -> None:
        self.use_cases.sweeper.sweep()

    def settle(self, rounds: int = 8) -> None:
        """Redeliveries and sweeps, time passing between them, until nothing is left to do."""
        step = max(self.settings.queue_timeout_seconds, self.settings.lease_seconds) + 1
        for _ in range(rounds + self.busy_rounds):
            if self.busy_rounds:
                self.busy_rounds -= 1
                self.sweep()  # the queue is long: nothing is delivered, the sweeper runs
                self.clock.advance(step)
                continue
            self.deliver()
            self.sweep()
            self.deliver()
            if not self.queue.waiting and all(j.status.terminal for j in self.jobs.items.values()):
                break
            self.clock.advance(step)

    # -- what the invariants read ----------------------------------------------------------
    def renditions_of(self, job_id: str) -> set[str]:
        prefix = f"{self.settings.renditions_prefix}{job_id}/"
        return {k for k in self.objects.objects if k.startswith(prefix)}

    def live_keys(self):
        now = self.clock()
        return [r for r in self.jobs.idempotency.values() if now < r.expires_at]


# ---------------------------------------------------------------- the client


def retrying(world: World, call: Callable[[], Any], tries: int = 3):
    """A client: on no answer or a 503, wait and send the same request again."""
    for _ in range(tries):
        try:
            return call()
        except (Killed, Exception):
            world.clock.advance(world.settings.retry_after_seconds)
    return None


# ---------------------------------------------------------------- scenarios


@dataclass
class Scenario:
    """prepare (unarmed), then the step under test (armed), then the client's recovery."""

    name: str
    path: str  # upload | worker | sweeper | api
    prepare: Callable[[World], dict] = lambda w: {}
    step: Callable[[World, dict], Any] = lambda w, s: None
    recover: Callable[[World, dict], None] = lambda w, s: None
    # After everything settled, the client asks again with its key: (world, state) -> the
    # job ids that must end ready.
    final: Callable[[World, dict], list[str]] = lambda w, s: []
    expect_gone: bool = False  # the step removes its job (retention)
    # A job whose original is stored may end failed processing_failed only if it really ran
    # out of attempts.
    may_exhaust: bool = False


def _upload(world: World, key: Optional[str]):
    return world.use_cases.uploads.accept_upload("alice", IMAGE, key)


def _direct(world: World, key: Optional[str]):
    accepted = world.use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(IMAGE), key)
    if accepted.upload is not None:
        world.client_put(accepted.upload.fields["key"])
    return accepted


def _final_upload(world: World, state: dict) -> list[str]:
    accepted = retrying(world, lambda: _upload(world, "key-1"))
    world.settle()
    return [accepted.job.job_id] if accepted else ["<no answer>"]


def _final_direct(world: World, state: dict) -> list[str]:
    accepted = retrying(world, lambda: _direct(world, "key-2"))
    world.settle()
    return [accepted.job.job_id] if accepted else ["<no answer>"]


def _kill_put(world: World):
    """One upload whose Lambda died between creating the job and storing the original."""
    real = world.objects.put

    def killed(*args):
        raise Killed("timeout")

    world.objects.put = killed
    try:
        _upload(world, "key-1")
    except Killed:
        pass
    finally:
        world.objects.put = real


def _ready_job(world: World, key: Optional[str] = None) -> str:
    job = _upload(world, key).job
    world.deliver()
    return job.job_id


SCENARIOS = [
    Scenario("upload with key", "upload",
             step=lambda w, s: s.update(answer=_upload(w, "key-1")),
             recover=lambda w, s: s.get("answer") or retrying(w, lambda: _upload(w, "key-1")),
             final=_final_upload),
    Scenario("upload without key", "upload",
             step=lambda w, s: s.update(answer=_upload(w, None)),
             recover=lambda w, s: s.get("answer") or retrying(w, lambda: _upload(w, None))),
    Scenario("direct upload with key", "upload",
             step=lambda w, s: s.update(answer=_direct(w, "key-2")),
             recover=lambda w, s: s.get("answer") or retrying(w, lambda: _direct(w, "key-2")),
             final=_final_direct),
    Scenario("upload with key, fast worker", "upload",
             prepare=lambda w: _fast(w),
             step=lambda w, s: s.update(answer=_upload(w, "key-1")),
             recover=lambda w, s: s.get("answer") or retrying(w, lambda: _upload(w, "key-1")),
             final=_final_upload),
    Scenario("worker: uploaded image", "worker",
             prepare=lambda w: {"job": _upload(w, "key-1").job.job_id},
             step=lambda w, s: w.deliver(), final=_final_upload),
    Scenario("worker: direct upload", "worker",
             prepare=lambda w: {"job": _direct(w, "key-2").job.job_id},
             step=lambda w, s: w.deliver(), final=_final_direct),
    Scenario("sweeper: event lost, queued", "sweeper",
             prepare=lambda w: _lost_queued(w), step=lambda w, s: w.sweep(), final=_final_upload),
    Scenario("sweeper: worker died, lease over", "sweeper",
             prepare=lambda w: _stuck_processing(w), step=lambda w, s: w.sweep(), final=_final_upload),
    Scenario("worker: a stale attempt outlives its lease", "worker",
             prepare=lambda w: {"job": _upload(w, "key-1").job.job_id},
             step=lambda w, s: _stale_attempt(w), final=_final_upload),
    Scenario("sweeper: job behind a long backlog", "sweeper",
             prepare=lambda w: _behind_backlog(w), step=lambda w, s: w.sweep(), final=_final_upload),
    Scenario("sweeper: attempts exhausted", "sweeper",
             prepare=lambda w: _exhausted(w), step=lambda w, s: w.sweep(), may_exhaust=True),
    Scenario("sweeper: direct upload, notification lost", "sweeper",
             prepare=lambda w: _lost_direct(w), step=lambda w, s: w.sweep(), final=_final_direct),
    Scenario("sweeper: direct upload never came", "sweeper",
             prepare=lambda w: _never_uploaded(w), step=lambda w, s: w.sweep(), final=_final_direct),
    Scenario("sweeper: original never stored", "sweeper",
             prepare=lambda w: _never_stored(w), step=lambda w, s: w.sweep(), final=_final_upload),
    Scenario("sweeper: retention over", "sweeper",
             prepare=lambda w: _expired(w), step=lambda w, s: w.sweep(), expect_gone=True),
    Scenario("sweeper: orphans", "sweeper",
             prepare=lambda w: _orphans(w), step=lambda w, s: w.use_cases.orphan_scan.run()),
    Scenario("api: delete a ready job", "api",
             prepare=lambda w: {"job": _ready_job(w, "key-1")},
             step=lambda w, s: w.use_cases.manage.delete("alice", s["job"]),
             recover=lambda w, s: retrying(w, lambda: _delete_again(w, s["job"])),
             expect_gone=True),
    Scenario("api: cancel while processing", "api",
             prepare=lambda w: _stuck_processing(w, lose_message=False),
             step=lambda w, s: w.use_cases.manage.cancel("alice", s["job"]),
             recover=lambda w, s: retrying(w, lambda: w.use_cases.manage.cancel("alice", s["job"]))),
]


def _delete_again(world: World, job_id: str) -> None:
    from chalicelib.domain.errors import JobNotFound

    try:
        world.use_cases.manage.delete("alice", job_id)
    except JobNotFound:
        pass  # done by the first request


def _fast(w: World) -> dict:
    w.fast_worker = True
    return {}


def _behind_backlog(w: World) -> dict:
    """Older work fills the queue: this job's event waits three queue timeouts for its turn."""
    job = _upload(w, "key-1").job
    w.clock.advance(w.settings.queue_timeout_seconds + 1)
    w.busy_rounds = 3
    return {"job": job.job_id}


def _stale_attempt(w: World) -> None:
    """Attempt 1 has the bytes when its lease runs out; attempt 2 (the redelivery) writes its
    renditions; attempt 1 writes and loses its finish; then attempt 2 finishes. Each runs on
    its own thread, paused at those moments; a crash may end either of them anywhere."""
    (message,) = w.queue.waiting
    w.queue.waiting.clear()
    one_writes, two_finishes = _Pause(), _Pause()
    objects, jobs = w.objects, w.jobs
    put, finish = objects.put, jobs.finish_attempt

    def paused_put(key, data, content_type):
        if threading.current_thread().name == "attempt-1" and key.startswith(w.settings.renditions_prefix):
            one_writes.reach()
        return put(key, data, content_type)

    def paused_finish(job, attempt):
        if threading.current_thread().name == "attempt-2":
            two_finishes.reach()
        return finish(job, attempt)

    objects.put, jobs.finish_attempt = paused_put, paused_finish
    try:
        first = _Attempt(w, message, "attempt-1")
        one_writes.wait_for(first)
        w.clock.advance(w.settings.lease_seconds + 1)
        second = _Attempt(w, message, "attempt-2")
        two_finishes.wait_for(second)
        one_writes.release()
        first.join()
        two_finishes.release()
        second.join()
    finally:
        objects.put, jobs.finish_attempt = put, finish
        one_writes.release()
        two_finishes.release()
    if first.failed or second.failed:
        w.queue.waiting.append(message)  # the message was never acknowledged


class _Pause:
    def __init__(self):
        self.reached, self.go = threading.Event(), threading.Event()

    def reach(self):
        self.reached.set()
        self.go.wait(10)

    def wait_for(self, attempt: "_Attempt"):
        """Until the attempt reaches the pause, or ends (a crash) before it."""
        while not self.reached.wait(0.01):
            if not attempt.thread.is_alive():
                return

    def release(self):
        self.go.set()


class _Attempt:
    def __init__(self, world: World, message, name: str):
        self.failed = False

        def run():
            try:
                world.use_cases.worker.handle_object_created(message[1])
            except (Killed, Exception):
                self.failed = True

        self.thread = threading.Thread(target=run, name=name, daemon=True)
        self.thread.start()

    def join(self):
        self.thread.join(10)


def _event_delay(w: World) -> int:
    # getattr: the report also runs this harness on the code before issue 10, which had none.
    return getattr(w.settings, "event_delay_seconds", 0)


def _lost_queued(w: World) -> dict:
    job = _upload(w, "key-1").job
    w.queue.waiting.clear()  # delivered to a worker that never ran it
    w.clock.advance(w.settings.queue_timeout_seconds + _event_delay(w) + 1)
    return {"job": job.job_id}


def _stuck_processing(w: World, lose_message: bool = True) -> dict:
    job = _upload(w, "key-1").job
    if lose_message:
        w.queue.waiting.clear()
    w.jobs.claim(job.job_id, w.clock(), timedelta(seconds=w.settings.lease_seconds), w.settings.max_attempts)
    w.clock.advance(w.settings.lease_seconds + _event_delay(w) + 1)
    return {"job": job.job_id}


def _exhausted(w: World) -> dict:
    job = _upload(w, None).job
    w.queue.waiting.clear()
    for _ in range(w.settings.max_attempts):
        w.jobs.claim(job.job_id, w.clock(), timedelta(seconds=w.settings.lease_seconds), w.settings.max_attempts)
        w.clock.advance(w.settings.lease_seconds + 1)
    return {"job": job.job_id}


def _lost_direct(w: World) -> dict:
    job = _direct(w, "key-2").job
    w.queue.waiting.clear()
    w.clock.advance(w.settings.upload_url_ttl_seconds + w.use_cases.ctx.upload_grace.total_seconds() + 1)
    return {"job": job.job_id}


def _never_uploaded(w: World) -> dict:
    job = w.use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(IMAGE), "key-2").job
    w.clock.advance(w.settings.upload_url_ttl_seconds + w.use_cases.ctx.upload_grace.total_seconds() + 1)
    return {"job": job.job_id}


def _never_stored(w: World) -> dict:
    _kill_put(w)
    w.clock.advance(w.settings.queue_timeout_seconds + 1)
    return {}


def _expired(w: World) -> dict:
    job_id = _ready_job(w, "key-1")
    w.clock.advance(w.settings.retention_seconds + 1)
    return {"job": job_id}


def _orphans(w: World) -> dict:
    kept = _ready_job(w)
    ghost = "5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0"
    w.objects.put(f"{w.settings.originals_prefix}{ghost}", b"x", "image/jpeg")
    w.queue.waiting.clear()  # its notification: a job-less event the worker ignores anyway
    w.objects.put(f"{w.settings.renditions_prefix}{ghost}/1/display.jpg", b"x", "image/jpeg")
    w.clock.advance(w.settings.orphan_grace_seconds + 1)
    return {"job": kept}


# ---------------------------------------------------------------- running and checking


@dataclass
class Outcome:
    point: Optional[Point]
    step_failed: bool
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


def calls_of(scenario: Scenario, world_factory=World) -> list[str]:
    """The external calls the step makes when nothing fails."""
    injector = Injector()
    world = world_factory(injector)
    state = scenario.prepare(world)
    injector.armed = True
    scenario.step(world, state)
    injector.armed = False
    return injector.calls


def points_of(scenario: Scenario, world_factory=World, hows=HOWS) -> list[Point]:
    calls = calls_of(scenario, world_factory)
    points = [Point(i, call, when, how) for i, call in enumerate(calls) if not _inner_read(calls, i)
              for when in WHENS for how in hows]
    points += [Point(i, call, "after", "retried") for i, call in enumerate(calls) if call in CONDITIONAL_WRITES]
    return points


def _inner_read(calls: list[str], i: int) -> bool:
    """A sweep queries every shard of every status (390 queries). A crash anywhere inside a
    run of such reads leaves the same state as at its first or last one, so only those two
    are crash points."""
    return 0 < i < len(calls) - 1 and calls[i - 1] == calls[i] == calls[i + 1] == "jobs.due"


def run_point(scenario: Scenario, point: Optional[Point], world_factory=World) -> Outcome:
    injector = Injector(point)
    world = world_factory(injector)
    state = scenario.prepare(world)
    injector.armed = True
    failed = False
    try:
        scenario.step(world, state)
    except (Killed, Exception):
        failed = True
    injector.armed = False
    scenario.recover(world, state)
    world.settle()
    return Outcome(point, failed, check(world, scenario, state))


def check(world: World, scenario: Scenario, state: dict) -> list[str]:
    """The invariants of issue 10, in the order the world can be asked about them."""
    found: list[str] = []
    # 4. No key replays a doomed job: asked again, every key leads to a ready image.
    must_be_ready = scenario.final(world, state)
    for job_id in must_be_ready:
        job = world.jobs.items.get(job_id)
        if job is None or job.status is not JobStatus.READY:
            found.append(f"key replays {job_id[:8]} ({job.status.value if job else 'gone'}"
                         f"{' ' + job.error_code.value if job and job.error_code else ''})")
    for record in world.live_keys():
        job = world.jobs.items.get(record.job_id)
        if job is None:
            found.append(f"key held by a missing job {record.job_id[:8]}")
    # 1. Every accepted job reaches exactly one terminal status (and never leaves it).
    for job in world.jobs.items.values():
        if not job.status.terminal:
            found.append(f"job {job.job_id[:8]} stuck {job.status.value}")
    terminal_seen: dict[str, JobStatus] = {}
    for job_id, status in world.jobs.history:
        first = terminal_seen.get(job_id)
        if first is not None and status is not first:
            found.append(f"job {job_id[:8]} left {first.value} for {status.value}")
        elif first is None and status in TERMINAL:
            terminal_seen[job_id] = status
    if scenario.expect_gone and state.get("job") in world.jobs.items:
        found.append("removed job still there")
    # One key, one job that goes on: a retry never makes a second while the first may succeed.
    going_on = Counter(j.idempotency_scope for j in world.jobs.items.values()
                       if j.idempotency_scope and j.status is JobStatus.READY)
    for scope, count in going_on.items():
        if count > 1:
            found.append(f"key made {count} jobs that went on")
    # A job whose original is stored is processed, never failed for waiting or a lost event.
    for job in world.jobs.items.values():
        if (job.status is JobStatus.FAILED and job.original_key in world.objects.objects
                and job.error_code is not None and job.error_code.value in ("processing_failed", "upload_missing")
                and not scenario.may_exhaust):
            found.append(f"job {job.job_id[:8]} failed {job.error_code.value} with its original stored")
    # After the daily orphan scan (its grace period passed):
    world.clock.advance(world.settings.orphan_grace_seconds + 1)
    world.use_cases.orphan_scan.run()
    # 2. At most one set of renditions, and it matches the status.
    for job in world.jobs.items.values():
        present = world.renditions_of(job.job_id)
        if job.status is JobStatus.READY:
            wanted = {r.key for r in job.renditions.values()}
            if not wanted <= set(world.objects.objects):
                found.append(f"ready job {job.job_id[:8]} points at missing renditions")
            if present - wanted:
                found.append(f"ready job {job.job_id[:8]} has extra renditions")
        elif present:
            found.append(f"{job.status.value} job {job.job_id[:8]} has renditions")
    # 3. No object is left without a job.
    for key in world.objects.objects:
        job_id = world.use_cases.ctx.object_keys.job_id_of(key)
        if job_id is None or job_id not in world.jobs.items:
            found.append(f"object without a job: {key.split('/')[0]}/{(job_id or '?')[:8]}")
    return sorted(set(found))
