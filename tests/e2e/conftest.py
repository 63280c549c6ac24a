"""The local runner (`python -m local`), started as a user would, on free ports."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import pytest

from tests.conftest import ROOT, free_port


@dataclass
class Runner:
    api: str
    aws: str
    web: str  # the page (web/), served by the runner with a dev token
    output: list[str]


@pytest.fixture(scope="session")
def runner():
    api_port, aws_port, web_port = free_port(), free_port(), free_port()
    env = dict(os.environ, API_PORT=str(api_port), AWS_PORT=str(aws_port), WEB_PORT=str(web_port),
               EMBEDDED_AWS="1", PYTHONUNBUFFERED="1")
    env.pop("AWS_ENDPOINT_URL", None)
    process = subprocess.Popen([sys.executable, "-m", "local"], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    ready = threading.Event()

    def pump():
        for line in process.stdout:
            output.append(line)
            if "ready" in line and "API http" in line:
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + 120
    while not ready.wait(0.2):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail("local runner did not become ready:\n" + "".join(output[-60:]))
    yield Runner(api=f"http://127.0.0.1:{api_port}", aws=f"http://127.0.0.1:{aws_port}",
                 web=f"http://127.0.0.1:{web_port}/", output=output)
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("local runner did not stop on SIGTERM")
