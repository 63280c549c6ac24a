"""How long an upload takes to give up when a dependency hangs, before and after the time
budget (chalicelib/runtime/deadline.py), against the API function's 25 s.

    .venv/bin/python benchmarks/time_budget.py

moto's server plays the services that answer; a port that accepts connections and never
answers plays the one that hangs. "Before" builds the clients as the code did before issue
10 (S3 and SQS: 2 s connect, 10 s read, 3 attempts; PynamoDB: 2 s, 5 s, 2 retries) with no
budget; "after" is bootstrap.py's clients inside the API's invocation budget. Takes a few
minutes: every row waits for real timeouts.

    .venv/bin/python benchmarks/time_budget.py --short

CI's run (tests/bench): the "after" rows only, with a 6 s budget: a few seconds a row.
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
for name, value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                    "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1"}.items():
    os.environ.setdefault(name, value)

API_TIMEOUT = 25


def blackhole() -> int:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(128)
    held = []

    def accept():
        while True:
            conn, _ = server.accept()
            held.append(conn)  # read nothing, answer nothing

    threading.Thread(target=accept, daemon=True).start()
    return server.getsockname()[1]


def old_use_cases(settings):
    """The composition as it was before the time budget."""
    import boto3
    from botocore.config import Config

    from chalicelib.adapters.dynamo_jobs import DynamoJobStore
    from chalicelib.adapters.dynamo_table import DynamoTable
    from chalicelib.adapters.s3_store import S3Store
    from chalicelib.adapters.sqs_queue import SqsEventsQueue
    from chalicelib.usecases import UseCases
    from tests.fakes import fake_context

    old = dict(connect_timeout=2, read_timeout=10, retries={"mode": "standard", "max_attempts": 3})
    s3 = boto3.session.Session().client("s3", endpoint_url=settings.storage_endpoint_url,
                                        config=Config(s3={"addressing_style": "path"}, **old))
    sqs = boto3.session.Session().client("sqs", endpoint_url=settings.endpoint_url, config=Config(**old))
    jobs = DynamoJobStore(DynamoTable(settings.table, settings.region, settings.endpoint_url,
                                      connection={"connect_timeout_seconds": 2, "read_timeout_seconds": 5,
                                                  "max_retry_attempts": 2}))
    queue = SqsEventsQueue(sqs, settings.events_queue_name)
    return UseCases(fake_context(settings=settings, jobs=jobs, objects=S3Store(s3, settings.bucket),
                                 publisher=queue, backlog=queue))


def measure(svc, budgeted: bool, timeout: float) -> tuple[float, str]:
    from chalicelib.domain.errors import DomainError, TransientError
    from chalicelib.runtime import deadline
    from tests.images import jpeg

    key = uuid.uuid4().hex
    started = time.monotonic()
    try:
        if budgeted:
            with deadline.invocation(timeout, deadline.SdkLimits.for_settings(svc.ctx.settings)):
                svc.uploads.accept_upload("bench", jpeg(), key)
        else:
            svc.uploads.accept_upload("bench", jpeg(), key)
        answer = "202"
    except (DomainError, TransientError) as error:
        answer = f"503 {getattr(error, 'code', 'storage_unavailable')}"
    return time.monotonic() - started, answer


def compensated(svc) -> str:
    """Did the failed upload's job end failed and its key go free?"""
    from chalicelib.domain.errors import TransientError
    from chalicelib.domain.jobs import DUE_SHARDS, JobStatus

    later = svc.ctx.clock() + svc.ctx.retention * 2

    def shard_due(status, shard):
        # A check, not a timing: a query the loaded emulator let time out is asked again.
        for attempt in range(4):
            try:
                return svc.ctx.jobs.due(status, later, 100, shard=shard)
            except TransientError:
                if attempt == 3:
                    raise
                time.sleep(1)

    def due(status):  # the due index is sharded: every shard's due jobs
        with ThreadPoolExecutor(4) as pool:
            found = pool.map(lambda shard: shard_due(status, shard), range(DUE_SHARDS))
            return [job for jobs in found for job in jobs]

    if due(JobStatus.FAILED):
        return "yes: job failed, key free"
    if due(JobStatus.QUEUED):
        return "no: job left queued, key held"
    return "nothing to undo: no job was made"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--short", action="store_true", help="the budgeted rows only, a 6 s budget")
    args = parser.parse_args()
    timeout = 6 if args.short else API_TIMEOUT
    codes = (("after", True),) if args.short else (("before", False), ("after", True))
    from chalicelib.bootstrap import build_use_cases
    from chalicelib.config import Settings
    from local.provision import provision
    from local.services import aws_client, start_moto, stop
    from tests.conftest import free_port

    port = free_port()
    moto = start_moto("127.0.0.1", port)
    endpoint = f"http://127.0.0.1:{port}"
    hole = f"http://127.0.0.1:{blackhole()}"
    rows = []
    try:
        for what, overrides in (("S3 hangs (the original's put)", {"s3_endpoint_url": hole}),
                                ("DynamoDB and SQS hang", {"endpoint_url": hole, "s3_endpoint_url": endpoint})):
            for label, budgeted in codes:
                suffix = uuid.uuid4().hex[:8]
                settings = Settings(endpoint_url=endpoint, bucket=f"b-{suffix}", table=f"t-{suffix}",
                                    events_queue_name=f"q-{suffix}", api_timeout_seconds=timeout)
                clients = {n: aws_client(n, settings.region, endpoint) for n in ("sqs", "s3", "dynamodb")}
                provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"])
                settings = Settings(**{**settings.__dict__, **overrides})
                svc = build_use_cases(settings) if budgeted else old_use_cases(settings)
                elapsed, answer = measure(svc, budgeted, timeout)
                after = Settings(**{**settings.__dict__, "s3_endpoint_url": endpoint, "endpoint_url": endpoint})
                done = compensated(build_use_cases(after))
                killed = "yes" if elapsed >= timeout else "no"
                rows.append((what, label, f"{elapsed:.1f}", answer if elapsed < timeout else "none (killed)",
                             killed, done if elapsed < timeout else "no (killed first)"))
                print(f"  {what} / {label}: {elapsed:.1f} s", file=sys.stderr, flush=True)
    finally:
        stop(moto)
    print(f"| dependency | code | upload gave up after (s) | answer | Lambda ({timeout} s) would kill it | compensation ran |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
