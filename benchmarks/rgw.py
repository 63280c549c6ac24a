"""The RADOS Gateway stack (STORAGE=rgw) beside the embedded one (moto), in one run: start
time, the gateway's memory, and a soak of uploads through the API that counts gateway exits.

    python benchmarks/rgw.py [--minutes 10] [--embedded-minutes 1]

Each stack is a whole `python -m local` on free ports. The soak uploads one small JPEG at a
time and waits for its terminal status, for the given minutes; every job must end `ready`,
and the gateway must not exit (Ceph 16.2.15's gateway dies of SIGSEGV within minutes when
its topic is persistent: local/rgw.py). Figures are of a shared, loaded machine.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.stack import free_port, percentile  # noqa: E402
from chalicelib.config import DEFAULT_JWT_SECRET  # noqa: E402
from chalicelib.http.auth import mint_token  # noqa: E402
from tests.images import jpeg, unique  # noqa: E402

READY = "image-jobs ready"


def start(storage: str) -> tuple[subprocess.Popen, str, float, list[str]]:
    api = free_port()
    env = dict(os.environ, API_PORT=str(api), AWS_PORT=str(free_port()), WEB_PORT=str(free_port()),
               PUSH_PORT=str(free_port()), PUSH_MANAGEMENT_PORT=str(free_port()),
               RGW_PORT=str(free_port()), STORAGE=storage, PYTHONUNBUFFERED="1",
               OWNER_REQUESTS_PER_SECOND="1000", OWNER_BURST="1000",
               LOG_FILE=str(Path(tempfile.mkdtemp(prefix="bench-rgw-")) / "runner.log"))
    env.pop("AWS_ENDPOINT_URL", None)
    began = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "local"], cwd=ROOT, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines: list[str] = []
    ready = threading.Event()

    def pump():
        for line in process.stdout:
            lines.append(line)
            if READY in line:
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    while not ready.wait(0.1):
        if process.poll() is not None or time.monotonic() - began > 180:
            process.kill()
            sys.exit("the runner did not become ready:\n" + "".join(lines[-40:]))
    return process, f"http://127.0.0.1:{api}", time.monotonic() - began, lines


def rgw_daemons(lines: list[str]) -> dict[str, int]:
    """The gateway's daemons (mon, osd, rgw) by pid, from the state directory it logged."""
    (state,) = [json.loads(line)["state"] for line in lines if '"rgw_started"' in line]
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(state.encode() in a for a in args):
            found[Path(args[0].decode()).name] = int(pid)
    return found


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def soak(api: str, minutes: float, process: subprocess.Popen) -> dict:
    photo = jpeg(800, 600)
    token = mint_token("bench-rgw", DEFAULT_JWT_SECRET, 86400, int(time.time()))
    auth = {"Authorization": f"Bearer {token}"}
    times, outcomes = [], {}
    deadline = time.monotonic() + minutes * 60
    while time.monotonic() < deadline and process.poll() is None:
        # Bytes of its own each time: an owner's exact duplicate is copied, not processed.
        body = unique(photo, f"soak-{len(times)}-{sum(outcomes.values())}-{time.monotonic_ns()}")
        began = time.monotonic()
        request = urllib.request.Request(f"{api}/api/v1/images", data=body,
                                         headers={**auth, "Content-Type": "image/jpeg"})
        try:
            location = urllib.request.urlopen(request, timeout=30).headers["Location"]
        except OSError as error:
            outcomes[f"upload {getattr(error, 'code', error)}"] = outcomes.get(f"upload {getattr(error, 'code', error)}", 0) + 1
            time.sleep(1)
            continue
        status = "queued"
        while status in ("queued", "processing") and time.monotonic() - began < 120:
            time.sleep(0.05)
            got = urllib.request.urlopen(urllib.request.Request(api + location, headers=auth), timeout=30)
            status = json.load(got)["status"]
        outcomes[status] = outcomes.get(status, 0) + 1
        if status == "ready":
            times.append(time.monotonic() - began)
    return {"jobs": sum(outcomes.values()), "outcomes": outcomes, "times": times,
            "runner_alive": process.poll() is None}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--embedded-minutes", type=float, default=1)
    args = parser.parse_args()
    rows = []
    for storage, minutes in (("", args.embedded_minutes), ("rgw", args.minutes)):
        process, api, started, lines = start(storage)
        memory = {}
        if storage == "rgw":
            time.sleep(5)  # idle: the first requests are over
            memory = {name: rss_mb(pid) for name, pid in rgw_daemons(lines).items()}
        result = soak(api, minutes, process)
        exits = [line.strip() for line in lines if "rgw_exited" in line]
        process.terminate()
        process.wait(30)
        rows.append((storage or "embedded (moto)", started, memory, result, exits))
    print("Shared, loaded machine (2 cores, other sessions' tests running): figures vary run to run.\n")
    print("| stack | to `ready` (s) | gateway RSS idle (MB) | soak (min) | jobs | outcomes | "
          "upload to ready p50 / p95 (s) | gateway exits |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for (name, started, memory, result, exits), minutes in zip(rows, (args.embedded_minutes, args.minutes)):
        times = result["times"]
        spread = (f"{statistics.median(times):.2f} / {percentile(times, 95):.2f}" if times else "-")
        mem = (f"{sum(memory.values()):.0f} ({', '.join(f'{k} {v:.0f}' for k, v in sorted(memory.items()))})"
               if memory else "-")
        print(f"| {name} | {started:.1f} | {mem} | {minutes:g} | {result['jobs']} | "
              f"{json.dumps(result['outcomes'])} | {spread} | {len(exits)} |")
    base, rgw = rows[0][3]["times"], rows[1][3]["times"]
    if base and rgw:
        print(f"\nratio rgw / embedded, upload to ready p50: "
              f"{statistics.median(rgw) / statistics.median(base):.2f}")


if __name__ == "__main__":
    main()
