"""503 overloaded through HTTP when the queue's backlog is over the bound."""
import os
import subprocess
import sys
import threading
import time

import pytest
import requests

from tests.conftest import ROOT, free_port
from tests.e2e.test_images_api import assert_problem, headers
from tests.images import jpeg


@pytest.fixture
def api_without_workers():
    api_port, aws_port = free_port(), free_port()
    env = dict(os.environ, API_PORT=str(api_port), AWS_PORT=str(aws_port), LOCAL_COMPONENTS="api",
               MAX_BACKLOG="2", BACKLOG_CACHE_SECONDS="1", PYTHONUNBUFFERED="1")
    env.pop("AWS_ENDPOINT_URL", None)
    process = subprocess.Popen([sys.executable, "-m", "local"], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in process.stdout:
        if "image-jobs ready" in line:
            break
    else:
        pytest.fail("runner did not start")
    threading.Thread(target=process.stdout.read, daemon=True).start()  # keep the pipe drained
    yield f"http://127.0.0.1:{api_port}"
    process.terminate()
    process.wait(30)


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
