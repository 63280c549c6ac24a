"""How fast the sweeper removes expired jobs, on moto's server: one job at a time as it did
before (one DELETE per object, one DeleteItem per job, one thread), and as it does now
(every shard of the sharded index, a batch at once: DeleteObjects, BatchWriteItem), with one
thread and with the pool (SWEEP_THREADS). And how fast the orphan scan reads the stored
jobs: as it was (both prefixes listed, one GetItem per job and prefix, one thread) and as it
is now (BatchGetItem of 100, projected; 32 key ranges, one thread and a scheduled
run's pool, ORPHAN_SCAN_THREADS).

    python benchmarks/sweeper.py [--jobs 1000] [--threads 16] [--orphan-jobs 1000]
                                 [--orphan-threads 2] [--part expiry|orphans|both]
                                 [--endpoint URL] [--json]

Each variant gets its own table, bucket and `--jobs` expired jobs (three small objects
each, as a ready job has), then one timed sweep run. Without --endpoint it starts its own
moto server on a free port. moto is one Python process serving every call on this
machine's cores, so the pool's gain here is bounded by moto's own CPU; against AWS each
call waits on the network, which is what the pool overlaps (infra/capacity.py models that:
removal_seconds, sweeper_jobs_per_second).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.stack import free_port  # noqa: E402  (one for every benchmark)
for _name, _value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}.items():
    os.environ[_name] = _value  # moto takes any credentials; never reach a real account
os.environ.pop("AWS_PROFILE", None)


def _world(endpoint: str, threads: int, **overrides):
    from chalicelib.bootstrap import build_use_cases
    from chalicelib.config import Settings
    from local.provision import provision
    from local.services import aws_client

    suffix = uuid.uuid4().hex[:8]
    settings = Settings(endpoint_url=endpoint, bucket=f"sweep-{suffix}", table=f"sweep-{suffix}",
                        events_queue_name=f"sweep-{suffix}", sweep_threads=threads, sweep_budget_seconds=3600,
                        **overrides)
    clients = {n: aws_client(n, settings.region, endpoint) for n in ("sqs", "s3", "dynamodb")}
    provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"])
    return build_use_cases(settings), clients["s3"]


def _fill(svc, s3, jobs: int) -> None:
    """`jobs` ready jobs past their retention, each with its original and two renditions."""
    from chalicelib.domain.errors import ConditionFailed
    from chalicelib.domain.jobs import Job, JobStatus, Rendition

    ctx = svc.ctx
    now = ctx.clock()
    past = now - timedelta(days=8)
    for n in range(jobs):
        job_id = str(uuid.uuid4())
        # The renditions in the record, as a worker writes them: the sweep removes the keys
        # the record names.
        renditions = {name: Rendition(ctx.object_keys.rendition(job_id, 1, name), 1, 1) for name in ctx.rendition_names}
        job = Job(job_id=job_id, owner=f"owner-{n % 50}", status=JobStatus.READY, created_at=past,
                  updated_at=past, expires_at=past + timedelta(days=7), original_key=ctx.object_keys.original(job_id),
                  finished_at=past, sweep_at=past + timedelta(days=7), attempt=1, renditions=renditions)
        try:
            ctx.jobs.create(job, 1_000_000)
        except ConditionFailed:  # the SDK's retry of a create that had landed (a slow moto)
            assert ctx.jobs.get(job_id) is not None
        for key in (job.original_key, *(r.key for r in renditions.values())):
            s3.put_object(Bucket=ctx.settings.bucket, Key=key, Body=b"x")


def _one_at_a_time(sweeper) -> None:
    """The removal as it was: lifecycle.remove per job (3 DeleteObject, 1 DeleteItem)."""
    from collections import Counter

    from chalicelib.domain.vocabulary import SweepOutcome
    from chalicelib.usecases import lifecycle

    def expired(jobs, now):
        report = Counter()
        for job in jobs:
            if job.is_expired(now):
                lifecycle.remove(sweeper._ctx, job)
                report[SweepOutcome.EXPIRED_DELETED] += 1
        return report

    sweeper._expired = expired


def _ready(svc, s3, dynamodb, jobs: int) -> None:
    """`jobs` ready jobs within their retention, each with its original and two renditions.
    Written 25 a call, and the objects from a few threads: a loaded moto times out on a
    thousand transactions."""
    from concurrent.futures import ThreadPoolExecutor

    from chalicelib.domain.jobs import Job, JobStatus, Rendition
    from chalicelib.domain.renditions import RenditionName

    ctx = svc.ctx
    now = ctx.clock()
    made, keys = [], []
    for n in range(jobs):
        job_id = str(uuid.uuid4())
        display, thumb = (Rendition(ctx.object_keys.rendition(job_id, 1, name), 1, 1) for name in ("display", "thumb"))
        made.append(Job(job_id=job_id, owner=f"owner-{n}", status=JobStatus.READY, created_at=now, updated_at=now,
                        expires_at=now + timedelta(days=7), original_key=ctx.object_keys.original(job_id), attempt=1,
                        renditions={RenditionName.DISPLAY: display, RenditionName.THUMB: thumb}, finished_at=now))
        keys += [ctx.object_keys.original(job_id), display.key, thumb.key]
    table = ctx.settings.table
    for start in range(0, len(made), 25):
        items = [{"PutRequest": {"Item": ctx.jobs._to_item(job).serialize()}} for job in made[start:start + 25]]
        dynamodb.batch_write_item(RequestItems={table: items})
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda key: s3.put_object(Bucket=ctx.settings.bucket, Key=key, Body=b"x"), keys))


def _sequential_orphan_scan(ctx) -> int:
    """The orphan scan as it was: each prefix listed whole, each job read with one GetItem
    per prefix, each orphan deleted alone, one call after another."""
    import itertools

    from chalicelib.domain.jobs import JobObjects
    from chalicelib.usecases.orphans import OrphanScan

    needed = OrphanScan(ctx)._needed  # the same rules
    grace = ctx.clock() - timedelta(seconds=ctx.settings.orphan_grace_seconds)
    deleted = 0
    for prefix in (ctx.settings.originals_prefix, ctx.settings.renditions_prefix):
        for job_id, keys in itertools.groupby(ctx.objects.list_keys(prefix, grace), ctx.object_keys.job_id_of):
            job = ctx.jobs.get(job_id) if job_id is not None else None
            for key in keys:
                if not needed(None if job is None else JobObjects.of(job), key):
                    ctx.objects.delete(key)
                    deleted += 1
    return deleted


def run_orphans(endpoint: str, jobs: int, threads: int) -> dict:
    # Every run makes a whole pass: no grace, and a pass is always due.
    from local.services import aws_client

    svc, s3 = _world(endpoint, threads, orphan_grace_seconds=0, orphan_pass_seconds=0,
                     orphan_scan_timeout_seconds=7200, orphan_scan_budget_seconds=3600,
                     orphan_scan_interval_seconds=3600)
    _ready(svc, s3, aws_client("dynamodb", svc.ctx.settings.region, endpoint), jobs)
    time.sleep(1)  # S3's LastModified has whole seconds: every object now before the run's grace
    results = {}
    for name, pool in (("GetItem per job, 1 thread (before)", 0), ("BatchGetItem, 1 thread", 1),
                       (f"BatchGetItem, {threads} threads", threads)):
        ctx = svc.ctx
        started, cpu = time.perf_counter(), time.process_time()
        if pool == 0:
            deleted = _sequential_orphan_scan(ctx)
        else:
            from chalicelib.usecases.orphans import OrphanScan

            ctx.settings = dataclasses.replace(ctx.settings, orphan_scan_threads=pool)
            deleted = OrphanScan(ctx).run().get("orphans_deleted", 0)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        assert deleted == 0, deleted
        results[name] = {"jobs": jobs, "seconds": round(seconds, 2), "jobs_per_second": round(jobs / seconds, 1),
                         "client_cpu_ms_per_job": round(cpu / jobs * 1000, 3)}
    return results


def run(endpoint: str, jobs: int, threads: int) -> dict:
    from chalicelib.domain.vocabulary import SweepOutcome

    results = {}
    for name, pool, batched in (("one at a time, 1 thread (before)", 1, False),
                                ("batched, 1 thread", 1, True),
                                (f"batched, {threads} threads", threads, True)):
        svc, s3 = _world(endpoint, pool)
        sweeper = svc.sweeper
        started = time.perf_counter()
        assert sweeper.sweep() == {}
        idle = time.perf_counter() - started  # the run's queries alone: every shard, nothing due
        _fill(svc, s3, jobs)
        if not batched:
            _one_at_a_time(sweeper)
        started = time.perf_counter()
        report = sweeper.sweep(max_batches=10_000)
        seconds = time.perf_counter() - started
        left = s3.list_objects_v2(Bucket=svc.ctx.settings.bucket).get("KeyCount", 0)
        assert report.get(SweepOutcome.EXPIRED_DELETED) == jobs and left == 0, (report, left)
        results[name] = {"jobs": jobs, "seconds": round(seconds, 2), "jobs_per_second": round(jobs / seconds, 1),
                         "idle_run_seconds": round(idle, 2)}
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--orphan-jobs", type=int, default=1000)
    parser.add_argument("--orphan-threads", type=int, default=2)
    parser.add_argument("--part", choices=("expiry", "orphans", "both"), default="both")
    parser.add_argument("--endpoint")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    moto = None
    endpoint = args.endpoint
    if endpoint is None:
        from local.services import start_moto

        port = free_port()
        moto = start_moto("127.0.0.1", port)
        endpoint = f"http://127.0.0.1:{port}"
    results = {}
    try:
        if args.part in ("expiry", "both"):
            results["expiry"] = run(endpoint, args.jobs, args.threads)
        if args.part in ("orphans", "both"):
            results["orphan_scan"] = run_orphans(endpoint, args.orphan_jobs, args.orphan_threads)
    finally:
        if moto is not None:
            from local.services import stop

            stop(moto)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    if "expiry" in results:
        print(f"expired jobs removed by one sweep run on moto ({args.jobs} jobs, every shard of the index):")
        for name, r in results["expiry"].items():
            print(f"  {name:<36} {r['seconds']:>7.2f} s  {r['jobs_per_second']:>8.1f} jobs/s"
                  f"   (a run with nothing due: {r['idle_run_seconds']:.2f} s)")
    if "orphan_scan" in results:
        print(f"stored jobs read by one orphan-scan pass on moto ({args.orphan_jobs} ready jobs, 3 objects each):")
        for name, r in results["orphan_scan"].items():
            print(f"  {name:<36} {r['seconds']:>7.2f} s  {r['jobs_per_second']:>8.1f} jobs/s"
                  f"   (this process's CPU: {r['client_cpu_ms_per_job']:.2f} ms a job)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
