"""What the API and worker benchmarks share: the local runner of a checkout, its processes and
their CPU time.

Every benchmark can measure another checkout of the project (`--root DIR`, say the commit
before a change) with this checkout's scripts; so nothing here imports chalicelib. The
code under test is imported only in child processes whose sys.path starts at that root.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median  # noqa: F401  (the benchmarks' median: stack.median)
from typing import Optional

HERE = Path(__file__).resolve().parent
THIS_ROOT = HERE.parent
TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")
# The embedded stack takes any credentials; the runner sets the same ones.
AWS_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1"}


_handed_out: set[int] = set()


def free_port() -> int:
    """A loopback port nothing listens on now, never one this process handed out before (the
    kernel may give a port just closed again: an API and its page were once given one).
    local/ports.py's rule, kept here since nothing here imports the checkout."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def cpu_seconds(pid: int, children: bool = False) -> float:
    """User + system CPU of every thread of the process so far, from /proc/<pid>/stat
    (fields 14 and 15, in clock ticks; the name field may hold spaces, so split after it).
    With `children`, also that of its decode children: those it has waited for (fields 16
    and 17) and those still alive (the sandbox reuses them), told from the services it
    started by their command line (chalicelib/imaging/sandbox_child.py's)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    seconds = ticks / TICKS_PER_SECOND
    return seconds + sum(map(cpu_seconds, _decode_children(pid))) if children else seconds


def page_faults(pid: int, children: bool = False) -> int:
    """Minor page faults of the process so far (field 10 of /proc/<pid>/stat), with `children`
    those of its decode children too (reaped: field 11; alive: their own), as cpu_seconds.
    Each costs the kernel's time, which counts in the process's system CPU."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    faults = int(fields[7]) + (int(fields[8]) if children else 0)
    return faults + sum(map(page_faults, _decode_children(pid))) if children else faults


DECODE_CHILD = "chalicelib.imaging.sandbox_child"


def _decode_children(pid: int) -> list[int]:
    found = []
    for child in children(pid):
        try:
            if DECODE_CHILD in cmdline(child):
                found.append(child)
        except FileNotFoundError:  # reaped meanwhile: in the parent's fields 16 and 17
            pass
    return found


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(child) for child in text]
    return found


def take_event(sqs, queue_url: str):
    """The next object-created event on the queue (each message taken is deleted)."""
    from chalicelib.domain.events import parse_message

    for _ in range(10):
        for message in sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10,
                                           WaitTimeSeconds=1).get("Messages", []):
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            events = parse_message(message["Body"])
            if events:
                return events[0]
    raise RuntimeError("S3 sent no object-created event")


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def label_of(root: Path) -> str:
    """The checkout's commit (and '+changes' when its tree differs from it)."""
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return commit + ("+changes" if dirty else "")
    except (subprocess.CalledProcessError, FileNotFoundError):
        return root.name


@dataclass
class Runner:
    """`python -m local` of one checkout, with the components asked for."""

    root: Path
    components: str
    extra_env: dict = field(default_factory=dict)
    api_port: int = field(default_factory=free_port)
    aws_port: int = field(default_factory=free_port)
    process: Optional[subprocess.Popen] = None
    log_path: Optional[Path] = None
    command: Optional[list] = None  # default: python -m local

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def aws_url(self) -> str:
        return f"http://127.0.0.1:{self.aws_port}"

    def env(self) -> dict:
        env = dict(os.environ, **AWS_ENV, API_PORT=str(self.api_port), AWS_PORT=str(self.aws_port),
                   LOCAL_COMPONENTS=self.components, PYTHONUNBUFFERED="1", **self.extra_env)
        env.pop("AWS_ENDPOINT_URL", None)
        env["PYTHONPATH"] = str(self.root)
        return env

    def start(self, timeout: float = 120) -> "Runner":
        self.log_path = Path(f"/tmp/image-jobs-bench-{self.api_port}.log")
        log = open(self.log_path, "w")
        self.process = subprocess.Popen(self.command or [sys.executable, "-m", "local"], cwd=self.root, env=self.env(),
                                        stdout=log, stderr=subprocess.STDOUT)
        started = time.monotonic()
        while "image-jobs ready" not in self.log_path.read_text():
            if self.process.poll() is not None or time.monotonic() - started > timeout:
                self.stop()
                raise RuntimeError(f"the runner of {self.root} did not start; see {self.log_path}")
            time.sleep(0.2)
        return self

    def pid_of(self, marker: str) -> int:
        """The runner's child whose command line holds marker (moto_server, chalice_local)."""
        for child in children(self.process.pid):
            if marker in cmdline(child):
                return child
        raise RuntimeError(f"no child process of the runner runs {marker}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> "Runner":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def run_child(script: Path, root: Path, args: list[str], env: dict, python: str = sys.executable) -> dict:
    """Run `script --child ...` with the checkout under test first on sys.path; it prints
    one JSON object as its last line."""
    child_env = dict(os.environ, **AWS_ENV, **env, PYTHONPATH=str(root))
    done = subprocess.run([python, str(script), "--child", str(root), *args], cwd=root,
                          env=child_env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{script.name} child failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def enter_root(root: str) -> None:
    """In a child: import the checkout under test, not this one."""
    sys.path.insert(0, root)
    os.chdir(root)


def quiet_stdout():
    """Structured logs go to stdout; a child keeps the real one for its JSON answer."""
    real = sys.stdout
    sys.stdout = open(os.devnull, "w")
    return real


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def packaged_python(root: Path) -> str:
    """The python of a venv holding only what the Lambda package holds: the checkout's
    requirements.txt, and Chalice's runtime (`chalice deploy` adds chalice/app.py to the
    package; the CLI's dependencies stay out). The dev venv has more (moto brings
    cryptography, which PyJWT then imports), so a cold start measured there is not the
    deployed one. Made once per requirements.txt, kept in ~/.cache/image-jobs-bench/."""
    import hashlib

    requirements = root / "requirements.txt"
    chalice = next(line for line in (root / "requirements-dev.txt").read_text().splitlines()
                   if line.startswith("chalice=="))
    digest = hashlib.sha256(requirements.read_bytes() + chalice.encode()).hexdigest()[:12]
    venv = Path.home() / ".cache" / "image-jobs-bench" / f"lambda-{digest}"
    python = venv / "bin" / "python"
    if not (venv / ".installed").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, "-r", str(requirements)], check=True)
        subprocess.run([*pip, "--no-deps", chalice], check=True)
        (venv / ".installed").touch()
    return str(python)
