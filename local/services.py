"""Child processes of the runner: moto's server and `chalice local`."""
from __future__ import annotations

import collections
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from botocore.config import Config

from chalicelib.adapters.botocore_clients import new_session
from local.ports import ensure_free

ROOT = Path(__file__).resolve().parent.parent
PR_SET_PDEATHSIG = 1  # <sys/prctl.h>


def wait_for_port(host: str, port: int, timeout: float, process: subprocess.Popen | None = None,
                  said=lambda: "") -> None:
    """Until something listens on host:port; `process` exiting first is an error that ends with
    what it `said` (its stderr's last lines)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            last = said()
            raise RuntimeError(f"{process.args[0]} exited with {process.returncode} before listening"
                               + (f":\n{last}" if last else ""))
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout:.0f}s")


def spawn(args: list[str], death_signal: int = signal.SIGTERM, **popen) -> subprocess.Popen:
    """A service the runner starts and stops itself. In a process group of its own: a signal
    to the runner's group (Ctrl-C in a terminal, a supervisor's SIGTERM) reaches the runner
    alone, which stops its consumers before the services they are using. And sent
    `death_signal` when the thread that started it ends, even of SIGKILL (Linux's
    PR_SET_PDEATHSIG), so that a killed runner leaves no service holding its port."""
    return subprocess.Popen(args, stdin=subprocess.DEVNULL, process_group=0,
                            preexec_fn=_dies_with_parent(death_signal), **popen)


def _dies_with_parent(death_signal: int):
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    # Looked up here: between fork and exec the child must load nothing.
    prctl = ctypes.CDLL(None).prctl
    return lambda: prctl(PR_SET_PDEATHSIG, death_signal)


def start_moto(host: str, port: int) -> subprocess.Popen:
    """moto's server holding S3, SQS and DynamoDB in memory, like LocalStack on one port."""
    ensure_free(host, port)
    # local.moto_server: moto's server with the bucket's CORS rules in force, as in S3.
    process = spawn([sys.executable, "-m", "local.moto_server", "-H", host, "-p", str(port)],
                    cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_for_port(host, port, timeout=30, process=process, said=keep_tail(process.stderr))
    return process


def keep_tail(stream, lines: int = 40):
    """Drain `stream` in a thread, keeping its last lines (a service that dies says why; one
    that lives never blocks on a full pipe); returns what they are, joined, once the stream
    has ended (a second at most: ask once its process has exited)."""
    tail: collections.deque[str] = collections.deque(maxlen=lines)

    def pump():
        for line in stream:
            tail.append(line)

    pumping = threading.Thread(target=pump, name="tail", daemon=True)
    pumping.start()

    def said() -> str:
        pumping.join(1.0)
        return "".join(tail)

    return said


def start_api(host: str, port: int, env: dict[str, str], pipe: bool = False) -> subprocess.Popen:
    """`chalice local` serving app.py, as the README promises; no reloader child. pipe: its
    output (stdout and stderr) comes to the caller, who passes it on (relay)."""
    ensure_free(host, port)
    output = dict(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) if pipe else {}
    return spawn([sys.executable, "-m", "local.chalice_local", "local", "--no-autoreload", "--stage", "local",
                  "--host", host, "--port", str(port)], cwd=ROOT, env=env, **output)


def relay(process: subprocess.Popen, write) -> None:
    """Pass a child's output on, line by line, until it closes (in a thread of its own)."""
    def pump():
        for line in process.stdout:
            write(line)

    threading.Thread(target=pump, name="relay", daemon=True).start()


# One session for the process, on the loader the app's clients share (a session of its own
# parsed botocore's models again: 64 ms a client against 14 ms from one that has), and
# botocore's clients, not boto3's: boto3 added 0.25 CPU-s to every runner's start for nothing
# the runner uses. Making a client from a session is not thread-safe: one at a time.
_session = new_session()
_session_lock = threading.Lock()


def aws_client(service: str, region: str, endpoint_url: str | None):
    with _session_lock:
        return _session.create_client(
            service, region_name=region, endpoint_url=endpoint_url,
            config=Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=2, read_timeout=25),
        )


def stop(process: subprocess.Popen | None, timeout: float = 10) -> None:
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def child_env(overrides: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(overrides)
    return env


WARM_UP_SUBJECT = "runner-warm-up"


def warm_up(api_url: str, jwt_secret: str, timeout: float = 60, clock=time.time,
            interval: float = 0.2) -> None:
    """One authenticated request through the API, so that 'ready' means uploads are served:
    the app and its clients are built by then, not by the first user's upload. Each try has a
    token of its own: one minted once expires within a long wait, and its 401 would hide why
    the API fails. Gives up at `timeout` with the last answer (a 503 from a store that is gone)."""
    import json
    import urllib.error
    import urllib.request

    from chalicelib.http.auth import mint_token

    deadline = time.monotonic() + timeout
    while True:
        token = mint_token(WARM_UP_SUBJECT, jwt_secret, 60, int(clock()))
        request = urllib.request.Request(
            f"{api_url}/api/v1/image-jobs/00000000-0000-4000-8000-000000000000",
            headers={"Authorization": f"Bearer {token}"})
        try:
            urllib.request.urlopen(request, timeout=10)
            return
        except urllib.error.HTTPError as error:
            try:
                body = json.loads(error.read())
            except ValueError:
                body = {}
            if not isinstance(body, dict):
                body = {}
            if error.code == 404 and body.get("code") == "job_not_found":
                return
            failure = f"the API answers {error.code} {body.get('code', '')}: {body.get('detail', '')}"
        except OSError as error:
            failure = f"the API does not answer ({error})"
        if time.monotonic() > deadline:
            raise RuntimeError(f"the warm-up request failed for {timeout:.0f} s; the last try: {failure}")
        time.sleep(interval)
