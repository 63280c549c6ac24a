"""One owner's accepted request rate across several API processes: this process's token
bucket alone (before) against the bucket shared through the table (now), side by side.

    python benchmarks/rate_limit.py [--processes 4] [--seconds 3] [--endpoint URL] [--json]

Each API process is its own Python process with the service's composition root
(build_use_cases) on one DynamoDB table on moto's server, calling the admission use case
(Admission.check_rate, what every route calls first) for one owner as fast as it can; one
more process sends another owner's requests at a steady 2 a second, within its rate. All
start at once and stop after --seconds. The limit is what one token bucket allows in that
time: burst + rate x seconds. Without --endpoint it starts its own moto server.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.stack import free_port  # noqa: E402  (one for every benchmark)
for _name, _value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}.items():
    os.environ[_name] = _value  # moto takes any credentials; never reach a real account
os.environ.pop("AWS_PROFILE", None)

MODES = ("per_process", "shared")
OTHER_OWNER_RATE = 2.0  # requests a second from the owner who must still be served


def _settings(endpoint: str, table: str, rate: int, burst: int):
    from chalicelib.config import Settings

    return Settings(endpoint_url=endpoint, table=table, bucket=table, events_queue_name=table,
                    owner_requests_per_second=rate, owner_burst=burst)


class _Counted:
    """The rate store, counting its writes: each is a write unit, a failed condition too."""

    def __init__(self, rates):
        self._rates, self.writes, self.reads = rates, 0, 0

    def take_from_full(self, *args):
        self.writes += 1
        return self._rates.take_from_full(*args)

    def take(self, *args):
        self.writes += 1
        return self._rates.take(*args)

    def full_at(self, owner):
        self.reads += 1
        return self._rates.full_at(owner)


class _Unshared:
    """No shared store: every call finds it down, so each process keeps its own bucket."""

    def __getattr__(self, name):
        from chalicelib.domain.errors import TransientError

        def down(*_):
            raise TransientError("no shared rate store")
        return down


def child(endpoint: str, table: str, rate: int, burst: int, mode: str, owner: str,
          seconds: float, every: float, report) -> dict:
    """One API process: once ready, says so on `report` and reads the start time from stdin;
    then check_rate for `owner` for `seconds`, every `every` seconds (0: back to back)."""
    from chalicelib.bootstrap import build_use_cases
    from chalicelib.domain.errors import RateLimited
    from chalicelib.usecases.admission import Admission

    ctx = build_use_cases(_settings(endpoint, table, rate, burst)).ctx
    counted = _Counted(ctx.rates)
    ctx = dataclasses.replace(ctx, rates=counted if mode == "shared" else _Unshared())
    admission = Admission(ctx)
    admission.check_rate(f"warm-{uuid.uuid4().hex}")  # the connection, before the clock starts
    counted.writes = counted.reads = 0
    accepted = refused = 0
    report.write("ready\n")
    report.flush()
    start = float(sys.stdin.readline())
    time.sleep(max(0.0, start - time.time()))
    end, due = start + seconds, start
    while (now := time.time()) < end:
        if every:
            time.sleep(max(0.0, due - now))
            due += every
        try:
            admission.check_rate(owner)
            accepted += 1
        except RateLimited:
            refused += 1
    return {"accepted": accepted, "refused": refused, "writes": counted.writes, "reads": counted.reads}


def measure(endpoint: str, processes: int, seconds: float, rate: int, burst: int, mode: str) -> dict:
    from local.provision import provision
    from local.services import aws_client

    settings = _settings(endpoint, f"rate-{uuid.uuid4().hex[:8]}", rate, burst)
    clients = {n: aws_client(n, settings.region, endpoint) for n in ("sqs", "s3", "dynamodb")}
    provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"])
    runs = [("alice", 0.0)] * processes + [("bob", 1 / OTHER_OWNER_RATE)]
    children = [subprocess.Popen(
        [sys.executable, __file__, "--child", json.dumps([endpoint, settings.table, rate, burst, mode,
                                                          owner, seconds, every])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT) for owner, every in runs]
    for process in children:  # every one imported, built and connected: then all start at once
        if process.stdout.readline() != "ready\n":
            raise SystemExit(f"an API process failed ({process.wait()})")
    start = time.time() + 0.5
    results = []
    for process in children:
        process.stdin.write(f"{start}\n")
        process.stdin.flush()
    for process in children:
        out, _ = process.communicate(timeout=seconds + 120)
        if process.returncode != 0:
            raise SystemExit(f"an API process failed ({process.returncode})")
        results.append(json.loads(out))
    owner, other = results[:-1], results[-1]
    accepted = sum(r["accepted"] for r in owner)
    return {"mode": mode, "processes": processes, "seconds": seconds,
            "limit": burst + rate * seconds, "accepted": accepted, "sent": accepted + sum(r["refused"] for r in owner),
            "accepted_per_process": [r["accepted"] for r in owner],
            "writes": sum(r["writes"] for r in owner), "reads": sum(r["reads"] for r in owner),
            "other_accepted": other["accepted"],
            "other_sent": other["accepted"] + other["refused"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rate", type=int, default=10, help="OWNER_REQUESTS_PER_SECOND")
    parser.add_argument("--burst", type=int, default=40, help="OWNER_BURST")
    parser.add_argument("--endpoint")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        # The service's log lines (one per refusal) go nowhere; the result to the parent.
        result = os.fdopen(os.dup(1), "w")
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        result.write(json.dumps(child(*json.loads(args.child), result)))
        return 0
    moto, endpoint = None, args.endpoint
    if endpoint is None:
        from local.services import start_moto

        port = free_port()
        moto = start_moto("127.0.0.1", port)
        endpoint = f"http://127.0.0.1:{port}"
    try:
        results = [measure(endpoint, args.processes, args.seconds, args.rate, args.burst, mode) for mode in MODES]
    finally:
        if moto is not None:
            from local.services import stop

            stop(moto)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"one owner across {args.processes} API processes for {args.seconds:g} s, rate {args.rate}/s, "
          f"burst {args.burst}: limit {results[0]['limit']:g} (burst + rate x seconds)")
    print(f"{'bucket':<12} {'sent':>8} {'accepted':>9} {'accepted/s':>11} {'x limit':>8} "
          f"{'writes':>7} {'writes/accepted':>16} {'reads':>6} {'other owner':>12}")
    for r in results:
        per_accepted = f"{r['writes'] / r['accepted']:.2f}" if r["writes"] else "-"
        print(f"{r['mode']:<12} {r['sent']:>8} {r['accepted']:>9} {r['accepted'] / r['seconds']:>11.1f} "
              f"{r['accepted'] / r['limit']:>8.2f} {r['writes']:>7} {per_accepted:>16} {r['reads']:>6} "
              f"{r['other_accepted']:>5}/{r['other_sent']:<6}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
