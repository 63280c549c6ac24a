"""`python -m local` started as a user starts it, for the tests that need whole processes."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port

READY = "image-jobs ready"


@dataclass
class Proc:
    process: subprocess.Popen
    output: list[str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(self.output)

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 30) -> bool:
        """SIGTERM, then SIGKILL after `timeout`; True if it stopped on SIGTERM."""
        if not self.alive():
            return True
        self.process.terminate()
        try:
            self.process.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return False


def start_local(env: dict[str, str], what: str = "python -m local", timeout: float = 120,
                own_group: bool = False) -> Proc:
    """Start the runner with exactly `env` and wait for its ready line; fail loudly if it
    exits or stays silent. Its output is kept (and the pipe drained) for the test to read.
    own_group: in a process group of its own, as a terminal or a supervisor starts it."""
    # Each runner keeps its log apart: the default, .local/runner.log, is the user's; and its
    # ports: the defaults (8001, 8002, 8080) would clash with a runner beside it.
    env = {"LOG_FILE": str(Path(tempfile.mkdtemp(prefix="image-jobs-run-")) / "runner.log"),
           "WEB_PORT": str(free_port()), **push_ports(), **env}
    process = subprocess.Popen([sys.executable, "-m", "local"], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               process_group=0 if own_group else None)
    proc = Proc(process)
    ready = threading.Event()

    def pump():
        for line in process.stdout:
            proc.output.append(line)
            if READY in line:
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not ready.wait(0.1):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"{what} did not become ready:\n{proc.text()[-4000:]}")
    return proc


def push_ports() -> dict[str, str]:
    """Free ports for the runner's push gateway, so that runners side by side never share one."""
    return {"PUSH_PORT": str(free_port()), "PUSH_MANAGEMENT_PORT": str(free_port())}


@contextlib.contextmanager
def dedicated_runner(aws_port: int | None = None, **env: str):
    """A whole `python -m local` of its own on the embedded stack (free ports), for settings
    the shared session runner must not have; yields its API's base URL."""
    api_port = free_port()
    full = dict(os.environ, API_PORT=str(api_port), AWS_PORT=str(aws_port or free_port()),
                EMBEDDED_AWS="1", PYTHONUNBUFFERED="1", **push_ports(), **env)
    full.pop("AWS_ENDPOINT_URL", None)
    proc = start_local(full)
    try:
        yield f"http://127.0.0.1:{api_port}"
    finally:
        proc.stop()


@dataclass(frozen=True)
class ApiAt:
    """What the e2e helpers (poll, say) need of a runner: its API's base URL."""

    api: str


@dataclass
class Runner:
    api: str
    aws: str
    web: str  # the page (web/), served by the runner with a dev token
    output: list[str]
    backend: str = "embedded"  # or "localstack", or "rgw" (Ceph's RADOS Gateway as storage)
    s3: str = ""  # the storage's endpoint: `aws` but on rgw
    env: dict[str, str] = field(default_factory=dict)  # the runner's environment

    def __post_init__(self):
        self.s3 = self.s3 or self.aws

    def logged(self) -> list[dict]:
        """The JSON lines of the run's log file so far. Unlike `output` (the process's merged
        stdout and stderr, where a library's write to stderr can land inside a line), the file
        holds only whole lines, each written under one lock (local/runlog.py)."""
        import json

        with open(self.env["LOG_FILE"], encoding="utf-8") as log:
            return [json.loads(line) for line in log if line.startswith("{") and line.endswith("\n")]

    @property
    def strict(self) -> bool:
        """Storage checks signatures, expiry and POST policies (moto checks none of them)."""
        return self.backend in ("localstack", "rgw")


# The shared runners' scheduled sweeps, once an hour: no test on them waits for one (a test of
# the sweeper runs the sweep itself, tests/e2e/test_upload_deadlines.py, tests/crash, or starts
# a runner of its own that sweeps every 5 s, tests/e2e/test_webhooks_and_metrics.py). A sweep
# is 448 queries, and moto reads every item of the table for each: each minute, a runner that
# lives the whole run cost its moto more, as the run filled the table (docs/testing.md).
IDLE_SWEEPS = {"SWEEP_INTERVAL_SECONDS": "3600", "ORPHAN_SCAN_INTERVAL_SECONDS": "3600"}


@contextlib.contextmanager
def local_runner(aws_endpoint: str | None = None, storage: str = "", **settings: str):
    """A whole `python -m local` on free ports until the block ends: on its embedded stack, or
    against the AWS-compatible services at `aws_endpoint` (LocalStack), or with storage="rgw"
    on Ceph's RADOS Gateway (names of its own on the shared RabbitMQ); `settings` are more
    environment variables for it."""
    api_port, web_port = free_port(), free_port()
    # The tests poll far faster than any real client: a per-owner rate that they never meet
    # (tests/e2e/test_hostile.py checks the real limits on runners of their own).
    env = {**os.environ, "API_PORT": str(api_port), "WEB_PORT": str(web_port), "PYTHONUNBUFFERED": "1",
           "OWNER_REQUESTS_PER_SECOND": "1000", "OWNER_BURST": "1000", **IDLE_SWEEPS, **push_ports(),
           "LOG_FILE": str(Path(tempfile.mkdtemp(prefix="image-jobs-run-")) / "runner.log"), **settings}
    env.pop("AWS_ENDPOINT_URL", None)
    if aws_endpoint is None:
        aws_port = free_port()
        aws = f"http://127.0.0.1:{aws_port}"
        env.update(EMBEDDED_AWS="1", AWS_PORT=str(aws_port))
    else:
        aws = aws_endpoint
        env.update(EMBEDDED_AWS="0", AWS_ENDPOINT_URL=aws)
    s3, backend = aws, "embedded" if aws_endpoint is None else "localstack"
    if storage == "rgw":
        rgw_port, suffix = free_port(), uuid.uuid4().hex[:8]
        s3, backend = f"http://127.0.0.1:{rgw_port}", "rgw"
        env.update(STORAGE="rgw", RGW_PORT=str(rgw_port), AMQP_EXCHANGE=f"e2e-{suffix}",
                   AMQP_QUEUE=f"e2e-{suffix}", AMQP_ROUTING_KEY=f"e2e-{suffix}.originals")
    proc = start_local(env, "the local runner")
    try:
        yield Runner(api=f"http://127.0.0.1:{api_port}", aws=aws, web=f"http://127.0.0.1:{web_port}/",
                     output=proc.output, backend=backend, s3=s3, env=env)
    finally:
        stopped = proc.stop()
        if storage == "rgw":
            _delete_topology(env)
    if not stopped:
        pytest.fail("local runner did not stop on SIGTERM")


def _delete_topology(env: dict[str, str]) -> None:
    """A runner's exchanges and queues on the shared RabbitMQ, once it has stopped."""
    import pika

    from chalicelib.adapters.amqp import Topology
    from chalicelib.config import Settings

    topology = Topology.from_settings(Settings.from_environ(env))
    connection = pika.BlockingConnection(pika.URLParameters(Settings().amqp_url))
    try:
        channel = connection.channel()
        for queue in (topology.queue, topology.dead_letter_queue):
            channel.queue_delete(queue)
        for exchange in (topology.exchange, topology.dead_letter_exchange):
            channel.exchange_delete(exchange)
    finally:
        connection.close()


# The stacks the local runner selects: the embedded moto, LocalStack, the embedded stack with
# its storage events through RabbitMQ (QUEUE_BACKEND=amqp, the bridge in MinIO's shape), and
# Ceph's RADOS Gateway notifying RabbitMQ itself (STORAGE=rgw; runner_on starts each).
# Push (tests/{e2e,client,browser}/test_push.py) on the three whose push paths differ. Push is
# the worker's and the API's post to the runner's gateway after a table write: on rgw the same
# AMQP consumer as on amqp posts it, from moto's table as there; only the storage differs, and
# the RADOS Gateway's storage and events are the e2e suite's third backend (tests/e2e/conftest.py)
# and tests/faults/test_rgw.py's. A runner on Ceph's daemons for each of the three push modules
# cost about a minute of CI each and asserted nothing amqp's did not.
BACKENDS = ("embedded", "localstack", "amqp")


@contextlib.contextmanager
def runner_on(backend: str, request, **settings: str):
    """local_runner on one of BACKENDS; `request` is the fixture's, for the session's
    LocalStack. RabbitMQ must be up at 127.0.0.1:5672 (a loud failure, never a skip)."""
    if backend == "localstack":
        # Names of its own on the shared LocalStack (the e2e session's runner has the defaults):
        # two runners on one queue take each other's events, and the other's worker pushes to
        # its own gateway, where this runner's sockets are not (push messages lost).
        suffix = uuid.uuid4().hex[:8]
        names = {"IMAGES_BUCKET": f"image-jobs-{suffix}", "JOBS_TABLE": f"image-jobs-{suffix}",
                 "EVENTS_QUEUE": f"image-jobs-events-{suffix}", "WEBHOOK_QUEUE": f"image-jobs-webhooks-{suffix}"}
        with local_runner(aws_endpoint=request.getfixturevalue("localstack").endpoint,
                          **{**names, **settings}) as started:
            yield started
        return
    if backend == "rgw":
        with local_runner(storage="rgw", **settings) as started:
            yield started
        return
    if backend == "amqp":
        from tests.conftest import AMQP_URL, rabbit_up, wait_for_broker

        if not rabbit_up():
            pytest.fail("RabbitMQ is not running on 127.0.0.1:5672 (`rabbitmq-server -detached`)")
        wait_for_broker()
        names = uuid.uuid4().hex[:10]
        settings = {"QUEUE_BACKEND": "amqp", "AMQP_URL": AMQP_URL, "AMQP_BRIDGE": "1",
                    "AMQP_EXCHANGE": f"x-{names}", "AMQP_QUEUE": f"q-{names}",
                    "AMQP_ROUTING_KEY": f"k-{names}", **settings}
    with local_runner(**settings) as started:
        started.backend = backend
        yield started
