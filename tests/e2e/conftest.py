"""The local runner (`python -m local`), started as a user would, on free ports."""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import pytest

from tests.conftest import free_port
from tests.local_runner import start_local


@dataclass
class Runner:
    api: str
    aws: str
    output: list[str]


@contextlib.contextmanager
def local_runner():
    """A `python -m local` on free ports until the block ends (tests/client reuses it)."""
    api_port, aws_port = free_port(), free_port()
    # The tests poll far faster than any real client: a per-owner rate that they never meet
    # (tests/e2e/test_hostile.py checks the real limits on runners of their own).
    env = dict(os.environ, API_PORT=str(api_port), AWS_PORT=str(aws_port), EMBEDDED_AWS="1",
               PYTHONUNBUFFERED="1", OWNER_REQUESTS_PER_SECOND="1000", OWNER_BURST="1000")
    env.pop("AWS_ENDPOINT_URL", None)
    proc = start_local(env, "the local runner")
    yield Runner(api=f"http://127.0.0.1:{api_port}", aws=f"http://127.0.0.1:{aws_port}", output=proc.output)
    if not proc.stop():
        pytest.fail("local runner did not stop on SIGTERM")


@pytest.fixture(scope="session")
def runner():
    with local_runner() as started:
        yield started
