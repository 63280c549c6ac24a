"""Time to know: from "upload started" to "the client has the terminal status", for 12 MP
JPEGs on the embedded stack, side by side in one run:

- schedule: the SDK without waits, on the contract's schedule (Retry-After, then 3-5-8-15 s);
- get-wait: the SDK's upload, then Job.wait() with held GETs (Prefer: wait);
- post-wait: the SDK's upload(wait=20): POST /images with Prefer: wait, one round trip;

and, for the very same jobs, `visible`: the moment `ready` was written, read from each job's
record (finished_at, to the microsecond, on this machine's clock). A tight poll would tell
the same moment less exactly, and twenty of them (50 GETs a second each) load the two cores
they measure; the record costs nothing.

and the push client (`push_rows`): the SDK's watch over one WebSocket, from the status
change in the record (`created_at` for `queued`, `finished_at` for `ready`) to the message
at the client, with 1 and with 100 sockets connected (the other 99 of the same owner, so
that every change goes to 100 connections, or of other owners), beside get-wait on the
same runner.

    python benchmarks/time_to_know.py [--rounds 6] [--concurrency 1,20] [--push-jobs 30]
                                      [--size 4000x3000] [--crowd 99]

--size and --crowd take smaller inputs (CI's short run, tests/bench): the photos' pixels and
the sockets beside the push client's; the defaults are what docs/scale.md reports.

At concurrency C, C clients (each its own owner, as C phones are) upload at once; the modes
take turns, batch by batch, on one runner. Target: a waiting client knows within 50 ms of the
moment `ready` is visible, a ratio <= 1.25 against it.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))

from benchmarks.load import photo_like  # noqa: E402
from tests.images import unique  # noqa: E402
from benchmarks.stack import free_port, percentile  # noqa: E402
from chalicelib.adapters.dynamo_jobs import DynamoJobStore  # noqa: E402
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.config import Settings  # noqa: E402
from chalicelib.http.auth import mint_token  # noqa: E402
from image_jobs import Client  # noqa: E402

MODES = ("schedule", "get-wait", "post-wait")
TERMINAL = {"ready", "failed", "cancelled"}


def start_runner(log: Optional[Path] = None, **extra: str) -> tuple[subprocess.Popen, str, str]:
    api_port, aws_port = free_port(), free_port()
    log = log or Path(tempfile.mkdtemp(prefix="time-to-know-")) / "runner.log"
    env = dict(os.environ, API_PORT=str(api_port), AWS_PORT=str(aws_port), LOG_FILE=str(log),
               LOCAL_COMPONENTS="api,worker,sweeper", PYTHONUNBUFFERED="1")
    env.update(extra)
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
    data = unique(data, uuid.uuid4().hex)  # an owner's exact duplicate is copied, not processed
    wall, started = time.time(), time.perf_counter()
    with Client(api, token, waits=mode != "schedule") as client:
        job = client.upload(data, content_type="image/jpeg", wait=20 if mode == "post-wait" else 0)
        if not job.finished:
            job.wait(deadline=900)
        assert job.status in TERMINAL, job
        return job.job_id, wall, time.perf_counter() - started


@dataclass(frozen=True)
class Sample:
    """One job, in seconds from its upload's start: until the client held its terminal status,
    and until the worker stamped it ready (finished_at, just before its write)."""

    job_id: str
    wall: float  # the upload's start, on the wall clock
    known: float
    finished: float


def run(api: str, store: DynamoJobStore, images: list[bytes], concurrency: int,
        rounds: int) -> dict[str, list[Sample]]:
    found: dict[str, list[Sample]] = {mode: [] for mode in MODES}
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
                    finished = store.get(job_id).finished_at.timestamp() - wall
                    found[mode].append(Sample(job_id, wall, known, finished))
    return found


# -- the push client ------------------------------------------------------------------------
def token_of(owner: str) -> str:
    return mint_token(owner, Settings().jwt_secret, 3600, int(time.time()))


class Listeners:
    """`count` more sockets on the push URL, each reading and dropping what it gets, in one
    asyncio thread (cheap beside 99 SDK threads, so the machine measures the fan-out)."""

    def __init__(self, url: str, owners: list[str]):
        import asyncio

        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop = None
        self.messages = 0
        threading.Thread(target=self._loop.run_until_complete, args=(self._main(url, owners),),
                         daemon=True).start()
        if not self._ready.wait(60):
            raise RuntimeError("the listeners did not connect")

    async def _main(self, url: str, owners: list[str]) -> None:
        import asyncio

        from websockets.asyncio.client import connect

        self._stop = asyncio.Event()
        sockets = [await connect(url, subprotocols=["image-jobs.v1", "bearer." + token_of(o)])
                   for o in owners]
        tasks = [asyncio.create_task(self._drain(s)) for s in sockets]
        self._ready.set()
        await self._stop.wait()
        for s in sockets:
            await s.close()
        for t in tasks:
            t.cancel()

    async def _drain(self, socket) -> None:
        async for _ in socket:
            self.messages += 1

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)


def push_latencies(api: str, store: DynamoJobStore, images: list[bytes], owner: str,
                   jobs: int) -> list[tuple[Optional[float], float]]:
    """[(queued: record -> message s, ready: record -> message s)] of `jobs` uploads, one at
    a time, by one client whose watch of all its jobs is its only socket. queued None: its
    message came after `processing`'s (two senders) and was dropped as older."""
    arrived: dict[tuple[str, str], float] = {}
    with Client(api, token_of(owner)) as client:
        watch = client.watch()

        def follow() -> None:
            for job in watch:
                arrived.setdefault((job.job_id, job.status), time.time())

        follower = threading.Thread(target=follow, daemon=True)
        follower.start()
        while watch.connects < 1:
            time.sleep(0.01)
        ids = []
        for i in range(jobs):
            job = client.upload(unique(images[i % len(images)], uuid.uuid4().hex), content_type="image/jpeg")
            ids.append(job.job_id)
            deadline = time.monotonic() + 120
            while (job.job_id, "ready") not in arrived:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no ready message for {job.job_id}")
                time.sleep(0.002)
        watch.close()
    found = []
    for job_id in ids:
        record = store.get(job_id)
        queued = arrived.get((job_id, "queued"))
        found.append((None if queued is None else queued - record.created_at.timestamp(),
                      arrived[job_id, "ready"] - record.finished_at.timestamp()))
    return found


def get_wait_latencies(api: str, store: DynamoJobStore, images: list[bytes], owner: str,
                       jobs: int) -> list[float]:
    """ready: record -> the held GET's answer at the client, for the same kind of upload."""
    found = []
    with Client(api, token_of(owner)) as client:
        for i in range(jobs):
            job = client.upload(unique(images[i % len(images)], uuid.uuid4().hex), content_type="image/jpeg")
            job.wait(deadline=120)
            known = time.time()
            found.append(known - store.get(job.job_id).finished_at.timestamp())
    return found


def push_rows(images: list[bytes], jobs: int, crowd: int = 99) -> list[tuple]:
    """(sockets, who else, mode, n, median ms, p95 ms) per row, all on one runner with push;
    the crowded rows with `crowd` more sockets beside the client's."""
    push_port, management_port = free_port(), free_port()
    # 100 sockets of one owner: past the default cap of connections per owner (10).
    runner, api, aws = start_runner(LOCAL_COMPONENTS="api,worker,sweeper,push", PUSH_PORT=str(push_port),
                                    PUSH_MANAGEMENT_PORT=str(management_port),
                                    MAX_PUSH_CONNECTIONS_PER_OWNER="200",
                                    # 99 connects of one owner at once: fan-out is measured, not admission
                                    OWNER_REQUESTS_PER_SECOND="1000", OWNER_BURST="1000")
    store = DynamoJobStore(DynamoTable(Settings().table, "us-east-1", aws))
    url = f"ws://127.0.0.1:{push_port}"
    rows = []

    def row(sockets: int, others: str, mode: str, seconds: list[float]) -> None:
        if not seconds:  # every queued message came after processing's (a short run can)
            rows.append((sockets, others, mode, 0, float("nan"), float("nan")))
            return
        rows.append((sockets, others, mode, len(seconds), statistics.median(seconds) * 1000,
                     percentile(seconds, 95) * 1000))

    try:
        push_latencies(api, store, images, "push-warm-up", 2)
        row(1, "-", "get-wait ready", get_wait_latencies(api, store, images, "push-get-wait", jobs))
        found = push_latencies(api, store, images, "push-alone", jobs)
        row(1, "-", "push queued", [q for q, _ in found if q is not None])
        row(1, "-", "push ready", [r for _, r in found])
        for others, owners in (("same owner", ["push-crowd"] * crowd),
                               ("other owners", [f"push-other-{i}" for i in range(crowd)])):
            listeners = Listeners(url, owners)
            try:
                found = push_latencies(api, store, images, "push-crowd", jobs)
            finally:
                listeners.close()
            row(1 + crowd, others, "push queued", [q for q, _ in found if q is not None])
            row(1 + crowd, others, "push ready", [r for _, r in found])
    finally:
        runner.terminate()
        runner.wait(30)
    return rows


def print_push_rows(rows: list[tuple], images: list[bytes]) -> None:
    print()
    print(f"Push: status change in the record to the message at the client, {len(images[0]) / 1e6:.1f} MB "
          f"JPEGs, one upload at a time, embedded stack, {os.cpu_count()} cores (shared, loaded)")
    print(f"{'sockets':>7} {'others':>12} {'client':>15} {'n':>4} {'median ms':>9} {'p95 ms':>7} {'ratio':>6}")
    reference = next(r[4] for r in rows if r[2] == "get-wait ready")
    for sockets, others, mode, n, median, p95 in rows:
        print(f"{sockets:>7} {others:>12} {mode:>15} {n:>4} {median:>9.1f} {p95:>7.1f} "
              f"{median / reference if reference else float('nan'):>6.2f}")
    crowd = max(r[0] for r in rows)
    print("queued: created_at to the message; ready: finished_at to the message (get-wait: to the held "
          f"GET's answer); ratio: median against get-wait ready's. {crowd} sockets: {crowd - 1} more connected, of "
          f"the uploader's owner (each change goes to all {crowd}) or of other owners. queued's n is below the "
          "uploads' when a queued message came after processing's and was dropped as older.")


def written_at(log: Path) -> dict[str, float]:
    """job id -> wall clock of the worker's `job_ready` line, logged as its write returned: at or
    just after the moment a reader could see `ready` (finished_at is just before it)."""
    written = {}
    for line in log.read_text().splitlines():
        if '"job_ready"' not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        stamp = datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00"))
        written[entry["job_id"]] = stamp.timestamp()
    return written


# -- where the cores went: the runner's processes, by part, and the whole machine ---------------
def cpu_seconds(runner_pid: int) -> dict[str, float]:
    """CPU seconds so far of each part of the stack (its processes and reaped children), of
    this process (the clients), and of the machine (every process, other users' included)."""
    tick = os.sysconf("SC_CLK_TCK")
    parts: dict[str, float] = {}

    def walk(pid: int, part: Optional[str]) -> None:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            children = [int(c) for task in Path(f"/proc/{pid}/task").iterdir()
                        for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            return  # it ended meanwhile
        if part is None:  # a child of the runner names its part; the runner's own are resizes
            part = ("moto (DynamoDB, S3, SQS)" if "moto_server" in cmdline else
                    "API (chalice local)" if "chalice_local" in cmdline else "resize children")
        fields = stat[stat.rindex(")") + 2:].split()
        parts[part] = parts.get(part, 0.0) + sum(int(f) for f in fields[11:15]) / tick  # u, s, cu, cs
        for child in children:
            walk(child, part if pid != runner_pid else None)

    walk(runner_pid, "runner (worker loop, sweeper)")
    own = os.times()
    parts["clients (this process)"] = own.user + own.system
    busy = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    parts["machine"] = (sum(busy) - busy[3] - busy[4]) / tick  # all but idle and iowait
    return parts


def cores_used(before: dict[str, float], after: dict[str, float], seconds: float) -> dict[str, float]:
    return {part: (after[part] - before.get(part, 0.0)) / seconds for part in after}


def lateness_rows(concurrency: int, found: dict[str, list[Sample]], written: dict[str, float]) -> list[tuple]:
    rows = []
    for mode in MODES:
        samples = found[mode]
        late = [s.known - s.finished for s in samples]
        after_write = [s.known - (written[s.job_id] - s.wall) for s in samples if s.job_id in written]
        rows.append((concurrency, mode, len(samples), statistics.median(s.finished for s in samples) * 1000,
                     statistics.median(s.known for s in samples) * 1000,
                     percentile([s.known for s in samples], 95) * 1000,
                     statistics.median(late) * 1000, percentile(late, 95) * 1000,
                     statistics.median(after_write) * 1000 if after_write else float("nan"),
                     percentile(after_write, 95) * 1000 if after_write else float("nan"),
                     statistics.median(s.known / s.finished for s in samples)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="batches per mode and concurrency")
    parser.add_argument("--concurrency", default="1,20")
    parser.add_argument("--push-jobs", type=int, default=30, help="uploads per push row (0: none)")
    parser.add_argument("--push-only", action="store_true", help="only the push rows")
    parser.add_argument("--size", default="4000x3000",
                        help="WxH of the photo-like JPEGs the timed rows upload (default 4000x3000: 12 MP)")
    parser.add_argument("--crowd", type=int, default=99,
                        help="sockets connected beside the push client's in the crowded rows (default 99)")
    args = parser.parse_args()
    width, height = (int(side) for side in args.size.split("x"))
    # A stopped benchmark stops its runner too (the finally below), not only itself.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # Push measures record -> message, which no image size changes: small photos keep it short.
    push_images = [photo_like(1200, 900, seed) for seed in range(3)]
    if args.push_only:
        return print_push_rows(push_rows(push_images, args.push_jobs, args.crowd), push_images)
    images = [photo_like(width, height, seed) for seed in range(3)]  # 12 MP by default, under 4 MiB
    log = Path(tempfile.mkdtemp(prefix="time-to-know-")) / "runner.log"
    runner, api, aws = start_runner(log)
    store = DynamoJobStore(DynamoTable(Settings().table, "us-east-1", aws))
    found, cores = {}, {}
    try:
        known_after("post-wait", api, "warm-up", images[0])
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            rounds = args.rounds if concurrency == 1 else max(1, args.rounds // 3)
            before, started = cpu_seconds(runner.pid), time.monotonic()
            found[concurrency] = run(api, store, images, concurrency, rounds)
            cores[concurrency] = cores_used(before, cpu_seconds(runner.pid), time.monotonic() - started)
    finally:
        runner.terminate()
        runner.wait(30)
    written = written_at(log)
    print(f"Time to know, {width * height / 1e6:.2g} MP JPEGs "
          f"({len(images[0]) / 1e6:.1f}-{max(map(len, images)) / 1e6:.1f} MB), "
          f"embedded stack, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"{'at once':>7} {'client':>10} {'n':>4} {'visible ms':>10} {'known ms':>9} {'p95':>7} "
          f"{'late ms':>8} {'p95':>7} {'after write':>11} {'p95':>7} {'ratio':>6}")
    for concurrency, found_at in found.items():
        for row in lateness_rows(concurrency, found_at, written):
            c, mode, n, visible, median, p95, late, late95, after_write, after95, ratio = row
            print(f"{c:>7} {mode:>10} {n:>4} {visible:>10.0f} {median:>9.0f} {p95:>7.0f} "
                  f"{late:>8.0f} {late95:>7.0f} {after_write:>11.0f} {after95:>7.0f} {ratio:>6.2f}")
    print("visible: upload start to `ready` stamped (finished_at, median); known: to the client holding it; "
          "late: known - visible per job; after write: known - the worker's job_ready line (its write "
          "returned), median and p95; ratio: median of known / visible per job. Target: get-wait and post-wait "
          "late <= 50 ms, ratio <= 1.25")
    print()
    parts = sorted({p for c in cores.values() for p in c if p != "machine"}, key=lambda p: -cores[max(cores)][p])
    print(f"{'cores busy, over the whole block':<34}" + "".join(f"{f'{c} at once':>12}" for c in cores))
    for part in parts + ["machine"]:
        print(f"{part:<34}" + "".join(f"{cores[c].get(part, 0.0):>12.2f}" for c in cores))
    print(f"(machine: every process on the {os.cpu_count()} cores, other users' included)")
    if args.push_jobs:
        print_push_rows(push_rows(push_images, args.push_jobs, args.crowd), push_images)


if __name__ == "__main__":
    main()
