"""A representative subset of the crash points on moto's server: the real DynamoDB, S3 and
SQS adapters, storage's real notifications and SQS's redelivery; two of them are real
SIGKILLs of a child process. The service's clock is a test clock (leases and deadlines pass
without sleeping); everything else is real."""
from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from chalicelib.bootstrap import build_use_cases
from chalicelib.domain.jobs import JobStatus, due_shard
from chalicelib.usecases import UseCases
from chalicelib.usecases.context import new_job_id
from local.provision import provision
from local.services import aws_client
from tests.conftest import ROOT
from tests.crash.harness import Injector, Killed, Point, image_of, retrying
from tests.fakes import Clock, fake_context


@pytest.fixture(scope="module")
def moto_stack(moto_endpoint):
    """One stack for the module; every test's jobs have their own ids and keys."""
    import uuid

    from chalicelib.config import Settings

    suffix = uuid.uuid4().hex[:10]
    settings = Settings(endpoint_url=moto_endpoint, bucket=f"crash-{suffix}", table=f"crash-{suffix}",
                        events_queue_name=f"crash-{suffix}", event_delay_seconds=0, sweep_threads=1,
                        orphan_scan_threads=1)
    clients = {n: aws_client(n, settings.region, settings.endpoint_url) for n in ("sqs", "s3", "dynamodb")}
    # A 1 s visibility timeout: a killed worker's message comes back at once.
    stack = provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"], visibility_timeout=1)
    return settings, stack, clients, build_use_cases(settings).ctx


class _DueInShards:
    """The real jobs adapter, whose sweep queries go to moto for the shards of this world's
    jobs only (`shards`, set before each sweep): the others hold none of its jobs, and moto
    answers each query by reading every item of the module's table (a sweep is 448 queries,
    each settle round one sweep). The sweeper still asks for every shard, in its own order,
    and the injector still counts every call; tests/unit/test_sweeper_semantics.py and
    tests/crash/test_crash_points.py sweep every shard, and tests/integration/test_sweeper.py
    every shard on moto."""

    def __init__(self, jobs, shards: set[int]):
        self._jobs, self._shards = jobs, shards

    def due(self, status: JobStatus, now: datetime, limit: int, *, shard: int) -> list:
        return self._jobs.due(status, now, limit, shard=shard) if shard in self._shards else []

    def __getattr__(self, name: str):
        return getattr(self._jobs, name)


class MotoWorld:
    """The harness's world on moto: same steps (deliver, sweep, settle), real services."""

    def __init__(self, injector: Injector, moto_stack):
        self.settings, self.stack, self.clients, real = moto_stack
        self.injector = injector
        self.clock = Clock(datetime.now(timezone.utc))
        self.ids: list[str] = []
        self._shards: set[int] = set()
        self.use_cases = UseCases(fake_context(
            settings=self.settings, clock=self.clock, new_id=self._new_id,
            jobs=injector.wrap("jobs", _DueInShards(real.jobs, self._shards)),
            objects=injector.wrap("objects", real.objects),
            publisher=injector.wrap("queue", real.publisher), backlog=injector.wrap("queue", real.backlog)))
        self.store = real.jobs

    def _new_id(self) -> str:
        job_id = new_job_id()
        self.ids.append(job_id)
        return job_id

    def messages(self, wait: int = 0) -> list[dict]:
        return self.clients["sqs"].receive_message(QueueUrl=self.stack.queue_url, MaxNumberOfMessages=10,
                                                   WaitTimeSeconds=wait).get("Messages", [])

    def deliver(self, wait: int = 0) -> None:
        """Each message once: acknowledged after success, shown again at once after a failure."""
        sqs = self.clients["sqs"]
        for message in self.messages(wait):
            try:
                self.use_cases.worker.process_storage_message(message["Body"])
            except (Killed, Exception):
                sqs.change_message_visibility(QueueUrl=self.stack.queue_url,
                                              ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
            else:
                sqs.delete_message(QueueUrl=self.stack.queue_url, ReceiptHandle=message["ReceiptHandle"])

    def lose_messages(self) -> None:
        for message in self.messages():
            self.clients["sqs"].delete_message(QueueUrl=self.stack.queue_url,
                                               ReceiptHandle=message["ReceiptHandle"])

    def sweep(self) -> None:
        self._shards.clear()
        self._shards.update(due_shard(job_id) for job_id in self.known_ids())
        self.use_cases.sweeper.sweep()

    def jobs(self) -> dict:
        return {job_id: self.store.get(job_id) for job_id in self.known_ids()}

    def known_ids(self) -> set[str]:
        listed = self.clients["s3"].list_objects_v2(Bucket=self.settings.bucket).get("Contents", [])
        from_objects = {self.use_cases.ctx.object_keys.job_id_of(o["Key"]) for o in listed}
        return {i for i in {*self.ids, *from_objects} if i is not None}

    def queued_messages(self) -> int:
        """Waiting and in flight; read without receiving, which would hide them."""
        attributes = self.clients["sqs"].get_queue_attributes(
            QueueUrl=self.stack.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])
        return sum(int(v) for v in attributes["Attributes"].values())

    def settle(self, rounds: int = 6) -> None:
        step = max(self.settings.queue_timeout_seconds, self.settings.lease_seconds) + 1
        for _ in range(rounds):
            self.deliver()
            self.sweep()
            self.deliver()
            if all(j is None or j.status.terminal for j in self.jobs().values()):
                if not self.queued_messages():
                    return
                self.deliver(wait=2)  # a message in flight comes back after its visibility timeout
                continue
            self.clock.advance(step)

    def objects(self, job_id: str, prefix: str) -> set[str]:
        listed = self.clients["s3"].list_objects_v2(Bucket=self.settings.bucket,
                                                    Prefix=f"{prefix}{job_id}").get("Contents", [])
        return {o["Key"] for o in listed}


def check(world: MotoWorld, key: str) -> list[str]:
    found = []
    final = retrying(world, lambda: world.use_cases.uploads.accept_upload("alice", image_of(key), key))
    world.settle()
    if final is None or world.store.get(final.job.job_id).status is not JobStatus.READY:
        found.append("4: the key does not lead to a ready image")
    jobs = world.jobs()
    ready_per_key = {}
    for job_id, job in jobs.items():
        if job is None:
            continue
        if not job.status.terminal:
            found.append(f"1: {job_id[:8]} stuck {job.status.value}")
        if job.status is JobStatus.READY and job.idempotency_scope:
            ready_per_key[job.idempotency_scope] = ready_per_key.get(job.idempotency_scope, 0) + 1
    if any(n > 1 for n in ready_per_key.values()):
        found.append("4: one key made two jobs that went on")
    world.clock.advance(world.settings.orphan_grace_seconds + 1)
    world.use_cases.orphan_scan.run()
    for job_id, job in jobs.items():
        renditions = world.objects(job_id, world.settings.renditions_prefix)
        if job is not None and job.status is JobStatus.READY:
            if renditions != {r.key for r in job.renditions.values()}:
                found.append(f"2: {job_id[:8]} ready with {sorted(renditions)}")
        elif renditions:
            found.append(f"2: {job_id[:8]} {job.status.value if job else 'gone'} keeps renditions")
        if job is None and world.objects(job_id, world.settings.originals_prefix):
            found.append(f"3: {job_id[:8]} original without a job")
    return found


CASES = [  # (path, call, nth, when, how): the calls whose failure each issue item is about
    ("upload", "jobs.create_with_key", 0, "after", "kill"),   # job and key, no original
    ("upload", "objects.put", 0, "before", "kill"),
    ("upload", "objects.put", 0, "after", "error"),           # the ambiguous put
    ("worker", "objects.put", 1, "after", "kill"),            # renditions written, not finished
    ("worker", "jobs.finish_attempt", 0, "after", "error"),
    ("sweeper", "queue.publish_object_created", 0, "after", "kill"),  # re-sent, not marked
    ("sweeper", "queue.publish_object_created", 0, "before", "error"),
]


def _steps(key: str):
    def prepare(world):
        if world.path == "upload":
            return
        world.use_cases.uploads.accept_upload("alice", image_of(key), key)
        if world.path == "sweeper":
            world.lose_messages()  # the notification was lost
            world.clock.advance(world.settings.queue_timeout_seconds + 1)

    def step(world):
        if world.path == "upload":
            world.use_cases.uploads.accept_upload("alice", image_of(key), key)
        elif world.path == "worker":
            world.deliver()
        else:
            world.sweep()

    return prepare, step


@pytest.mark.parametrize("path, call, nth, when, how", CASES, ids=[" ".join(map(str, c)) for c in CASES])
def test_a_crash_on_moto_leaves_the_invariants_holding(moto_stack, path, call, nth, when, how):
    key = f"moto-{path}-{call}-{nth}-{when}-{how}"
    prepare, step = _steps(key)

    def factory(injector):
        world = MotoWorld(injector, moto_stack)
        world.path = path
        return world

    injector = Injector(Point(-1, call, when, how, nth=nth))
    world = factory(injector)
    prepare(world)
    injector.armed = True
    try:
        step(world)
    except (Killed, Exception):
        pass
    injector.armed = False
    assert injector.fired, "the crash point was never reached"
    if path == "upload":
        retrying(world, lambda: world.use_cases.uploads.accept_upload("alice", image_of(key), key))
    world.settle()
    assert check(world, key) == []


def _child(moto_stack, step: str, call: str, nth: int, when: str, key: str) -> subprocess.CompletedProcess:
    settings = moto_stack[0]
    env = dict(os.environ, AWS_ENDPOINT_URL=settings.endpoint_url, IMAGES_BUCKET=settings.bucket,
               JOBS_TABLE=settings.table, EVENTS_QUEUE=settings.events_queue_name, LOCAL_RUNNER="1",
               CRASH_IDEMPOTENCY_KEY=key)
    return subprocess.run([sys.executable, "-m", "tests.crash.kill_child", step, call, str(nth), when],
                          cwd=ROOT, env=env, capture_output=True, timeout=120)


def test_an_upload_killed_after_storing_the_original_is_finished_by_the_retry(moto_stack):
    world = MotoWorld(Injector(), moto_stack)
    done = _child(moto_stack, "upload", "objects.put", 0, "after", "sigkill-upload")
    assert done.returncode == -9, done.stderr.decode()[-2000:]
    replay = world.use_cases.uploads.accept_upload("alice", image_of("sigkill-upload"), "sigkill-upload")
    assert replay.replayed  # the key held the killed request's job ...
    world.ids.append(replay.job.job_id)
    world.settle()
    assert world.store.get(replay.job.job_id).status is JobStatus.READY  # ... and it went on
    assert check(world, "sigkill-upload") == []


def test_a_worker_killed_between_its_renditions_and_its_finish_is_redelivered(moto_stack):
    world = MotoWorld(Injector(), moto_stack)
    job = world.use_cases.uploads.accept_upload("alice", image_of("sigkill-worker"), "sigkill-worker").job
    done = _child(moto_stack, "worker", "objects.put", 1, "after", "sigkill-worker")
    assert done.returncode == -9, done.stderr.decode()[-2000:]
    stale = world.store.get(job.job_id)
    assert stale.status is JobStatus.PROCESSING and stale.attempt == 1
    assert len(world.objects(job.job_id, world.settings.renditions_prefix)) == 2  # attempt 1's
    world.clock.advance(world.settings.lease_seconds + 1)  # the killed attempt's lease runs out
    world.deliver(wait=2)  # its message, back after the 1 s visibility timeout
    world.settle()
    finished = world.store.get(job.job_id)
    assert finished.status is JobStatus.READY and finished.attempt == 2
    assert check(world, "sigkill-worker") == []
