"""What one image costs in AWS calls, DynamoDB capacity units and log bytes, counted by
running the real service against moto's server and recording every request it sends.

    python benchmarks/calls_per_job.py [--endpoint http://127.0.0.1:4566] [--json]

One image, as docs/deploy.md and docs/scale.md count it: an upload through POST /images
(without and with an Idempotency-Key), two polls, the worker's run from the S3 event to
`ready`, and the sweeper removing it once its retention is over. Without --endpoint it
starts its own moto server on a free port.

Capacity units follow DynamoDB's published rules: an item's size is the sum of its attribute
names and values; a write costs ceil(size / 1 KB) write units, the larger of the item's
size before and after (twice that inside a transaction); a strongly consistent read costs
ceil(size / 4 KB) read units, an eventually consistent one half that. The due index (`sweep_sharded`)
projects every attribute, so each base write that moves an item in or out of the index, or
changes its key, costs index writes too: a delete of the old entry and a put of the new one.
infra/capacity.py keeps these figures as the model's inputs; a test re-measures them.
"""
from __future__ import annotations

import argparse
import io
import json
import math
import os
import sys
from collections import Counter
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.stack import free_port  # noqa: E402  (one for every benchmark)
# moto takes any credentials; never let this reach a real account.
for _name, _value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}.items():
    os.environ[_name] = _value
os.environ.pop("AWS_PROFILE", None)

import botocore.client  # noqa: E402

KB = 1024
PHASES = ("upload", "upload_with_key", "direct_upload", "direct_worker", "poll", "worker",
          "duplicate_worker", "expiry")
# What a sweep run costs once, however many jobs it handles: a query per status, a summary line.
# The sweeper also reports the queues' depths once a run: their calls and metric lines.
RUN_CALLS = {"dynamodb:Query", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}
RUN_EVENTS = {"sweep_done", "metric:QueueDepth", "metric:DeadLetters", "metric:Redrives"}


def _event(line: str) -> str:
    """A log line's event; a metric line's first metric ("metric:JobsReady")."""
    record = json.loads(line)
    if "_aws" in record:
        return "metric:" + record["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"]
    return record["event"]


# -- DynamoDB's size rules -------------------------------------------------------------------


def _number_size(text: str) -> int:
    digits = text.lstrip("-").replace(".", "").lstrip("0") or "0"
    return math.ceil(len(digits.rstrip("0") or "0") / 2) + 1


def value_size(value: dict) -> int:
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        return _number_size(str(inner))
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(v) for k, v in inner.items())
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in inner)
    if kind in ("SS", "BS"):
        return sum(len(v.encode() if isinstance(v, str) else v) for v in inner)
    if kind == "NS":
        return sum(_number_size(str(v)) for v in inner)
    raise ValueError(f"unknown DynamoDB type {kind}")


def item_size(item: dict | None) -> int:
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / KB))


# -- recording ---------------------------------------------------------------------------------


_LOGS = io.StringIO()


class Recorder:
    """Wraps botocore's one door to AWS; the calls go through unchanged."""

    def __init__(self, table: str, index_keys: tuple[str, str]):
        self.table = table
        self.hash_key, self.range_key = index_keys
        self.calls: Counter = Counter()
        self.wcu = 0
        self.rcu = Decimal(0)
        self.query_rcu = Decimal(0)  # the sweeper's queries: per run, not per job
        self.index_writes: Counter = Counter()  # ("put"|"delete", status) -> writes
        self.index_wcu = 0
        self.sizes: dict[str, int] = {}  # job status -> item size after a write
        self._original = botocore.client.BaseClient._make_api_call

    def install(self) -> None:
        recorder = self

        def recording(client, operation, params):
            return recorder._call(client, operation, params)

        botocore.client.BaseClient._make_api_call = recording

    def uninstall(self) -> None:
        botocore.client.BaseClient._make_api_call = self._original

    def reset(self) -> None:
        self.calls.clear()
        self.index_writes.clear()
        self.wcu = self.index_wcu = 0
        self.rcu = self.query_rcu = Decimal(0)

    def _get(self, client, key: dict) -> dict | None:
        answer = self._original(client, "GetItem", {"TableName": self.table, "Key": key,
                                                    "ConsistentRead": True})
        return answer.get("Item")

    def _call(self, client, operation, params):
        service = client.meta.service_model.service_name
        self.calls[f"{service}:{operation}"] += 1
        if service != "dynamodb":
            return self._original(client, operation, params)
        writes = _writes(operation, params)
        before = [self._get(client, key) for key, _ in writes]
        answer = self._original(client, operation, params)
        after = [self._get(client, key) for key, _ in writes]
        for (key, factor), old, new in zip(writes, before, after):
            self.wcu += factor * write_units(max(item_size(old), item_size(new)))
            self._index(old, new)
            if new and "status" in new:
                self.sizes[new["status"]["S"]] = item_size(new)
        self._reads(operation, params, answer)
        return answer

    def _entry(self, item: dict | None):
        if item and self.hash_key in item and self.range_key in item:
            # Counted per status: `queued#07` is the queued key's 8th shard.
            return item[self.hash_key]["S"].split("#")[0], item[self.range_key]["S"]
        return None

    def _index(self, old: dict | None, new: dict | None) -> None:
        was, now = self._entry(old), self._entry(new)
        if was is not None and was == now:
            self.index_writes[("update", now[0])] += 1
            self.index_wcu += write_units(max(item_size(old), item_size(new)))
            return
        if was is not None:
            self.index_writes[("delete", was[0])] += 1
            self.index_wcu += write_units(item_size(old))
        if now is not None:
            self.index_writes[("put", now[0])] += 1
            self.index_wcu += write_units(item_size(new))

    def _reads(self, operation: str, params: dict, answer: dict) -> None:
        consistent = params.get("ConsistentRead", False)
        if operation == "GetItem":
            units = Decimal(max(1, math.ceil(item_size(answer.get("Item")) / (4 * KB))))
        elif operation == "BatchGetItem":
            # A unit a key asked for (a missing item's too, as GetItem's), more for a big item.
            for table, asked in params["RequestItems"].items():
                found = answer.get("Responses", {}).get(table, [])
                units = len(asked["Keys"]) - len(found) + sum(
                    max(1, math.ceil(item_size(item) / (4 * KB))) for item in found)
                self.rcu += Decimal(units) if asked.get("ConsistentRead") else Decimal(units) / 2
            return
        elif operation in ("Query", "Scan"):
            total = sum(item_size(item) for item in answer.get("Items", []))
            units = Decimal(max(1, math.ceil(total / (4 * KB))))
            self.query_rcu += units if consistent else units / 2
            return
        else:
            return
        self.rcu += units if consistent else units / 2


def _writes(operation: str, params: dict) -> list[tuple[dict, int]]:
    """(primary key, capacity factor) of each item a request writes."""
    if operation == "PutItem":
        return [({"pk": params["Item"]["pk"]}, 1)]
    if operation in ("UpdateItem", "DeleteItem"):
        return [(params["Key"], 1)]
    if operation == "BatchWriteItem":
        return [({"pk": (body.get("PutRequest", {}).get("Item") or body["DeleteRequest"]["Key"])["pk"]}, 1)
                for requests in params["RequestItems"].values() for body in requests]
    if operation == "TransactWriteItems":
        keys = []
        for entry in params["TransactItems"]:
            ((kind, body),) = entry.items()
            if kind == "Put":
                keys.append(({"pk": body["Item"]["pk"]}, 2))
            elif kind in ("Update", "Delete"):
                keys.append((body["Key"], 2))
        return keys
    return []


# -- one image through the service ---------------------------------------------------------------


def photo(width: int = 1600, height: int = 1200) -> bytes:
    from PIL import Image, ImageFilter

    noise = Image.effect_noise((width, height), 30).convert("RGB").filter(ImageFilter.SMOOTH)
    out = io.BytesIO()
    noise.save(out, "JPEG", quality=85)
    return out.getvalue()


def measure(endpoint: str) -> dict:
    """Runs one image through every phase; returns each phase's calls, units and logs."""
    import uuid

    import requests

    from chalicelib.adapters.dynamo_jobs import DUE_INDEX
    from chalicelib.bootstrap import build_use_cases
    from chalicelib.config import Settings
    from chalicelib.domain.vocabulary import SweepOutcome
    from chalicelib.runtime.metrics import EmfMetrics
    from local.provision import load_template, provision
    from local.services import aws_client

    suffix = uuid.uuid4().hex[:8]
    # The uploads' backlog check reads the queue's depth at most every few seconds per API
    # process, not per upload: read once, at the warm-up, however slow this machine is.
    settings = Settings(endpoint_url=endpoint, bucket=f"calls-{suffix}", table=f"calls-{suffix}",
                        events_queue_name=f"calls-{suffix}", backlog_cache_seconds=3600)
    clients = {n: aws_client(n, settings.region, endpoint) for n in ("sqs", "s3", "dynamodb")}
    stack = provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"])
    (table,) = [r["Properties"] for r in load_template()["Resources"].values()
                if r["Type"] == "AWS::DynamoDB::Table"]
    (index,) = [i for i in table["GlobalSecondaryIndexes"] if i["IndexName"] == DUE_INDEX]
    index_keys = tuple(k["AttributeName"] for k in index["KeySchema"])

    logs = _LOGS
    service = build_use_cases(settings)
    # Metric (EMF) lines are written to stdout as they happen: log lines in the cloud too.
    service.ctx.metrics = EmfMetrics(settings.metrics_service, write=lambda line: logs.write(line + "\n"))
    recorder = Recorder(settings.table, index_keys)
    data = photo()
    results = {}

    def phase(name, action):
        recorder.reset()
        logs.seek(0)
        logs.truncate()
        recorder.install()
        try:
            outcome = action()
        finally:
            recorder.uninstall()
        lines = [line for line in logs.getvalue().splitlines() if line.strip()]
        run_lines = [line for line in lines if _event(line) in RUN_EVENTS]
        lines = [line for line in lines if line not in run_lines]
        queries = {op: recorder.calls.pop(op) for op in list(recorder.calls) if op in RUN_CALLS}
        results[name] = {
            "calls": dict(sorted(recorder.calls.items())),
            "wcu": recorder.wcu,
            "index_wcu": recorder.index_wcu,
            "index_writes": {f"{op}:{status}": n for (op, status), n in sorted(recorder.index_writes.items())},
            "rcu": float(recorder.rcu),
            "log_lines": len(lines),
            "log_bytes": sum(len(line.encode()) + 1 for line in lines),
            "log_events": sorted(_event(line) for line in lines),
        }
        if queries or run_lines:
            results[name]["per_run"] = {
                "calls": queries, "rcu": float(recorder.query_rcu), "log_lines": len(run_lines),
                "log_bytes": sum(len(line.encode()) + 1 for line in run_lines)}
        return outcome

    def take_event():
        from benchmarks.stack import take_event as taken

        return taken(clients["sqs"], stack.queue_url)

    # A first upload reads the queue's depth (then cached for a few seconds) and its URL: a
    # warm API's upload does neither. Then a job with an Idempotency-Key, only for its upload's
    # cost, and the plain one, end to end.
    warm = service.uploads.accept_upload("alice", data).job
    take_event()
    keyed = phase("upload_with_key", lambda: service.uploads.accept_upload("alice", data, "key-1").job)
    take_event()
    job = phase("upload", lambda: service.uploads.accept_upload("alice", data).job)
    event = take_event()
    phase("poll", lambda: service.manage.get_job("alice", job.job_id))
    assert phase("worker", lambda: service.worker.handle_object_created(event)) == "ready"
    ready = service.manage.get_job("alice", job.job_id)
    phase("poll", lambda: (service.manage.get_job("alice", job.job_id), service.manage.urls(ready)))
    # POST /uploads: the client then sends the file to S3 itself (one S3 POST, not ours).
    # Other bytes: the same ones would be a duplicate of the ready job (measured below).
    fresh = photo()
    direct = phase("direct_upload",
                   lambda: service.direct_uploads.create_direct_upload("alice", "image/jpeg", len(fresh)))
    form = direct.upload
    answer = requests.post(form.url, data=form.fields, files={"file": ("photo.jpg", fresh)}, timeout=30)
    answer.raise_for_status()
    event = take_event()
    assert phase("direct_worker", lambda: service.worker.handle_object_created(event)) == "ready"
    # The same owner's same bytes again: the worker copies the ready job's renditions.
    twin = service.uploads.accept_upload("alice", data).job
    event = take_event()
    assert phase("duplicate_worker", lambda: service.worker.handle_object_created(event)) == "ready"
    # The sweeper, once the retention is over: every due job of every status, in one run.
    for other in (warm, keyed, direct.job, twin):  # one expiry is measured: the plain job's
        service.manage.delete("alice", other.job_id)
    later = ready.expires_at + timedelta(minutes=1)
    service.ctx.clock = lambda: later
    report = phase("expiry", service.sweeper.sweep)
    assert report.get(SweepOutcome.EXPIRED_DELETED) == 1, report
    results["item_bytes"] = dict(sorted(recorder.sizes.items()))
    return results


def per_image(results: dict, polls: int = 2) -> dict:
    """One image: upload, `polls` polls, the worker, the expiry."""
    total: Counter = Counter()
    for name, times in (("upload", 1), ("poll", polls), ("worker", 1), ("expiry", 1)):
        for key, n in results[name]["calls"].items():
            total[key] += n * times
        for field in ("wcu", "index_wcu", "rcu", "log_lines", "log_bytes"):
            total[field] += results[name][field] * times
    return dict(total)


def _table(results: dict) -> str:
    operations = sorted({op for name in PHASES for op in results[name]["calls"]})
    head = ["phase", *operations, "WCU", "index WCU", "RCU", "log lines", "log bytes"]
    rows = [head]
    for name in PHASES:
        r = results[name]
        rows.append([name, *(str(r["calls"].get(op, 0)) for op in operations), str(r["wcu"]),
                     str(r["index_wcu"]), f"{r['rcu']:g}", str(r["log_lines"]), str(r["log_bytes"])])
    whole = per_image(results)
    rows.append(["per image*", *(str(whole.get(op, 0)) for op in operations), str(whole["wcu"]),
                 str(whole["index_wcu"]), f"{whole['rcu']:g}", str(whole["log_lines"]),
                 str(whole["log_bytes"])])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(row, widths)) for row in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", help="moto's server (or LocalStack); default: start one")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    args = parser.parse_args(argv)
    process = None
    endpoint = args.endpoint
    if endpoint is None:
        from local.services import start_moto

        port = free_port()
        process = start_moto("127.0.0.1", port)
        endpoint = f"http://127.0.0.1:{port}"
    # The service's log lines (structlog prints to whatever sys.stdout is) are what measure()
    # counts: they go to its buffer, never to this script's output.
    real_stdout, sys.stdout = sys.stdout, _LOGS
    try:
        results = measure(endpoint)
    finally:
        sys.stdout = real_stdout
        if process is not None:
            from local.services import stop

            stop(process)
    if args.json:
        print(json.dumps(results, indent=2, sort_keys=True))
        return 0
    print(_table(results))
    print()
    print("* per image = upload + 2 polls + worker + expiry; with an Idempotency-Key the keyed upload")
    print("  replaces the plain one; through POST /uploads direct_upload and direct_worker replace")
    print("  upload and worker, plus the client's own POST to S3. Index writes by status:")
    for name in PHASES:
        print(f"  {name:>16}: {results[name]['index_writes']}  logs: {results[name]['log_events']}")
    run = results["expiry"]["per_run"]
    print(f"  a sweep run, however many jobs: {run['calls']}, {run['rcu']:g} RCU, "
          f"{run['log_lines']} log line ({run['log_bytes']} bytes)")
    print(f"  job item bytes by status: {results['item_bytes']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
