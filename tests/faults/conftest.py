"""Real processes, a real RabbitMQ, moto's server: the harness for the fault tests.

Each test gets its own bucket, table, queues and AMQP names, a shortened lease and
visibility timeout, and starts worker (and bridge) processes with `python -m local`, the
same entry point users run. `World.assert_promise` is the promise to users: every accepted
job terminal, exactly one set of renditions per ready job, nothing in a dead-letter queue
that should have succeeded.
"""
from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import time
import uuid

import pika
import pytest
from PIL import Image

from chalicelib.adapters.amqp import Topology, declare
from chalicelib.bootstrap import build_use_cases
from chalicelib.domain.events import ObjectCreated, aws_event, minio_event
from chalicelib.domain.jobs import JobStatus
from chalicelib.domain.renditions import RenditionName
from local.provision import provision
from local.services import aws_client
from tests.images import unique
from tests.conftest import AMQP_URL, rabbit_up, wait_for_broker  # noqa: F401 (used by the fault tests)
from tests.faults.broker import own_broker  # noqa: F401 (a fixture of the fault tests)
from tests.local_runner import Proc, start_local

# The renditions every upload gets when it names none (the contract: a 512 px thumbnail too).
DEFAULT_RENDITIONS = ("display", "thumb", "thumb_512")

def photo(width=640, height=480, color=(200, 30, 30), fmt="JPEG") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, fmt)
    return out.getvalue()


class World:
    """rgw: a started local.rgw.RgwCluster as storage, notifying RabbitMQ at `rgw_amqp_url`
    itself (no bridge; its own event shape); moto keeps the table and the webhook queue."""

    def __init__(self, backend: str, moto_endpoint: str, rgw=None, rgw_amqp_url: str | None = None,
                 amqp_url: str = AMQP_URL, **overrides):
        suffix = uuid.uuid4().hex[:10]
        rgw_amqp_url = rgw_amqp_url or amqp_url
        self.amqp_url = amqp_url
        self.rgw = rgw
        self.backend = backend
        self.env = {
            "AWS_ENDPOINT_URL": moto_endpoint, "EMBEDDED_AWS": "0",
            "IMAGES_BUCKET": f"images-{suffix}", "JOBS_TABLE": f"jobs-{suffix}",
            "EVENTS_QUEUE": f"events-{suffix}", "QUEUE_BACKEND": backend,
            "AMQP_URL": amqp_url, "AMQP_EXCHANGE": f"x-{suffix}", "AMQP_QUEUE": f"q-{suffix}",
            "AMQP_ROUTING_KEY": f"k-{suffix}", "AMQP_BRIDGE": "1",
            # A killed worker's job is claimed again once its lease ends, and the lease must
            # outlast the worker's timeout (Settings refuses anything else). Not shorter than
            # the API's 25 s: the SDK's timeouts follow the shortest function, and a loaded
            # machine's moto needs the production ones.
            "WORKER_TIMEOUT_SECONDS": "25", "LEASE_SECONDS": "26", "LOCAL_RUNNER": "1",
            # RabbitMQ's counts are exact: a message missing for a second is lost.
            "EVENT_DELAY_SECONDS": "1",
            "MAX_ATTEMPTS": "3", "MAX_UPLOAD_BYTES": str(8 * 1024 * 1024),
            "PYTHONUNBUFFERED": "1",
        }
        if rgw is not None:
            self.env.update(S3_ENDPOINT_URL=rgw.endpoint, AMQP_EVENT_SHAPE="ceph", AMQP_BRIDGE="0")
        self.env.update({k: str(v) for k, v in overrides.items()})
        from chalicelib.config import Settings

        self.settings = Settings.from_environ(self.env)
        clients = {n: aws_client(n, self.settings.region, moto_endpoint) for n in ("sqs", "s3", "dynamodb")}
        self.clients = clients
        self.service = build_use_cases(self.settings)
        self.topology = Topology.from_settings(self.settings)
        self.procs: list[Proc] = []
        if backend == "amqp":
            with self.amqp() as channel:
                declare(channel, self.topology)
        if rgw is not None:
            import dataclasses

            from local.provision import provision_rgw

            clients["s3"], sns = (aws_client(n, self.settings.region, rgw.endpoint) for n in ("s3", "sns"))
            gateway_side = dataclasses.replace(self.settings, amqp_url=rgw_amqp_url)
            self.stack = provision_rgw(gateway_side, clients["sqs"], clients["s3"], sns,
                                       clients["dynamodb"], persistent=False)
        else:
            # A short visibility timeout: a killed SQS worker's message comes back in seconds.
            self.stack = provision(self.settings, clients["sqs"], clients["s3"], clients["dynamodb"],
                                   visibility_timeout=3)

    # -- processes -------------------------------------------------------------------------------
    def start(self, components: str, **env) -> Proc:
        full = dict(os.environ, **self.env, LOCAL_COMPONENTS=components, **{k: str(v) for k, v in env.items()})
        proc = start_local(full, f"`python -m local` ({components})", timeout=60)
        self.procs.append(proc)
        return proc

    def workers(self, count: int = 1, concurrency: int = 1, **env) -> list[Proc]:
        """Worker processes (`env`: more of the runner's settings), and for amqp the bridge
        standing in for MinIO's notifications."""
        if self.backend == "amqp" and self.rgw is None and not any(
                "bridge" in " ".join(p.process.args) for p in self.procs):
            self.start("bridge")
        return [self.start("worker", WORKER_CONCURRENCY=concurrency, **env) for _ in range(count)]

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.alive():
                proc.process.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.process.wait(30)
            except subprocess.TimeoutExpired:
                proc.process.kill()

    # -- jobs --------------------------------------------------------------------------------------
    def upload(self, count: int = 1, data: bytes | None = None) -> list[str]:
        """Each upload in bytes of its own, so that each is processed, never copied from
        another as its duplicate."""
        data = data or photo()
        return [self.service.uploads.accept_upload("alice", unique(data, uuid.uuid4().hex)).job.job_id
                for _ in range(count)]

    def deliver_again(self, job_id: str, times: int) -> None:
        """The same object-created event, delivered again (at-least-once delivery)."""
        key = self.service.ctx.object_keys.original(job_id)
        if self.backend == "sqs":
            import json

            for _ in range(times):
                self.clients["sqs"].send_message(
                    QueueUrl=self.stack.queue_url,
                    MessageBody=json.dumps(aws_event(ObjectCreated(self.settings.bucket, key, 0))))
        else:
            self.publish_raw(*[__import__("json").dumps(minio_event(ObjectCreated(self.settings.bucket, key, 0))).encode()
                               for _ in range(times)])

    def publish_raw(self, *bodies: bytes) -> None:
        with self.amqp() as channel:
            channel.confirm_delivery()
            for body in bodies:
                channel.basic_publish(self.topology.exchange, self.topology.routing_key, body,
                                      pika.BasicProperties(delivery_mode=2), mandatory=True)

    def statuses(self, job_ids) -> dict[str, JobStatus]:
        return {j: self.service.ctx.jobs.get(j).status for j in job_ids}

    def wait_terminal(self, job_ids, timeout: float = 60) -> dict[str, JobStatus]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            statuses = self.statuses(job_ids)
            if all(s.terminal for s in statuses.values()):
                return statuses
            time.sleep(0.2)
        stuck = {j: s.value for j, s in self.statuses(job_ids).items() if not s.terminal}
        logs = "\n".join(p.text()[-3000:] for p in self.procs)
        pytest.fail(f"{len(stuck)} job(s) not terminal after {timeout}s: {stuck}\n{logs}")

    def renditions(self, job_id: str) -> list[str]:
        prefix = f"{self.settings.renditions_prefix}{job_id}/"
        listed = self.clients["s3"].list_objects_v2(Bucket=self.settings.bucket, Prefix=prefix)
        return sorted(o["Key"][len(prefix):] for o in listed.get("Contents", []))

    def dead_letters(self) -> list[bytes]:
        bodies = []
        if self.backend == "sqs":
            for m in self.clients["sqs"].receive_message(QueueUrl=self.stack.dead_letter_url, MaxNumberOfMessages=10,
                                                         WaitTimeSeconds=0).get("Messages", []):
                bodies.append(m["Body"].encode())
        else:
            with self.amqp() as channel:
                while True:
                    method, _, body = channel.basic_get(self.topology.dead_letter_queue, auto_ack=False)
                    if method is None:
                        break
                    bodies.append(body)
        return bodies

    def _ended(self, job_id, status):
        job = self.service.ctx.jobs.get(job_id)
        return (job_id, status, getattr(job, "error_code", None), getattr(job, "attempt", None),
                getattr(job, "resends", None), job)

    def assert_promise(self, job_ids, expected: JobStatus | None = JobStatus.READY, timeout: float = 60):
        statuses = self.wait_terminal(job_ids, timeout)
        for job_id, status in statuses.items():
            if expected is not None:
                # The message (read only on a failure) leads with what ended the job: pytest
                # cuts a long repr.
                assert status is expected, self._ended(job_id, status)
            if status is JobStatus.READY:
                # Exactly the finishing attempt's pair: no other attempt's leftovers.
                job = self.service.ctx.jobs.get(job_id)
                assert self.renditions(job_id) == [f"{job.attempt}/{name}.jpg" for name in DEFAULT_RENDITIONS], job_id
                assert job.renditions[RenditionName.DISPLAY].key.endswith(f"/{job.attempt}/display.jpg")
                assert job.renditions[RenditionName.THUMB].key.endswith(f"/{job.attempt}/thumb.jpg")
            else:
                assert self.renditions(job_id) == [], job_id
        return statuses

    def amqp(self):
        connection = pika.BlockingConnection(pika.URLParameters(self.amqp_url))
        channel = connection.channel()

        class Ctx:
            def __enter__(self_inner):
                return channel

            def __exit__(self_inner, *exc):
                connection.close()

        return Ctx()

    def cleanup_amqp(self) -> None:
        if self.backend != "amqp":
            return
        try:
            with self.amqp() as channel:
                channel.queue_delete(self.topology.queue)
                channel.queue_delete(self.topology.dead_letter_queue)
                channel.exchange_delete(self.topology.exchange)
                channel.exchange_delete(self.topology.dead_letter_exchange)
        except Exception:
            pass


@pytest.fixture
def world_factory(moto_endpoint, rabbitmq):
    made: list[World] = []

    def make(backend: str, **overrides) -> World:
        world = World(backend, moto_endpoint, **overrides)
        made.append(world)
        return world

    yield make
    for world in made:
        world.stop_all()
        world.cleanup_amqp()


@pytest.fixture(params=["sqs", "amqp"])
def world(request, world_factory):
    return world_factory(request.param)


@pytest.fixture
def amqp_world(world_factory):
    return world_factory("amqp")
