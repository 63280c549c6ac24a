"""Time to know: from "upload started" to "the client has the terminal status", for 12 MP
JPEGs on the embedded stack, side by side in one run:

- visible: a tight poll (GET every 20 ms): when `ready` became visible at all;
- schedule: the SDK without waits, on the contract's schedule (Retry-After, then 3-5-8-15 s);
- get-wait: the SDK's upload, then Job.wait() with held GETs (Prefer: wait);
- post-wait: the SDK's upload(wait=20): POST /images with Prefer: wait, one round trip.

    python benchmarks/time_to_know.py [--rounds 6] [--concurrency 1,20]

At concurrency C, C clients (each its own owner, as C phones are) upload at once; every mode
runs its own batches, one after another, on one runner. Target: a waiting client knows within
50 ms of the moment `ready` is visible, a ratio <= 1.25 against `visible`.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))

import requests  # noqa: E402

from benchmarks.load import free_port, percentile, photo_like  # noqa: E402
from chalicelib.config import Settings  # noqa: E402
from chalicelib.http.auth import mint_token  # noqa: E402
from image_jobs import Client  # noqa: E402

MODES = ("visible", "schedule", "get-wait", "post-wait")
TERMINAL = {"ready", "failed", "cancelled"}


def start_runner() -> tuple[subprocess.Popen, str, Path]:
    api_port, aws_port = free_port(), free_port()
    log = Path(tempfile.mkdtemp(prefix="time-to-know-")) / "runner.log"
    env = dict(os.environ, API_PORT=str(api_port), AWS_PORT=str(aws_port), LOG_FILE=str(log),
               LOCAL_COMPONENTS="api,worker,sweeper", PYTHONUNBUFFERED="1")
    env.pop("AWS_ENDPOINT_URL", None)
    out = open(log.with_suffix(".out"), "w")
    runner = subprocess.Popen([sys.executable, "-m", "local"], cwd=ROOT, env=env, stdout=out,
                              stderr=subprocess.STDOUT)
    started = time.monotonic()
    while "image-jobs ready" not in log.with_suffix(".out").read_text():
        if runner.poll() is not None or time.monotonic() - started > 120:
            raise RuntimeError(f"the runner did not start: {log.with_suffix('.out')}")
        time.sleep(0.2)
    return runner, f"http://127.0.0.1:{api_port}", log


def known_after(mode: str, api: str, owner: str, data: bytes) -> float:
    """Seconds from the upload's start to the moment this client holds a terminal status."""
    token = mint_token(owner, Settings().jwt_secret, 3600, int(time.time()))
    started = time.perf_counter()
    if mode == "visible":
        headers = {"Authorization": f"Bearer {token}"}
        with requests.Session() as session:
            r = session.post(f"{api}/api/v1/images", data=data, timeout=60,
                             headers={**headers, "Content-Type": "image/jpeg"})
            location = r.headers["Location"]
            while True:
                status = session.get(api + location, headers=headers, timeout=30).json()["status"]
                if status in TERMINAL:
                    return time.perf_counter() - started
                time.sleep(0.02)
    with Client(api, token, waits=mode != "schedule") as client:
        job = client.upload(data, content_type="image/jpeg", wait=20 if mode == "post-wait" else 0)
        if not job.finished:
            job.wait(deadline=120)
        assert job.status in TERMINAL, job
        return time.perf_counter() - started


def run(api: str, images: list[bytes], concurrency: int, rounds: int) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {mode: [] for mode in MODES}
    counter = iter(range(10**9))
    lock = threading.Lock()
    with ThreadPoolExecutor(concurrency) as pool:
        for round_ in range(rounds):
            for mode in MODES:  # interleaved, so a slow spell of the machine hits every mode
                def one(i):
                    with lock:
                        n = next(counter)
                    return known_after(mode, api, f"phone-{n}", images[(round_ + i) % len(images)])
                found[mode] += list(pool.map(one, range(concurrency)))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="batches per mode and concurrency")
    parser.add_argument("--concurrency", default="1,20")
    args = parser.parse_args()
    images = [photo_like(4000, 3000, seed) for seed in range(3)]  # 12 MP, under 4 MiB
    runner, api, log = start_runner()
    try:
        known_after("post-wait", api, "warm-up", images[0])
        rows = []
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            rounds = args.rounds if concurrency == 1 else max(1, args.rounds // 3)
            found = run(api, images, concurrency, rounds)
            base = statistics.median(found["visible"])
            for mode in MODES:
                values = found[mode]
                rows.append((concurrency, mode, len(values), statistics.median(values) * 1000,
                             percentile(values, 95) * 1000, statistics.median(values) / base))
    finally:
        runner.terminate()
        runner.wait(30)
    print(f"Time to know, 12 MP JPEGs ({len(images[0]) / 1e6:.1f}-{max(map(len, images)) / 1e6:.1f} MB), "
          f"embedded stack, {os.cpu_count()} cores")
    print(f"{'uploads at once':>15} {'client':>10} {'n':>4} {'median ms':>10} {'p95 ms':>8} {'ratio':>6}")
    for concurrency, mode, n, median, p95, ratio in rows:
        print(f"{concurrency:>15} {mode:>10} {n:>4} {median:>10.0f} {p95:>8.0f} {ratio:>6.2f}")
    print("ratio: median against `visible` at the same concurrency; target <= 1.25 for get-wait and post-wait")


if __name__ == "__main__":
    main()
