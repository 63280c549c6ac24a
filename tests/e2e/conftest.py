"""Every test here runs twice: on the embedded stack (moto's server) and against LocalStack
(EMBEDDED_AWS=0). Where the two differ, tests say what each does (runner.backend)."""
from __future__ import annotations

import pytest

from tests.local_runner import local_runner


@pytest.fixture(scope="session", params=["embedded", "localstack"])
def runner(request, embedded_runner):
    if request.param == "embedded":
        yield embedded_runner
        return
    with local_runner(aws_endpoint=request.getfixturevalue("localstack").endpoint) as started:
        yield started
