"""The local runner (`python -m local`), started as a user would, on free ports: once on its
embedded stack (moto's server) and once against LocalStack (EMBEDDED_AWS=0), so every test here
runs on both. Where the two differ, tests say what each does (runner.backend)."""
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
    output: list[str]
    backend: str  # "embedded" (moto) or "localstack"


@pytest.fixture(scope="session", params=["embedded", "localstack"])
def runner(request):
    api_port = free_port()
    env = dict(os.environ, API_PORT=str(api_port), PYTHONUNBUFFERED="1")
    env.pop("AWS_ENDPOINT_URL", None)
    if request.param == "localstack":
        aws = request.getfixturevalue("localstack").endpoint
        env.update(EMBEDDED_AWS="0", AWS_ENDPOINT_URL=aws)
    else:
        aws_port = free_port()
        aws = f"http://127.0.0.1:{aws_port}"
        env.update(EMBEDDED_AWS="1", AWS_PORT=str(aws_port))
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
    yield Runner(api=f"http://127.0.0.1:{api_port}", aws=aws, output=output, backend=request.param)
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("local runner did not stop on SIGTERM")
