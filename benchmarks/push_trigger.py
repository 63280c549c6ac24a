"""What each push trigger costs the writer of a status change, and how soon the client knows:
sending from the writer itself, offering the change to a fan-out thread (the local runner's
PushingJobStore), or the table's stream (the cloud), side by side in one run.

    python benchmarks/push_trigger.py [--changes 200] [--connections 1 10] [--json]

Real parts: the connection registry on DynamoDB (moto's server, started here), the sender
(PostToConnection over HTTP) and local/push_gateway.py with real WebSocket clients, all
built by the service's composition root. The write itself is the same for every trigger and
left out: "writer holds" is what the trigger adds to it. The stream adds nothing to the
writer (Lambda reads the stream elsewhere); its delay, Lambda's poll of each shard every
250 ms, cannot run here (no stream, no WebSocket API), so its row says so.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.stack import free_port  # noqa: E402  (one for every benchmark)
for _name, _value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}.items():
    os.environ[_name] = _value  # moto takes any credentials; never reach a real account
os.environ.pop("AWS_PROFILE", None)


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


class Clients:
    """WebSocket clients of one owner, each recording when each job's message arrived."""

    def __init__(self, url: str, count: int):
        from websockets.sync.client import connect

        from chalicelib.http.auth import PUSH_PROTOCOL

        self.arrived: dict[str, list[float]] = {}
        self._lock = threading.Lock()
        self._sockets = [connect(url, subprotocols=[PUSH_PROTOCOL], open_timeout=10) for _ in range(count)]
        for ws in self._sockets:
            threading.Thread(target=self._read, args=(ws,), daemon=True).start()

    def _read(self, ws) -> None:
        try:
            for frame in ws:
                now = time.perf_counter()
                job_id = json.loads(frame)["job"]["job_id"]
                with self._lock:
                    self.arrived.setdefault(job_id, []).append(now)
        except Exception:
            pass

    def wait_for(self, job_id: str, timeout: float = 10.0) -> float:
        """When the last client got it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                got = self.arrived.get(job_id, [])
                if len(got) >= len(self._sockets):
                    return max(got)
            time.sleep(0.0005)
        raise SystemExit(f"job {job_id} never reached every client")

    def close(self) -> None:
        for ws in self._sockets:
            ws.close()


def measure(endpoint: str, changes: int, connections: int) -> dict:
    from chalicelib.bootstrap import build_use_cases
    from chalicelib.config import Settings
    from chalicelib.domain.jobs import Job, JobStatus
    from chalicelib.http.auth import PUSH_PROTOCOL
    from chalicelib.usecases.push import Fanout
    from local.provision import provision
    from local.push_gateway import PushGateway
    from local.services import aws_client

    table = f"push-{uuid.uuid4().hex[:8]}"
    ports = free_port(), free_port()
    settings = Settings(endpoint_url=endpoint, table=table, bucket=table, events_queue_name=table,
                        push_url=f"ws://127.0.0.1:{ports[0]}", push_management_url=f"http://127.0.0.1:{ports[1]}",
                        max_push_connections_per_owner=connections)
    clients = {n: aws_client(n, settings.region, endpoint) for n in ("sqs", "s3", "dynamodb")}
    provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"])
    use_cases = build_use_cases(settings)
    owner = "bench"

    def on_connect(event, _context):
        use_cases.push.connect(owner, event["requestContext"]["connectionId"])
        return {"statusCode": 200, "headers": {"Sec-WebSocket-Protocol": PUSH_PROTOCOL}}

    def on_disconnect(event, _context):
        use_cases.push.disconnect(event["requestContext"]["connectionId"])

    gateway = PushGateway("127.0.0.1", ports[0], ports[1], on_connect, on_disconnect)
    gateway.start()
    watchers = Clients(gateway.url, connections)
    fanout = Fanout(use_cases.push.publish, use_cases.ctx.metrics)
    now = datetime.now(timezone.utc)

    def job(n: int, trigger: str) -> Job:
        return Job(job_id=f"{trigger}-{n}-{uuid.uuid4().hex[:6]}", owner=owner, status=JobStatus.QUEUED,
                   created_at=now, updated_at=now, expires_at=now + timedelta(days=1), original_key="o")

    results = {}
    try:
        for trigger in ("writer", "thread"):
            held, known = [], []
            for n in range(changes):
                change = job(n, trigger)
                started = time.perf_counter()
                if trigger == "writer":
                    use_cases.push.publish(change)
                else:
                    fanout.offer(change)
                held.append((time.perf_counter() - started) * 1000)
                known.append((watchers.wait_for(change.job_id) - started) * 1000)
            results[trigger] = {"held_ms": held, "known_ms": known}
    finally:
        watchers.close()
        gateway.stop()
    return {"connections": connections, "changes": changes,
            **{f"{t}_{k}_{q}": round(_p(v[k], p), 2) for t, v in results.items()
               for k in ("held_ms", "known_ms") for q, p in (("p50", 0.5), ("p95", 0.95))}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--connections", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from local.services import start_moto, stop

    port = free_port()
    moto = start_moto("127.0.0.1", port)
    # The service's log lines go nowhere: the table is what this prints.
    saved = os.dup(1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    try:
        rows = [measure(f"http://127.0.0.1:{port}", args.changes, n) for n in args.connections]
    finally:
        os.dup2(saved, 1)
        stop(moto)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"push trigger, {args.changes} status changes each, one owner (ms; machine shared and loaded)")
    print(f"{'connections':>11} {'trigger':<28} {'writer holds p50':>16} {'p95':>8} {'client knows p50':>17} {'p95':>8}")
    for row in rows:
        n = row["connections"]
        for trigger, name in (("writer", "sent by the writer"), ("thread", "fan-out thread (local)")):
            print(f"{n:>11} {name:<28} {row[f'{trigger}_held_ms_p50']:>16.2f} {row[f'{trigger}_held_ms_p95']:>8.2f} "
                  f"{row[f'{trigger}_known_ms_p50']:>17.2f} {row[f'{trigger}_known_ms_p95']:>8.2f}")
        print(f"{n:>11} {'table stream (cloud)':<28} {0:>16.2f} {0:>8.2f} {'not here':>17} {'':>8}")
        ratio = row["writer_held_ms_p50"] / max(row["thread_held_ms_p50"], 1e-6)
        print(f"{'':>11} the writer held {ratio:,.0f}x longer when it sends itself than when it offers to the thread")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
