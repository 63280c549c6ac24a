"""Degraded service through HTTP: 503 overloaded over the backlog bound, 503
storage_unavailable (and the idempotency key released) while storage is down."""
import time

import pytest
import requests

from tests.conftest import free_port
from tests.e2e.test_images_api import assert_problem, headers, poll
from tests.images import jpeg
from tests.local_runner import ApiAt, dedicated_runner
from tests.proxy import TcpProxy


@pytest.fixture
def api_without_workers():
    with dedicated_runner(free_port(), LOCAL_COMPONENTS="api", MAX_BACKLOG="2", BACKLOG_CACHE_SECONDS="1") as api:
        yield api


def test_uploads_are_shed_with_retry_after_while_the_backlog_is_over_the_bound(api_without_workers):
    def upload():
        return requests.post(f"{api_without_workers}/api/v1/images", data=jpeg(), timeout=30,
                             headers=headers(**{"Content-Type": "image/jpeg"}))

    for _ in range(3):  # nobody consumes: the queue holds 3 > 2 events
        assert upload().status_code == 202
    time.sleep(1.5)  # past the cached reading
    shed = upload()
    assert_problem(shed, 503, "overloaded")
    assert int(shed.headers["Retry-After"]) >= 2


@pytest.fixture
def api_with_flaky_storage():
    aws_port = free_port()
    proxy = TcpProxy(aws_port)  # S3 through a cuttable port; the table and queue directly
    with dedicated_runner(aws_port, LOCAL_COMPONENTS="api,worker",
                S3_ENDPOINT_URL=f"http://127.0.0.1:{proxy.port}") as api:
        yield api, proxy
    proxy.down()


def test_storage_down_is_503_with_retry_after_and_the_key_is_released(api_with_flaky_storage):
    api, proxy = api_with_flaky_storage

    def upload():
        return requests.post(f"{api}/api/v1/images", data=jpeg(), timeout=30,
                             headers=headers(**{"Content-Type": "image/jpeg", "Idempotency-Key": "retry-me"}))

    proxy.down()
    failed = upload()
    assert_problem(failed, 503, "storage_unavailable")
    assert int(failed.headers["Retry-After"]) >= 1
    proxy.up()
    retried = upload()
    assert retried.status_code == 202 and "Idempotent-Replayed" not in retried.headers
    job = poll(ApiAt(api), retried.headers["Location"]).json()
    assert job["status"] == "ready"
