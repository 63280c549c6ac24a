"""The list's latency (GET /image-jobs) at 10,000 jobs of one owner, on DynamoDB (moto's
server, or LocalStack with --endpoint), through the use case and the real store: the index
query and the page's BatchGetItem.

    python benchmarks/list_jobs.py [--endpoint http://127.0.0.1:4566] [--jobs 10000]

Side by side in one run: the first page of 20 and of 100, a page from a token deep in the
list, a page filtered by a status that a tenth of the jobs have, and every page of the
whole list; each the median and p95 of repeated reads, with the machine's load beside them
(moto answers slower than DynamoDB: compare the rows with each other, not with the cloud).
Other owners' jobs are in the table too, so the index is not one owner's alone.

Then the index's cost per 1,000 images, from what a stored job really puts in it: its keys'
bytes as the table holds them (the job's key, the owner, created_at, plus DynamoDB's 100 B
an index entry), 2 writes a job (its creation and its removal: the keys never change), the
retention's storage, and the read units of a page's query; beside infra/capacity.py's model.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.stack import free_port  # noqa: E402  (one for every benchmark)
# moto takes any credentials; never let this reach a real account.
for _name, _value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}.items():
    os.environ[_name] = _value
os.environ.pop("AWS_PROFILE", None)


def fill(store, owner: str, count: int, now: datetime) -> list:
    """`count` jobs of `owner`, one a millisecond apart (with microseconds), written 25 a
    BatchWriteItem (the quota's transaction would make this take minutes on moto)."""
    from chalicelib.domain.jobs import Job, JobStatus

    jobs = []
    for i in range(count):
        job_id = str(uuid.uuid4())
        at = now - timedelta(hours=6) + timedelta(milliseconds=i, microseconds=(i * 37) % 1000)
        status = JobStatus.READY if i % 10 == 0 else JobStatus.FAILED
        jobs.append(Job(job_id=job_id, owner=owner, status=status, created_at=at, updated_at=at,
                        expires_at=now + timedelta(days=7), original_key=f"originals/{job_id}",
                        metadata={"post_id": f"p-{i}"}))
    with store._model.batch_write() as writes:
        for job in jobs:
            writes.save(store._to_item(job))
    return jobs


def timed(call, repeat: int) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.95))]


def measure(endpoint: str, count: int, repeat: int, whole_list: bool) -> list[tuple[str, float, float, str]]:
    from chalicelib.adapters.dynamo_jobs import DynamoJobStore
    from chalicelib.adapters.dynamo_table import DynamoTable
    from chalicelib.config import Settings
    from chalicelib.domain.jobs import JobStatus
    from chalicelib.usecases.listing import ListJobs, ListQuery
    from local.provision import provision
    from local.services import aws_client
    from tests.fakes import fake_context

    suffix = uuid.uuid4().hex[:8]
    settings = Settings(endpoint_url=endpoint, bucket=f"list-{suffix}", table=f"list-{suffix}",
                        events_queue_name=f"list-{suffix}")
    clients = {n: aws_client(n, settings.region, endpoint) for n in ("sqs", "s3", "dynamodb")}
    provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"])
    # moto's query reads the whole index in Python for each call: give it time (the service's
    # own 5 s would time out under load, which is moto's cost, not DynamoDB's).
    store = DynamoJobStore(DynamoTable(settings.table, settings.region, endpoint, connection={
        "connect_timeout_seconds": 5, "read_timeout_seconds": 300, "max_retry_attempts": 0}))
    now = datetime.now(timezone.utc)
    started = time.perf_counter()
    jobs = fill(store, "alice", count, now)
    for other in ("bob", "carol"):
        fill(store, other, count // 10, now)
    filled_s = time.perf_counter() - started
    listing = ListJobs(fake_context(settings=settings, jobs=store, objects=None, clock=lambda: now))

    def page(query):
        return listing.page("alice", "alice", query)

    # The token the list gives half-way down (made as the list makes it, rather than by paging
    # 50 times through moto's slow queries).
    from chalicelib.domain.listing import ListCursor
    from chalicelib.usecases.listing import TOKEN_KEY, _Tokens

    newest_first = sorted(jobs, key=lambda j: (j.created_at, j.job_id), reverse=True)
    middle = newest_first[count // 2]
    tokens = _Tokens(lambda: listing._ctx.keys.key(TOKEN_KEY), "alice", "alice", ListQuery())
    token = tokens.make(ListCursor(middle.created_at, middle.job_id))
    deep = ListQuery(page_size=20, page_token=token)
    ready = ListQuery(page_size=20, statuses=frozenset({JobStatus.READY}))

    def whole():
        seen, token = 0, None
        while True:
            got = page(ListQuery(page_size=100, page_token=token))
            seen += len(got.jobs)
            token = got.next_page_token
            if token is None:
                assert seen == count, seen
                return

    rows = []
    for name, query in (("first page, 20", ListQuery(page_size=20)), ("first page, 100", ListQuery(page_size=100)),
                        ("page of 20 half-way (token)", deep), ("status=ready (1 in 10), 20", ready)):
        median, p95 = timed(lambda: page(query), repeat)
        rows.append((name, median, p95, "ms"))
    if whole_list:
        median, p95 = timed(whole, 1)
        rows.append((f"every page of {count:,}, 100 a page", median, p95, "ms"))
    rows.append(("filling the table", filled_s * 1000, filled_s * 1000, "ms (once)"))
    return rows, index_cost(clients["dynamodb"], settings.table, jobs[0])


COGNITO_SUBJECT = 36  # characters of a Cognito subject (a UUID), where the benchmark has "alice"


def index_cost(dynamodb, table: str, job) -> list[str]:
    """The owner index's cost per 1,000 images from a stored job's own key attributes."""
    from chalicelib.adapters.dynamo_jobs import JOB_PREFIX, OWNER_CREATED_INDEX
    from infra import capacity, prices

    item = dynamodb.get_item(TableName=table, Key={"pk": {"S": JOB_PREFIX + job.job_id}})["Item"]
    keys = {name: len(name.encode()) + len(item[name]["S"].encode()) for name in ("pk", "owner", "created_at")}
    entry = sum(keys.values()) + 100
    cloud_entry = entry + COGNITO_SUBJECT - len(job.owner)
    days = prices.retention_days() + 1  # TTL's lag, up to a day
    writes = 1000 * capacity.OWNER_INDEX_WRITES_PER_JOB * prices.DYNAMO_WRITE_UNIT
    storage = 1000 * cloud_entry / prices.GB * days / prices.MONTH_DAYS * (
        prices.DYNAMO_STORAGE_GB_MONTH + prices.DYNAMO_PITR_GB_MONTH)
    answer = dynamodb.query(TableName=table, IndexName=OWNER_CREATED_INDEX, Limit=21,
                            KeyConditionExpression="#o = :o", ExpressionAttributeNames={"#o": "owner"},
                            ExpressionAttributeValues={":o": {"S": job.owner}}, ReturnConsumedCapacity="TOTAL")
    returned = sum(sum(len(k.encode()) + len(v["S"].encode()) for k, v in got.items()) for got in answer["Items"])
    query_rru = 0.5 * -(-returned // 4096)  # eventually consistent, 4 KB a unit
    model = prices.owner_index_per_1000()
    return [
        f"an index entry, as stored: {entry} B ({', '.join(f'{k} {v}' for k, v in keys.items())}, +100); "
        f"with a Cognito subject {cloud_entry} B (model {capacity.OWNER_INDEX_ENTRY_BYTES} B)",
        f"per 1,000 images: writes {1000 * capacity.OWNER_INDEX_WRITES_PER_JOB:,} WRU ${writes:.5f}, "
        f"storage ${storage:.6f} ({days:g} days), together ${writes + storage:.5f} "
        f"(model ${model['writes'] + model['storage']:.5f})",
        f"a page of 20: the query of 21 keys returned {returned:,} B = {query_rru:g} RRU "
        f"(moto's ConsumedCapacity: {answer.get('ConsumedCapacity', {}).get('CapacityUnits', 'none')}), "
        f"+ 20 strongly consistent reads = {query_rru + 20:g} RRU, ${(query_rru + 20) * prices.DYNAMO_READ_UNIT * 1e6:.2f} "
        f"per million pages (model {capacity.list_page_rru():g} RRU)",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", help="moto's server (or LocalStack); default: start one")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--whole", action="store_true", help="also read every page once (slow on moto)")
    args = parser.parse_args(argv)
    process, endpoint = None, args.endpoint
    if endpoint is None:
        from local.services import start_moto

        port = free_port()
        process = start_moto("127.0.0.1", port)
        endpoint = f"http://127.0.0.1:{port}"
    try:
        load_before = Path("/proc/loadavg").read_text().split()[:3]
        rows, costs = measure(endpoint, args.jobs, args.repeat, args.whole)
        load_after = Path("/proc/loadavg").read_text().split()[:3]
    finally:
        if process is not None:
            from local.services import stop

            stop(process)
    print(f"the list at {args.jobs:,} jobs of one owner (+{args.jobs // 5:,} of two others), on {endpoint}")
    print(f"load average before {' '.join(load_before)}, after {' '.join(load_after)}")
    print(f"{'read':<36} {'median':>10} {'p95':>10}")
    first = rows[0][1]
    for name, median, p95, unit in rows:
        print(f"{name:<36} {median:>8.1f} {unit.split()[0]} {p95:>7.1f} {unit}   x{median / first:.2f} of the first page")
    print()
    print("the owner index's cost")
    for line in costs:
        print("  " + line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
