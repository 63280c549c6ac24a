"""`python -m local` (make run) at its start and its stop: a port it wants that is taken ends
it at once with one line naming the port, what wanted it and the setting that moves it (no
traceback, a non-zero exit); a signal to it, or to its whole process group as a terminal's
Ctrl-C or a supervisor's stop sends, stops it with no error logged and exit 0."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from local.ports import ensure_free
from tests.conftest import ROOT, free_port
from tests.local_runner import start_local

PORTS = ("AWS_PORT", "API_PORT", "WEB_PORT", "PUSH_PORT", "PUSH_MANAGEMENT_PORT")


def runner_env(**settings: str) -> dict[str, str]:
    """The embedded stack, every port free, a log file of its own."""
    env = dict(os.environ, EMBEDDED_AWS="1", PYTHONUNBUFFERED="1",
               LOG_FILE=str(Path(tempfile.mkdtemp(prefix="image-jobs-run-")) / "runner.log"),
               **{name: str(free_port()) for name in PORTS}, **settings)
    env.pop("AWS_ENDPOINT_URL", None)
    return env


def run_to_its_end(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "local"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("variable, settings", [(name, {}) for name in PORTS] + [
    # Ceph's gateway's port is checked before anything is started (or installed).
    ("RGW_PORT", {"STORAGE": "rgw", "QUEUE_BACKEND": "amqp", "RGW_PORT": str(free_port())}),
])
def test_a_taken_port_ends_the_run_with_one_line_naming_it_and_its_setting(variable, settings):
    env = runner_env(**settings)
    port = int(env[variable])
    with socket.create_server(("127.0.0.1", port)):  # someone else listens there
        done = run_to_its_end(env)
    lines = done.stderr.splitlines()
    assert done.returncode != 0 and len(lines) == 1, (done.returncode, done.stderr, done.stdout[-3000:])
    assert f"port {port} is taken" in lines[0] and f"set {variable} to a free port" in lines[0]
    assert "Traceback" not in done.stdout + done.stderr
    assert "image-jobs ready" not in done.stdout


def test_one_port_asked_of_two_parts_ends_the_run_with_one_line_naming_both_settings():
    env = runner_env()
    env["PUSH_PORT"] = env["API_PORT"]
    done = run_to_its_end(env)
    lines = done.stderr.splitlines()
    assert done.returncode != 0 and len(lines) == 1, (done.returncode, done.stderr, done.stdout[-3000:])
    assert env["API_PORT"] in lines[0] and "API_PORT" in lines[0] and "PUSH_PORT" in lines[0]
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize("signal_name, to_group", [
    ("SIGTERM", True),   # a supervisor stopping the group (systemd's control group, a container)
    ("SIGINT", True),    # Ctrl-C in the terminal of `make run`
    ("SIGTERM", False),  # kill <pid>
])
def test_a_stop_signal_ends_the_run_cleanly(signal_name, to_group):
    env = runner_env()
    proc = start_local(env, own_group=True)
    try:
        if to_group:
            os.killpg(proc.process.pid, getattr(signal, signal_name))
        else:
            proc.process.send_signal(getattr(signal, signal_name))
        code = proc.process.wait(120)
    finally:
        proc.stop()
    with open(env["LOG_FILE"], encoding="utf-8") as log:
        records = [json.loads(line) for line in log if line.startswith("{")]
    errors = [record for record in records if record.get("level") in ("error", "critical")]
    assert code == 0 and not errors, (code, errors, proc.text()[-3000:])
    assert "Traceback" not in proc.text()
    assert any(record.get("event") == "stopping" for record in records)
    for name in ("AWS_PORT", "API_PORT", "PUSH_PORT"):  # its services stopped with it
        ensure_free("127.0.0.1", int(env[name]))
