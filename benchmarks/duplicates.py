"""A duplicate upload against a fresh one of the same photo: the worker's CPU per job and the
time from upload to ready, side by side in one run (issue 50).

    python benchmarks/duplicates.py [--size 4000x3000] [--runs 3]

On moto's server (started here), through the use cases as the API and the worker call them:
each round uploads the photo (a 12 MP JPEG by default, scikit-image's astronaut scaled up) as
new bytes (a fresh job: decode and every encode) with AVIF and WebP asked, then the very same
bytes again (a duplicate: S3 CopyObject of the first job's renditions). The worker decodes in
this process (DECODE_CPU_SECONDS=0), so time.process_time() holds all of its CPU, the SDK
calls' included. Upload to ready: POST /images' use case, the event taken from the queue, the
worker until ready (the queue's own delivery delay is not in it). Target: a duplicate's worker
CPU at most 0.1x a fresh job's. A report: the exit status is 0 even when a target is missed.
"""
from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# moto's server takes any credentials; never a real account's.
for _name, _value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}.items():
    os.environ[_name] = _value
os.environ.pop("AWS_PROFILE", None)


def photo(size: tuple[int, int], comment: bytes) -> bytes:
    """The same pixels with another comment: other bytes, so a fresh job."""
    from PIL import Image

    from tests.images import photo_image

    out = io.BytesIO()
    photo_image("astronaut.png").resize(size, Image.Resampling.LANCZOS).save(
        out, "JPEG", quality=90, comment=comment)
    return out.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="4000x3000")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    size = tuple(int(x) for x in args.size.split("x"))

    from chalicelib.bootstrap import build_use_cases
    from chalicelib.config import Settings
    from local.provision import provision
    from local.services import aws_client, start_moto, stop

    from benchmarks.stack import free_port, take_event

    port = free_port()
    moto = start_moto("127.0.0.1", port)
    try:
        endpoint = f"http://127.0.0.1:{port}"
        suffix = uuid.uuid4().hex[:8]
        settings = Settings(endpoint_url=endpoint, bucket=f"dup-{suffix}", table=f"dup-{suffix}",
                            events_queue_name=f"dup-{suffix}", decode_cpu_seconds=0,
                            max_upload_bytes=20 * 1024 * 1024, backlog_cache_seconds=3600)
        sqs = aws_client("sqs", settings.region, endpoint)
        stack = provision(settings, sqs, aws_client("s3", settings.region, endpoint),
                          aws_client("dynamodb", settings.region, endpoint))
        service = build_use_cases(settings)

        def job(data: bytes) -> tuple[float, float, str | None]:
            """(worker CPU s, upload to ready s, duplicate_of)."""
            started = time.monotonic()
            accepted = service.uploads.accept_upload("alice", data, formats=["avif", "webp"]).job
            event = take_event(sqs, stack.queue_url)
            cpu = time.process_time()
            assert service.worker.handle_object_created(event) == "ready"
            cpu = time.process_time() - cpu
            done = service.ctx.jobs.get(accepted.job_id)
            return cpu, time.monotonic() - started, done.duplicate_of

        job(photo((640, 480), b"warm-up"))  # libraries, clients, caches
        fresh, duplicate = [], []
        for run in range(args.runs):
            data = photo(size, f"run {run}".encode())
            fresh.append(job(data))
            duplicate.append(job(data))
            assert fresh[-1][2] is None and duplicate[-1][2] is not None
    finally:
        stop(moto)

    def median(rows, i):
        return statistics.median(r[i] for r in rows)

    f_cpu, d_cpu = median(fresh, 0), median(duplicate, 0)
    print(f"{size[0]}x{size[1]} JPEG ({len(data):,} bytes), AVIF and WebP asked, {args.runs} runs, medians:")
    print(f"  fresh job:     worker CPU {f_cpu * 1000:7.1f} ms, upload to ready {median(fresh, 1) * 1000:7.1f} ms")
    print(f"  duplicate job: worker CPU {d_cpu * 1000:7.1f} ms, upload to ready {median(duplicate, 1) * 1000:7.1f} ms")
    print(f"  duplicate / fresh: CPU {d_cpu / f_cpu:.3f}x (target: at most 0.1x), "
          f"upload to ready {median(duplicate, 1) / median(fresh, 1):.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
