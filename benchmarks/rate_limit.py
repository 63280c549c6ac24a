"""One owner's request rate across several API processes, on one DynamoDB table: what the
limit lets through past the rate, and what it refuses inside it.

    python benchmarks/rate_limit.py [--processes 4] [--seconds 3] [--endpoint URL] [--json]
                                    [--root DIR ...]

Each API process is its own Python process with the service's composition root
(build_use_cases) on one table on moto's server (or --endpoint: LocalStack's), calling the
admission use case (Admission.check_rate, what every route calls first) for one owner. All
start at once. The rows:
- past the rate, each process's own bucket (the table unused: before issue 23) and the
  shared one: each process asks back to back for --seconds, another owner's process asks 2 a
  second, within its rate. The limit is what one token bucket allows in that time, burst +
  rate x seconds, counting the requests answered inside it.
- at 3 x the rate: the processes together ask 3 x the rate, evenly spread, for --seconds,
  each request on time whatever the answers (threads). The same limit.
- inside the rate: the owner asks at half its rate for --seconds, spread over the processes,
  then a spike of what its bucket then holds (burst - 2), all at once, spread over the
  processes, each process's share in threads as a threaded server would run them; then,
  once the bucket holds them again, 3 requests and 12 at once on one process (a phone
  retrying a gallery). Nothing here may be refused.
--root runs the API processes on another checkout's code (say main's), side by side.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import stack  # noqa: E402  (one harness for every benchmark)
for _name, _value in stack.AWS_ENV.items():
    os.environ[_name] = _value  # moto takes any credentials; never reach a real account
os.environ.pop("AWS_PROFILE", None)

OTHER_OWNER_RATE = 2.0  # requests a second from the owner who must still be served
INSIDE_SHARE = 0.5      # of its rate, the owner's pace before its spike
SPIKE_MARGIN = 2        # tokens its bucket may lack at the spike (clocks, a late request)
GALLERY = (3, 12)       # the phone: a few uploads, then a gallery's retries at once


def _settings(endpoint: str, table: str, rate: int, burst: int):
    from chalicelib.config import Settings

    return Settings(endpoint_url=endpoint, table=table, bucket=table, events_queue_name=table,
                    owner_requests_per_second=rate, owner_burst=burst)


class _Counted:
    """The rate store, counting its writes: each is a write unit, a failed condition too."""

    def __init__(self, rates):
        self._rates, self.writes, self.reads = rates, 0, 0
        self._lock = threading.Lock()

    def _count(self, what: str) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + 1)

    def take_from_full(self, *args, **kwargs):
        self._count("writes")
        return self._rates.take_from_full(*args, **kwargs)

    def take(self, *args, **kwargs):
        self._count("writes")
        return self._rates.take(*args, **kwargs)

    def full_at(self, owner):
        self._count("reads")
        return self._rates.full_at(owner)


class _Unshared:
    """No shared store: every call finds it down, so each process keeps its own bucket."""

    def __getattr__(self, name):
        from chalicelib.domain.errors import TransientError

        def down(*_, **__):
            raise TransientError("no shared rate store")
        return down


def child(endpoint: str, rate: int, burst: int, rows: list, report) -> None:
    """One API process, for each row [table, mode, owner, plan]: once ready, says so on
    `report`, reads the start time from stdin, runs its plan and writes its result as a line.
    A plan's steps are in seconds from the start:
    ["pace", from, to, every] asks every `every` seconds (0: back to back), each request
    after the last one's answer, never catching up;
    ["open", from, to, every] asks every `every` seconds, each request in a thread of its own
    whatever the others' answers (a rate offered, not one slowed by the answers);
    ["spike", at, count] asks `count` times at once (threads).
    A request counts as accepted in the window when answered before the last pace ends."""
    from chalicelib.bootstrap import build_use_cases
    from chalicelib.domain.errors import RateLimited
    from chalicelib.usecases.admission import Admission

    for table, mode, owner, plan in rows:
        ctx = build_use_cases(_settings(endpoint, table, rate, burst)).ctx
        counted = _Counted(ctx.rates)
        admission = Admission(dataclasses.replace(ctx, rates=counted if mode == "shared" else _Unshared()))
        admission.check_rate(f"warm-{uuid.uuid4().hex}")  # the connection, before the clock starts
        counted.writes = counted.reads = 0
        window_end = max((step[2] for step in plan if step[0] != "spike"), default=0.0)
        result = {"accepted": 0, "late": 0, "refused": 0}
        lock = threading.Lock()

        def ask():
            try:
                admission.check_rate(owner)
                verdict = "accepted" if time.time() < start + window_end else "late"
            except RateLimited:
                verdict = "refused"
            with lock:
                result[verdict] += 1

        report.write("ready\n")
        report.flush()
        start = float(sys.stdin.readline())
        for step in plan:
            if step[0] == "pace":
                _, begin, end, every = step
                due = start + begin
                while (now := time.time()) < start + end:
                    if now < due:
                        time.sleep(due - now)
                    due = max(due, time.time()) + every  # late: never a burst to catch up
                    ask()
            elif step[0] == "open":
                _, begin, end, every = step
                threads = []
                for n in range(int((end - begin) / every)):
                    time.sleep(max(0.0, start + begin + n * every - time.time()))
                    threads.append(threading.Thread(target=ask))
                    threads[-1].start()
                for thread in threads:
                    thread.join()
            else:
                _, at, count = step
                time.sleep(max(0.0, start + at - time.time()))
                threads = [threading.Thread(target=ask) for _ in range(count)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
        report.write(json.dumps({**result, "writes": counted.writes, "reads": counted.reads}) + "\n")
        report.flush()


def _table(endpoint: str, rate: int, burst: int) -> str:
    from local.provision import provision
    from local.services import aws_client

    settings = _settings(endpoint, f"rate-{uuid.uuid4().hex[:8]}", rate, burst)
    clients = {n: aws_client(n, settings.region, endpoint) for n in ("sqs", "s3", "dynamodb")}
    provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"])
    return settings.table


def run(endpoint: str, root: Path, rate: int, burst: int, rows: list) -> list:
    """Each row: a mode and, per API process, an (owner, plan); every row's processes start
    at once, one row after another, on a table of its own. The processes' results per row."""
    processes = max(len(plans) for _, plans in rows)
    tables = [_table(endpoint, rate, burst) for _ in rows]
    env = dict(os.environ, PYTHONPATH=str(root))
    children = []
    for i in range(processes):
        work = [[table, mode, *(plans[i] if i < len(plans) else ("nobody", []))]
                for table, (mode, plans) in zip(tables, rows)]
        children.append(subprocess.Popen(
            [sys.executable, __file__, "--child", str(root), json.dumps([endpoint, rate, burst, work])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=root, env=env))
    results = []
    for (mode, plans) in rows:
        for process in children:  # every one built and connected: then all start at once
            if process.stdout.readline() != "ready\n":
                raise SystemExit(f"an API process failed ({process.wait()})")
        start = time.time() + 0.5
        for process in children:
            process.stdin.write(f"{start}\n")
            process.stdin.flush()
        results.append([json.loads(process.stdout.readline()) for process in children][:len(plans)])
    for process in children:
        if process.wait(timeout=60) != 0:
            raise SystemExit(f"an API process failed ({process.returncode})")
    return results


def _totals(name: str, seconds: float, rate: int, burst: int, owner: list) -> dict:
    accepted = sum(r["accepted"] for r in owner)
    late = sum(r["late"] for r in owner)
    refused = sum(r["refused"] for r in owner)
    return {"row": name, "seconds": seconds, "limit": burst + rate * seconds, "accepted": accepted,
            "late": late, "refused": refused, "sent": accepted + late + refused,
            "writes": sum(r["writes"] for r in owner), "reads": sum(r["reads"] for r in owner)}


def measure(endpoint: str, root: Path, processes: int, seconds: float, rate: int, burst: int) -> list:
    # Past the rate: each process back to back, another owner within its rate.
    past = [("alice", [["pace", 0.0, seconds, 0.0]])] * processes
    past.append(("bob", [["pace", 0.0, seconds, 1 / OTHER_OWNER_RATE]]))
    # At 3 x the rate, evenly spread over the processes, whatever the answers.
    every = processes / (3 * rate)
    thrice = [("alice", [["open", i * every / processes, seconds, every]]) for i in range(processes)]
    # Inside the rate: a pace, a spike of what the bucket holds, a gallery once it refilled.
    every = processes / (INSIDE_SHARE * rate)
    spike = burst - SPIKE_MARGIN
    gallery_at = seconds + (sum(GALLERY) + SPIKE_MARGIN) / rate + 0.5
    inside = []
    for i in range(processes):
        plan = [["pace", i * every / processes, seconds, every],
                ["spike", seconds, spike // processes + (i < spike % processes)]]
        if i == 0:
            plan += [["spike", gallery_at + n * 0.2, 1] for n in range(GALLERY[0])]
            plan.append(["spike", gallery_at + 1, GALLERY[1]])
        inside.append(("alice", plan))
    rows = [("past the rate, each process's own bucket", "per_process", past), ("past the rate", "shared", past),
            ("at 3 x the rate", "shared", thrice), ("inside the rate", "shared", inside)]
    results = run(endpoint, root, rate, burst, [(mode, plans) for _, mode, plans in rows])
    report = []
    for (name, _, plans), result in zip(rows, results):
        owner = [r for (who, _), r in zip(plans, result) if who == "alice"]
        other = [r for (who, _), r in zip(plans, result) if who == "bob"]
        row = _totals(name, seconds, rate, burst, owner)
        if other:
            row.update(other_accepted=other[0]["accepted"] + other[0]["late"],
                       other_sent=other[0]["accepted"] + other[0]["late"] + other[0]["refused"])
        if name == "inside the rate":
            row["spike"] = spike
        report.append(row)
    return report


def print_report(root: Path, results: list, processes: int, seconds: float, rate: int, burst: int) -> None:
    print(f"{root} @ {stack.label_of(root)}: one owner across {processes} API processes for {seconds:g} s, "
          f"rate {rate}/s, burst {burst}: limit {burst + rate * seconds:g} (burst + rate x seconds)")
    print(f"  {'row':<42} {'sent':>7} {'accepted':>9} {'x limit':>8} {'refused':>8} {'writes':>7} "
          f"{'writes/accepted':>16} {'reads':>6} {'other owner':>12}")
    for r in results:
        inside = r["row"] == "inside the rate"
        accepted = r["accepted"] + r["late"] if inside else r["accepted"]
        ratio = "-" if inside else f"{accepted / r['limit']:.2f}"
        per_accepted = f"{r['writes'] / accepted:.2f}" if accepted else "-"
        other = f"{r['other_accepted']}/{r['other_sent']}" if "other_sent" in r else ""
        print(f"  {r['row']:<42} {r['sent']:>7} {accepted:>9} {ratio:>8} {r['refused']:>8} {r['writes']:>7} "
              f"{per_accepted:>16} {r['reads']:>6} {other:>12}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rate", type=int, default=10, help="OWNER_REQUESTS_PER_SECOND")
    parser.add_argument("--burst", type=int, default=40, help="OWNER_BURST")
    parser.add_argument("--endpoint")
    parser.add_argument("--root", action="append", type=Path,
                        help="a checkout whose code the API processes run (repeatable; default this one)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        stack.enter_root(args.child[0])
        # The service's log lines (one per refusal) go nowhere; the result to the parent.
        report = os.fdopen(os.dup(1), "w")
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        child(*json.loads(args.child[1]), report)
        return 0
    roots = [r.resolve() for r in (args.root or [stack.THIS_ROOT])]
    moto, endpoint = None, args.endpoint
    if endpoint is None:
        from local.services import start_moto

        port = stack.free_port()
        moto = start_moto("127.0.0.1", port)
        endpoint = f"http://127.0.0.1:{port}"
    try:
        results = {str(root): measure(endpoint, root, args.processes, args.seconds, args.rate, args.burst)
                   for root in roots}
    finally:
        if moto is not None:
            from local.services import stop

            stop(moto)
    if args.json:
        print(json.dumps(results if len(roots) > 1 else results[str(roots[0])], indent=2))
        return 0
    for root in roots:
        print_report(root, results[str(root)], args.processes, args.seconds, args.rate, args.burst)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
