"""A hypothesis model of concurrent workers, sweepers, uploads, cancels and deletes,
interleaved one external call at a time, with crashes and time passing: on the fake stores,
and with the job store on DynamoDB (moto's server), where the claim rule is the table's
conditional write rather than the fake's reading of Job.claimable.

Each operation runs on its own thread and stops before every call it makes to a store or
the queue; hypothesis picks which one goes next, which one dies where it stands, and when the
clock moves. After every step, what must hold at every moment holds; at the end the world
settles (retries, redeliveries, sweeps) and the four invariants of the crash harness hold.
"""
from __future__ import annotations

import dataclasses
import threading
import uuid
from typing import Any, Callable, Optional

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from chalicelib.adapters.dynamo_jobs import IDEMPOTENCY_PREFIX, JOB_PREFIX, DynamoJobStore
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.domain.jobs import Job, JobStatus
from chalicelib.domain.renditions import RenditionName
from chalicelib.domain.idempotency import IdempotencyRecord
from tests.crash.harness import IMAGE, Killed, Recording, Scenario, World, check, default_settings, retrying

KEYS = ("key-a", "key-b")
WAIT = 10  # seconds a step may take before the model calls it a hang


class Actor:
    """One operation on its own thread, paused before each external call."""

    def __init__(self, name: str, work: Callable[[], Any]):
        self.name = name
        self.allowed = threading.Semaphore(0)
        self.stopped = threading.Event()  # paused before a call, or finished
        self.finished = threading.Event()
        self.kill = False
        self.thread = threading.Thread(target=self._run, args=(work,), name=name, daemon=True)

    def _run(self, work):
        try:
            work()
        except (Killed, Exception):
            pass  # a failed or killed operation is part of the model
        finally:
            self.finished.set()
            self.stopped.set()

    def start(self) -> None:
        self.thread.start()
        self._wait()

    def pause(self) -> None:
        """Called on the actor's thread before a call: wait for a step (or the kill)."""
        self.stopped.set()
        self.allowed.acquire()
        if self.kill:
            raise Killed(self.name)

    def step(self, kill: bool = False) -> None:
        self.kill = kill
        self.stopped.clear()
        self.allowed.release()
        self._wait()

    def _wait(self) -> None:
        assert self.stopped.wait(WAIT), f"{self.name} hangs"


class Gate:
    """The ports' wrapper (the harness's Injector interface): calls from an actor's thread
    wait for their step; calls from the test's own thread go straight through."""

    def __init__(self):
        self.actors: dict[str, Actor] = {}

    def wrap(self, name: str, target: Any) -> Any:
        from tests.crash.harness import _Proxy

        return _Proxy(self, name, target)

    def run(self, name: str, call: Callable[[], Any]) -> Any:
        actor = self.actors.get(threading.current_thread().name)
        if actor is not None:
            actor.pause()
        return call()


class Concurrency(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.gate = Gate()
        self.world = World(self.gate, jobs=self.make_jobs())
        self.count = 0
        self.deleting: set[str] = set()

    def make_jobs(self) -> Optional[Recording]:
        """The recording job store this run uses; None: the fake."""
        return None

    # -- starting operations -----------------------------------------------------------------
    def _start(self, kind: str, work: Callable[[], Any]) -> None:
        self.count += 1
        actor = Actor(f"{kind}-{self.count}", work)
        self.gate.actors[actor.name] = actor
        actor.start()

    def _running(self) -> list[Actor]:
        return [a for a in self.gate.actors.values() if not a.finished.is_set()]

    @rule(key=st.sampled_from(KEYS))
    def upload(self, key):
        self._start("upload", lambda: self.world.use_cases.uploads.accept_upload("alice", IMAGE, key))

    @precondition(lambda self: self.world.queue.waiting)
    @rule(data=st.data())
    def worker_takes_a_message(self, data):
        waiting = self.world.queue.waiting
        message = waiting.pop(data.draw(st.integers(0, len(waiting) - 1)))

        def work():
            try:
                self.world.use_cases.worker.handle_object_created(message[1])
            except BaseException:
                waiting.append(message)  # not acknowledged: the queue shows it again
                raise

        self._start("worker", work)

    @rule()
    def sweeper(self):
        self._start("sweeper", self.world.use_cases.sweeper.sweep)

    @precondition(lambda self: self.world.jobs.items)
    @rule(data=st.data(), delete=st.booleans())
    def client_cancels_or_deletes(self, data, delete):
        job_id = data.draw(st.sampled_from(sorted(self.world.jobs.items)))
        manage = self.world.use_cases.manage
        if delete:
            self.deleting.add(job_id)
            self._start("delete", lambda: manage.delete("alice", job_id))
        else:
            self._start("cancel", lambda: manage.cancel("alice", job_id))

    # -- interleaving, crashes, time -----------------------------------------------------------
    @precondition(lambda self: self._running())
    @rule(data=st.data(), dice=st.integers(0, 5))
    def step(self, data, dice):
        actor = data.draw(st.sampled_from(self._running()))
        actor.step(kill=dice == 0)  # a kill is rarer than a step: most operations get somewhere

    @rule(seconds=st.sampled_from([1, 61, 121, 601, 901]))
    def time_passes(self, seconds):
        self.world.clock.advance(seconds)

    # -- what holds at every moment ------------------------------------------------------------
    @invariant()
    def a_terminal_status_is_never_left(self):
        first: dict[str, JobStatus] = {}
        for job_id, status in self.world.jobs.history:
            if job_id in first:
                assert status is first[job_id], (job_id, first[job_id], status)
            elif status.terminal:
                first[job_id] = status

    @invariant()
    def sequence_and_attempt_never_fall(self):
        """Push clients drop a message older than one they have (Job.sequence): a write that
        brought an older attempt back would hide the job's last state from them."""
        last: dict[str, tuple[int, int]] = {}
        for job_id, attempt, sequence in self.world.jobs.steps:
            before = last.get(job_id, (0, 0))
            assert attempt >= before[0] and sequence >= before[1], (job_id, before, (attempt, sequence))
            last[job_id] = (attempt, sequence)

    @invariant()
    def a_ready_job_points_at_renditions_that_exist(self):
        for job in list(self.world.jobs.items.values()):
            if job.status is JobStatus.READY and job.job_id not in self.deleting:
                for key in (job.renditions[RenditionName.DISPLAY].key, job.renditions[RenditionName.THUMB].key):
                    assert key in self.world.objects.objects, (job.job_id, key)

    @invariant()
    def one_key_never_has_two_jobs_that_went_on(self):
        scopes = [j.idempotency_scope for j in self.world.jobs.items.values()
                  if j.idempotency_scope and j.status is JobStatus.READY]
        assert len(scopes) == len(set(scopes)), scopes

    # -- the end: every operation finishes, the world settles, the invariants hold -----------
    def teardown(self):
        try:
            for actor in list(self.gate.actors.values()):
                while not actor.finished.is_set():
                    actor.step()
            for actor in self.gate.actors.values():
                actor.thread.join(WAIT)
            self.gate.actors.clear()  # from here on, calls go straight through
            # Clients whose request failed try again with the same key, as the contract says.
            for key in KEYS:
                retrying(self.world, lambda: self.world.use_cases.uploads.accept_upload("alice", IMAGE, key))
            self.world.settle()
            final = Scenario("model", "model", final=_ready_by_key)
            violations = check(self.world, final, {})
            assert violations == [], violations
        finally:
            for actor in self.gate.actors.values():
                actor.kill = True
                actor.allowed.release()


def _ready_by_key(world: World, state: dict) -> list[str]:
    """Asked again, each key gives an image that ends ready, unless the client itself
    cancelled or deleted the job the key names (then it is the client's own answer)."""
    ids = []
    for key in KEYS:
        accepted = retrying(world, lambda: world.use_cases.uploads.accept_upload("alice", IMAGE, key))
        world.settle()
        job = world.jobs.items.get(accepted.job.job_id) if accepted else None
        if job is None or job.status is not JobStatus.CANCELLED:
            ids.append(accepted.job.job_id if accepted else "<no answer>")
    return ids



Concurrency.TestCase.settings = settings(
    # Modest, for CI time (about 15 s here); raise max_examples to search harder locally.
    max_examples=100, stateful_step_count=40, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestConcurrency = Concurrency.TestCase


class RecordingDynamoJobStore(Recording, DynamoJobStore):
    """DynamoDB's job store, read whole for the checks as the fake's dicts are."""

    @property
    def items(self) -> dict[str, Job]:
        jobs = (self._to_job(item) for item in self._model.scan(
            self._model.pk.startswith(JOB_PREFIX), consistent_read=True))
        return {job.job_id: job for job in jobs}

    @property
    def idempotency(self) -> dict[str, IdempotencyRecord]:
        records = (IdempotencyRecord(scope=item.pk[len(IDEMPOTENCY_PREFIX):], fingerprint=item.fingerprint,
                                     job_id=item.job_id, expires_at=item.expires_at)
                   for item in self._idempotency.scan(self._idempotency.pk.startswith(IDEMPOTENCY_PREFIX),
                                                      consistent_read=True))
        return {record.scope: record for record in records}


def test_the_model_holds_with_the_job_store_on_dynamodb(moto_endpoint, monkeypatch):
    from chalicelib.domain import jobs
    from chalicelib.usecases import sweeper
    from local.provision import provision
    from local.services import aws_client

    # A sweep queries every shard of every status, each query a round trip to moto's server
    # (384 of them took 6-20 s here). The shard count only spreads the index's writes; the
    # writes and the sweeper both read it, so fewer shards keep them consistent.
    for module in (jobs, sweeper):
        monkeypatch.setattr(module, "DUE_SHARDS", 2)

    region = default_settings().region
    s3, dynamodb = (aws_client(name, region, moto_endpoint) for name in ("s3", "dynamodb"))

    class OnDynamo(Concurrency):
        def make_jobs(self):
            # A table per example, from the template: nothing carries over between examples.
            name = f"model-{uuid.uuid4().hex[:10]}"
            provision(dataclasses.replace(default_settings(), endpoint_url=moto_endpoint, table=name, bucket=name),
                      None, s3, dynamodb, sqs_notifications=False)
            return RecordingDynamoJobStore(DynamoTable(name, region, moto_endpoint))

    run_state_machine_as_test(OnDynamo, settings=settings(
        # Every store call is a round trip to moto's server: kept small; the fake run above
        # searches wider.
        max_examples=3, stateful_step_count=20, deadline=None, database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    ))
