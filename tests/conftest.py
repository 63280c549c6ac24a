"""Shared fixtures. Services the tests need are started here, never assumed."""
from __future__ import annotations

import contextlib
import os
import socket
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Emulators take any credentials; make sure no real account is ever touched.
for name, value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                    "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1"}.items():
    os.environ[name] = value
os.environ.pop("AWS_PROFILE", None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
                      table=f"jobs-{suffix}", queue_name=f"events-{suffix}")
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


@dataclass
class Runner:
    api: str
    aws: str
    output: list[str]


@contextlib.contextmanager
def local_runner(**env: str) -> Iterator[Runner]:
    """The local runner (`python -m local`), started as a user would, on free ports."""
    from tests.local_runner import start_local

    api_port, aws_port = free_port(), free_port()
    full = dict(os.environ, API_PORT=str(api_port), AWS_PORT=str(aws_port), EMBEDDED_AWS="1",
                PYTHONUNBUFFERED="1", **env)
    full.pop("AWS_ENDPOINT_URL", None)
    proc = start_local(full, "the local runner")
    try:
        yield Runner(api=f"http://127.0.0.1:{api_port}", aws=f"http://127.0.0.1:{aws_port}",
                     output=proc.output)
    finally:
        if not proc.stop():
            pytest.fail("local runner did not stop on SIGTERM")


@pytest.fixture(scope="session")
def runner():
    """One local runner for the whole session's end-to-end tests."""
    with local_runner() as started:
        yield started
