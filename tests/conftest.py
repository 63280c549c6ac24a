"""Shared fixtures. Services the tests need are started here, never assumed."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Emulators take any credentials; make sure no real account is ever touched.
for name, value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                    "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1"}.items():
    os.environ[name] = value
os.environ.pop("AWS_PROFILE", None)
# The tests run the app in-process as the local runner does, with its default dev secret.
os.environ["LOCAL_RUNNER"] = "1"
# A shell without job control (a script's `cmd &`) starts its background commands with SIGINT
# ignored, and every process inherits that: the CLI the tests start would then never hear the
# Ctrl-C they send it (three tests failed so under such a run). As from a terminal, then.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


from local.ports import free_port  # noqa: E402,F401  (the tests' one, imported from here)


AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"


def rabbit_up() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5672), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def rabbitmq():
    """The machine's RabbitMQ; started if it is down, a loud failure if it cannot be."""
    if not rabbit_up():
        subprocess.run(["rabbitmq-server", "-detached"], check=False)
        deadline = time.monotonic() + 90
        while not rabbit_up():
            if time.monotonic() > deadline:
                pytest.fail("RabbitMQ is not running on 127.0.0.1:5672 and could not be started")
            time.sleep(1)
    wait_for_broker()
    return AMQP_URL


def wait_for_broker(timeout: float = 90, url: str = AMQP_URL) -> None:
    import pika

    deadline = time.monotonic() + timeout
    while True:
        try:
            pika.BlockingConnection(pika.URLParameters(url)).close()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.fixture(scope="session")
def moto_endpoint():
    """moto's server in a child process on a free port, for the whole session."""
    from local.services import start_moto, stop

    port = free_port()
    process = start_moto("127.0.0.1", port)
    yield f"http://127.0.0.1:{port}"
    stop(process)


@pytest.fixture
def settings_for(moto_endpoint):
    """Settings with names unique to one test, so tests never see each other's data."""
    from chalicelib.config import Settings

    def make(**overrides):
        suffix = uuid.uuid4().hex[:10]
        values = dict(endpoint_url=moto_endpoint, bucket=f"images-{suffix}",
                      table=f"jobs-{suffix}", events_queue_name=f"events-{suffix}")
        values.update(overrides)
        return Settings(**values)

    return make


@pytest.fixture
def stack(settings_for):
    """A provisioned stack (bucket + notification, queue + DLQ, table) on moto's server."""
    from local.provision import provision
    from local.services import aws_client

    settings = settings_for()
    clients = {n: aws_client(n, settings.region, settings.endpoint_url) for n in ("sqs", "s3", "dynamodb")}
    provisioned = provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"])
    return settings, provisioned, clients


# The local runner (`python -m local`), started as a user would, on free ports, on its embedded
# stack: one for the whole session, shared by the browser (tests/browser) and end-to-end tests
# (tests/e2e runs its tests on LocalStack too).
@pytest.fixture(scope="session")
def embedded_runner():
    from tests.local_runner import local_runner

    with local_runner() as started:
        yield started


@pytest.fixture(scope="session")
def runner(embedded_runner):
    return embedded_runner


@pytest.fixture(scope="session")
def localstack(tmp_path_factory):
    """LocalStack on the host (local/localstack.py: installed once into its cache, which `make
    test` does before pytest starts) on a free port, provisioned by its ready.d hook. It fails,
    never skips, when LocalStack cannot start."""
    from local.localstack import LocalStackError, install, start, wait_ready

    root = tmp_path_factory.mktemp("localstack")
    log = open(tmp_path_factory.mktemp("localstack-log") / "localstack.log", "w+")
    try:
        # What tests/e2e/test_backends.py pins, whatever the caller's environment says.
        strict = {"S3_SKIP_SIGNATURE_VALIDATION": "0", "DYNAMODB_REMOVE_EXPIRED_ITEMS": "1",
                  # The queue gauges in CloudWatch every 5 s, not each minute: the sweeper's
                  # lost-event check sees a queue's oldest message within seconds.
                  "SQS_CLOUDWATCH_METRICS_REPORT_INTERVAL": "5"}
        instance = start(free_port(), root, install(), overrides=strict, output=log)
        wait_ready(instance, timeout=180)
    except LocalStackError as error:
        log.seek(0)
        pytest.fail(f"LocalStack did not start: {error}\n{log.read()[-6000:]}")
    instance.log = log
    yield instance
    instance.stop()
    log.close()


# Side by side (`make test` runs pytest-xdist with --dist loadgroup): a test goes to any
# worker unless what it shares costs more to start again than to wait for. One LocalStack
# and one RADOS Gateway runner (the e2e session's) per run, one `chalice package`, and a
# module's (or package's) runner for all of that module's tests on each backend.
# The benchmarks' short runs (tests/bench) are in no group: each is a process of its own that
# shares nothing, and asserts no time. One after another on one worker they were the run's
# longest chain (about 800 s of a loaded 2-core machine's run, half of it sweeper.py, load.py,
# api.py and rgw.py), which every other worker waited out at the end.
SHARED = {"localstack": "localstack", "packaged": "packaged"}


def xdist_group(item) -> str | None:
    params = getattr(item, "callspec", None)
    params = params.params if params else {}
    if "localstack" in params.values() or "localstack" in item.fixturenames:
        return "localstack"
    for name in item.fixturenames:
        if name in SHARED:
            return SHARED[name]
    wide, values = [], []
    for name in item.fixturenames:
        definitions = item._fixtureinfo.name2fixturedefs.get(name)
        scope = definitions[-1].scope if definitions else "function"
        if scope == "session" and params.get(name) == "rgw":
            return "rgw"
        if scope in ("module", "class", "package"):
            wide.append(scope)
            # Each parameter of a module's fixture is a runner of its own: those may run apart.
            if name in params:
                values.append(str(params[name]))
    if not wide:
        return None
    where = item.path.parent if set(wide) == {"package"} else item.path
    return "-".join([str(where.relative_to(ROOT)), *values])


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        group = xdist_group(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
