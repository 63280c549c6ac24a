"""Load benchmark: N uploads from C concurrent clients through HTTP against the local runner,
for each queue backend, then the promise checked and the figures printed side by side.

    python benchmarks/load.py [--uploads 300] [--clients 8] [--workers 2] [--backends sqs,amqp]
                              [--sizes 640x480,1600x1200,3000x2000,4000x3000]

Each backend gets a fresh `python -m local` (embedded moto, chalice local, the worker; for
amqp also the bridge and the machine's RabbitMQ). Times come from the jobs' own records
(created_at, finished_at) so that polling does not load the machine it measures.
"""
from __future__ import annotations

import argparse
import io
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.stack import free_port, percentile  # noqa: E402
from tests.images import unique  # noqa: E402

import requests  # noqa: E402
from PIL import Image, ImageFilter  # noqa: E402

from chalicelib.adapters.dynamo_jobs import DynamoJobStore  # noqa: E402
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.config import Settings  # noqa: E402
from chalicelib.http.auth import mint_token  # noqa: E402
from chalicelib.imaging import render  # noqa: E402

# The embedded stack takes any credentials; the runner sets the same defaults.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")

SIZES = [(640, 480), (1600, 1200), (3000, 2000), (4000, 3000)]  # up to 12 MP


def photo_like(width: int, height: int, seed: int, quality: int = 85) -> bytes:
    """Smooth gradients with fine noise: JPEG sizes like a phone photo's, under 4 MiB."""
    rnd = random.Random(seed)
    small = Image.new("RGB", (16, 12))
    small.putdata([tuple(rnd.randrange(256) for _ in range(3)) for _ in range(16 * 12)])
    base = small.resize((width, height), Image.BICUBIC)
    noise = Image.effect_noise((width, height), 18).convert("RGB")
    img = Image.blend(base, noise, 0.12).filter(ImageFilter.SMOOTH)
    out = io.BytesIO()
    img.save(out, "JPEG", quality=quality)
    return out.getvalue()


def single_image_rate(images: list[bytes]) -> float:
    """Renditions per second on one core, for this very mix, measured in this run."""
    settings = Settings()
    render.make_renditions(images[0], settings.max_pixels)  # warm-up
    started = time.perf_counter()
    for data in images:
        render.make_renditions(data, settings.max_pixels)
    return len(images) / (time.perf_counter() - started)


def run_backend(backend: str, images: list[bytes], uploads: int, clients: int, workers: int,
                deadline_s: float) -> dict:
    api_port, aws_port = free_port(), free_port()
    suffix = uuid.uuid4().hex[:8]
    # Every port free (the page's and the push gateway's too): a taken one stops the runner.
    env = dict(os.environ, API_PORT=str(api_port), AWS_PORT=str(aws_port), WEB_PORT=str(free_port()),
               PUSH_PORT=str(free_port()), PUSH_MANAGEMENT_PORT=str(free_port()), QUEUE_BACKEND=backend,
               WORKER_CONCURRENCY=str(workers), AMQP_EXCHANGE=f"bench-{suffix}",
               AMQP_QUEUE=f"bench-{suffix}", AMQP_ROUTING_KEY=f"bench-{suffix}", PYTHONUNBUFFERED="1")
    env.pop("AWS_ENDPOINT_URL", None)
    log_path = Path(f"/tmp/image-jobs-load-{backend}-{suffix}.log")
    log = open(log_path, "w")
    runner = subprocess.Popen([sys.executable, "-m", "local"], cwd=ROOT, env=env, stdout=log,
                              stderr=subprocess.STDOUT)
    try:
        started = time.monotonic()
        while "image-jobs ready" not in log_path.read_text():
            if runner.poll() is not None or time.monotonic() - started > 90:
                raise RuntimeError(f"runner did not start; see {log_path}")
            time.sleep(0.2)
        api = f"http://127.0.0.1:{api_port}"
        token = mint_token("bench", Settings().jwt_secret, 3600, int(time.time()))
        local = threading.local()

        def upload(i: int):
            session = getattr(local, "session", None) or requests.Session()
            local.session = session
            # Bytes of its own: an owner's exact duplicate is copied, not processed.
            data = unique(images[i % len(images)], f"load-{suffix}-{i}")
            t0 = time.perf_counter()
            r = session.post(f"{api}/api/v1/images", data=data, timeout=60,
                             headers={"Authorization": f"Bearer {token}", "Content-Type": "image/jpeg"})
            return r.status_code, (r.json().get("job_id") if r.status_code == 202 else None), \
                time.perf_counter() - t0

        with ThreadPoolExecutor(clients) as pool:
            answers = list(pool.map(upload, range(uploads)))
        accepted = [job_id for status, job_id, _ in answers if status == 202]
        upload_latencies = [lat for status, _, lat in answers if status == 202]

        store = DynamoJobStore(DynamoTable(Settings().table, "us-east-1", f"http://127.0.0.1:{aws_port}"))
        jobs = {}
        wait_until = time.monotonic() + deadline_s
        pending = set(accepted)
        while pending and time.monotonic() < wait_until:
            for job_id in list(pending):
                job = store.get(job_id)
                if job is not None and job.status.terminal:
                    jobs[job_id] = job
                    pending.discard(job_id)
            if pending:
                time.sleep(0.5)
        ready = [j for j in jobs.values() if j.status.value == "ready"]
        failed = [j for j in jobs.values() if j.status.value != "ready"]
        # Duplicates: a second finished result for a job, or a job whose stored renditions are
        # not exactly the set its record names (every size and format it was made in).
        s3 = __import__("boto3").client("s3", endpoint_url=f"http://127.0.0.1:{aws_port}",
                                        region_name="us-east-1")
        keys = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=Settings().bucket,
                                                                   Prefix="renditions/"):
            keys += [o["Key"] for o in page.get("Contents", [])]
        sets = {}
        for key in keys:
            sets.setdefault(key.split("/")[1], set()).add(key)
        text = log_path.read_text()
        ready_lines = {}
        for line in text.splitlines():
            if '"event": "job_ready"' in line:
                job_id = line.split('"job_id": "')[1].split('"')[0]
                ready_lines[job_id] = ready_lines.get(job_id, 0) + 1
        duplicates = sum(n - 1 for n in ready_lines.values() if n > 1)
        duplicates += sum(1 for j in ready
                          if sets.get(j.job_id, set()) != {k for r in j.renditions.values() for k in r.keys})
        to_ready = [(j.finished_at - j.created_at).total_seconds() for j in ready]
        span = (max(j.finished_at for j in ready) - min(j.created_at for j in ready)).total_seconds() \
            if ready else float("nan")
        return {
            "backend": backend, "uploads": uploads, "accepted": len(accepted), "ready": len(ready),
            "failed": len(failed), "lost": len(pending), "duplicates": duplicates,
            "upload_p50": percentile(upload_latencies, 50) * 1000,
            "upload_p99": percentile(upload_latencies, 99) * 1000,
            "ready_p50": percentile(to_ready, 50), "ready_p99": percentile(to_ready, 99),
            "throughput": len(ready) / span if ready else 0.0, "log": str(log_path),
        }
    finally:
        runner.terminate()
        try:
            runner.wait(60)
        except subprocess.TimeoutExpired:
            runner.kill()
        log.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--uploads", type=int, default=300)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--backends", default="sqs,amqp")
    parser.add_argument("--deadline", type=float, default=600, help="seconds for all jobs to finish")
    parser.add_argument("--sizes", default=",".join(f"{w}x{h}" for w, h in SIZES),
                        help="the image mix, WxH,... (two photos of each; default %(default)s)")
    args = parser.parse_args()

    mix = [tuple(int(side) for side in size.split("x")) for size in args.sizes.split(",")]
    images = [photo_like(w, h, seed) for seed, (w, h) in enumerate(mix * 2)]
    sizes = ", ".join(f"{w}x{h}" for w, h in mix)
    print(f"image mix: {sizes} (photo-like JPEG, {min(map(len, images)) // 1024}-"
          f"{max(map(len, images)) // 1024} KiB); {args.uploads} uploads, {args.clients} clients, "
          f"{args.workers} workers, {os.cpu_count()} cores")
    rate = single_image_rate(images)
    print(f"single-image rate (one core, this mix, in-process): {rate:.2f} images/s")
    rows = []
    for backend in args.backends.split(","):
        # One worker first: the same stack's own per-worker rate, for the scaling figure.
        one = run_backend(backend, images, args.uploads, args.clients, 1, args.deadline)
        many = run_backend(backend, images, args.uploads, args.clients, args.workers, args.deadline)
        one["workers"], many["workers"] = 1, args.workers
        many["scaling"] = many["throughput"] / (args.workers * one["throughput"]) if one["throughput"] else 0
        one["scaling"] = 1.0
        rows += [one, many]

    head = ("backend", "workers", "accepted", "ready", "failed", "lost", "dup", "up p50 ms",
            "up p99 ms", "ready p50 s", "ready p99 s", "img/s", "efficiency", "scaling")
    print()
    print("  ".join(f"{h:>11}" for h in head))
    missed = []
    for r in rows:
        efficiency = r["throughput"] / (r["workers"] * rate)
        print("  ".join(f"{v:>11}" for v in (
            r["backend"], r["workers"], r["accepted"], r["ready"], r["failed"], r["lost"], r["duplicates"],
            f"{r['upload_p50']:.0f}", f"{r['upload_p99']:.0f}", f"{r['ready_p50']:.2f}",
            f"{r['ready_p99']:.2f}", f"{r['throughput']:.2f}", f"{efficiency:.2f}", f"{r['scaling']:.2f}")))
        if r["lost"]:
            missed.append(f"{r['backend']}: {r['lost']} lost")
        if r["duplicates"]:
            missed.append(f"{r['backend']}: {r['duplicates']} duplicates")
        if r["workers"] == args.workers and efficiency < 0.8:
            missed.append(f"{r['backend']}: efficiency {efficiency:.2f} < 0.8")
    print()
    print("efficiency = img/s / (workers x single-image rate of the renditions step on one core);")
    print("scaling    = img/s / (workers x img/s of the same stack with one worker), same run.")
    print("The API (chalice local) and the emulator (moto) share these cores with the workers.")
    print()
    for r in rows:
        print(f"runner log ({r['backend']}): {r['log']}")
    for line in missed:
        print(f"TARGET MISSED: {line}")
    if not missed:
        print("targets met: 0 lost, 0 duplicates, efficiency >= 0.8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
