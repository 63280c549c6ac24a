"""Time to know: from "upload started" to "the client has the terminal status", for 12 MP
JPEGs on the embedded stack, side by side in one run:

- schedule: the SDK without waits, on the contract's schedule (Retry-After, then 3-5-8-15 s);
- get-wait: the SDK's upload, then Job.wait() with held GETs (Prefer: wait);
- post-wait: the SDK's upload(wait=20): POST /images with Prefer: wait, one round trip;

and, for the very same jobs, `visible`: the moment `ready` was written, read from each job's
record (finished_at, to the microsecond, on this machine's clock). A tight poll would tell
the same moment less exactly, and twenty of them (50 GETs a second each) load the two cores
they measure; the record costs nothing.

    python benchmarks/time_to_know.py [--rounds 6] [--concurrency 1,20]

At concurrency C, C clients (each its own owner, as C phones are) upload at once; the modes
take turns, batch by batch, on one runner. Target: a waiting client knows within 50 ms of the
moment `ready` is visible, a ratio <= 1.25 against it.
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

from benchmarks.load import free_port, percentile, photo_like  # noqa: E402
from chalicelib.adapters.dynamo_jobs import DynamoJobStore  # noqa: E402
from chalicelib.config import Settings  # noqa: E402
from chalicelib.http.auth import mint_token  # noqa: E402
from image_jobs import Client  # noqa: E402

MODES = ("schedule", "get-wait", "post-wait")
TERMINAL = {"ready", "failed", "cancelled"}


def start_runner() -> tuple[subprocess.Popen, str, str]:
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
    return runner, f"http://127.0.0.1:{api_port}", f"http://127.0.0.1:{aws_port}"


def known_after(mode: str, api: str, owner: str, data: bytes) -> tuple[str, float, float]:
    """(job id, wall clock at the upload's start, seconds until this client held a terminal status)."""
    token = mint_token(owner, Settings().jwt_secret, 3600, int(time.time()))
    wall, started = time.time(), time.perf_counter()
    with Client(api, token, waits=mode != "schedule") as client:
        job = client.upload(data, content_type="image/jpeg", wait=20 if mode == "post-wait" else 0)
        if not job.finished:
            job.wait(deadline=900)
        assert job.status in TERMINAL, job
        return job.job_id, wall, time.perf_counter() - started


def run(api: str, store: DynamoJobStore, images: list[bytes], concurrency: int,
        rounds: int) -> dict[str, list[tuple[float, float]]]:
    """mode -> [(seconds to know, seconds until ready was visible)] per job."""
    found: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    counter = iter(range(10**9))
    lock = threading.Lock()
    with ThreadPoolExecutor(concurrency) as pool:
        for round_ in range(rounds):
            for mode in MODES:  # taking turns, so a slow spell of the machine hits every mode
                def one(i):
                    with lock:
                        n = next(counter)
                    return known_after(mode, api, f"phone-{n}", images[(round_ + i) % len(images)])
                for job_id, wall, known in pool.map(one, range(concurrency)):
                    visible = store.get(job_id).finished_at.timestamp() - wall
                    found[mode].append((known, visible))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="batches per mode and concurrency")
    parser.add_argument("--concurrency", default="1,20")
    args = parser.parse_args()
    images = [photo_like(4000, 3000, seed) for seed in range(3)]  # 12 MP, under 4 MiB
    runner, api, aws = start_runner()
    store = DynamoJobStore(Settings().table, "us-east-1", aws)
    try:
        known_after("post-wait", api, "warm-up", images[0])
        rows = []
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            rounds = args.rounds if concurrency == 1 else max(1, args.rounds // 3)
            found = run(api, store, images, concurrency, rounds)
            for mode in MODES:
                known = [k for k, _ in found[mode]]
                visible = [v for _, v in found[mode]]
                late = [k - v for k, v in found[mode]]
                rows.append((concurrency, mode, len(known), statistics.median(visible) * 1000,
                             statistics.median(known) * 1000, percentile(known, 95) * 1000,
                             statistics.median(late) * 1000, percentile(late, 95) * 1000,
                             statistics.median(k / v for k, v in found[mode])))
    finally:
        runner.terminate()
        runner.wait(30)
    print(f"Time to know, 12 MP JPEGs ({len(images[0]) / 1e6:.1f}-{max(map(len, images)) / 1e6:.1f} MB), "
          f"embedded stack, {os.cpu_count()} cores")
    print(f"{'at once':>7} {'client':>10} {'n':>4} {'visible ms':>10} {'known ms':>9} {'p95':>7} "
          f"{'late ms':>8} {'p95':>7} {'ratio':>6}")
    for concurrency, mode, n, visible, median, p95, late, late95, ratio in rows:
        print(f"{concurrency:>7} {mode:>10} {n:>4} {visible:>10.0f} {median:>9.0f} {p95:>7.0f} "
              f"{late:>8.0f} {late95:>7.0f} {ratio:>6.2f}")
    print("visible: upload start to `ready` written (median); known: to the client holding it; late: "
          "known - visible per job; ratio: median of known / visible per job. Target: get-wait and "
          "post-wait late <= 50 ms, ratio <= 1.25")


if __name__ == "__main__":
    main()
