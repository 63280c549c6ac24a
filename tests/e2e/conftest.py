"""Every test here runs three times: on the embedded stack (moto's server), against LocalStack
(EMBEDDED_AWS=0), and with Ceph's RADOS Gateway as storage notifying RabbitMQ (STORAGE=rgw).
Where they differ, tests say what each does (runner.backend, runner.strict)."""
from __future__ import annotations

import pytest

from tests.local_runner import local_runner


@pytest.fixture(scope="session", params=["embedded", "localstack", "rgw"])
def runner(request, embedded_runner):
    if request.param == "embedded":
        yield embedded_runner
        return
    if request.param == "rgw":
        request.getfixturevalue("rabbitmq")
        with local_runner(storage="rgw") as started:
            yield started
        return
    with local_runner(aws_endpoint=request.getfixturevalue("localstack").endpoint) as started:
        yield started
