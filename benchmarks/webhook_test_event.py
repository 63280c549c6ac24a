"""A test event's time (POST /webhook/test, issue 52): from the call to the moment the receiver
has the request, and to the answer, through the service's own use case (Webhooks.send_test)
on DynamoDB on moto's server (started here on a free port) and its real HTTP sender, to a real
receiver on 127.0.0.1 that answers 204 at once. Also what the delivery log costs an attempt
(its two writes, DeliveryLog.record), which a delivery pays after its event's fate is stored.

    python benchmarks/webhook_test_event.py [--tests 60] [--json]

Each test is a different owner's webhook (a webhook's tests are bounded to 3 in a row).
No target is asserted; on the shared 2-core machine the figures move with its load.
"""
from __future__ import annotations

import argparse
import http.server
import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.stack import free_port, percentile, quiet_stdout  # noqa: E402  (one for every benchmark)
for _name, _value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}.items():
    os.environ[_name] = _value  # moto takes any credentials; never reach a real account
os.environ.pop("AWS_PROFILE", None)
os.environ.pop("AWS_SESSION_TOKEN", None)


def receiver():
    """A receiver on 127.0.0.1 recording when each request arrived (time.perf_counter)."""
    arrived: list[float] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            arrived.append(time.perf_counter())
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, arrived


def summary(values: list[float]) -> dict:
    return {"median_ms": round(percentile(values, 50), 1), "p95_ms": round(percentile(values, 95), 1),
            "max_ms": round(max(values), 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests", type=int, default=60)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    real_stdout = quiet_stdout()

    from chalicelib.bootstrap import build_use_cases
    from chalicelib.config import Settings
    from local.provision import provision
    from local.services import aws_client, start_moto, stop

    port = free_port()
    moto = start_moto("127.0.0.1", port)
    server, arrived = receiver()
    to_receiver, to_answer, log_writes = [], [], []
    try:
        endpoint = f"http://127.0.0.1:{port}"
        suffix = uuid.uuid4().hex[:8]
        settings = Settings(endpoint_url=endpoint, bucket=f"hooks-{suffix}", table=f"hooks-{suffix}",
                            events_queue_name=f"hooks-{suffix}", webhook_allow_loopback=True)
        clients = {n: aws_client(n, settings.region, endpoint) for n in ("sqs", "s3", "dynamodb")}
        provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"])
        use_cases = build_use_cases(settings)
        webhooks = use_cases.webhooks
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        for n in range(args.tests + 1):  # the first warms the clients up: not counted
            owner = f"bench-{n}"
            webhooks.register(owner, url)
            began = time.perf_counter()
            attempt = webhooks.send_test(owner)
            answered = time.perf_counter()
            assert attempt.status_code == 204, attempt
            if n:
                to_receiver.append((arrived[-1] - began) * 1000)
                to_answer.append((answered - began) * 1000)
        log = use_cases.ctx.delivery_log
        for _ in range(args.tests):
            began = time.perf_counter()
            log.record("bench-0", attempt)
            log_writes.append((time.perf_counter() - began) * 1000)
    finally:
        server.shutdown()
        stop(moto)
    report = {"tests": args.tests, "call_to_receiver": summary(to_receiver), "call_to_answer": summary(to_answer),
              "log_record": summary(log_writes), "loadavg": Path("/proc/loadavg").read_text().split()[:3]}
    if args.json:
        print(json.dumps(report, indent=1), file=real_stdout)
        return 0
    print(f"{args.tests} test events, DynamoDB on moto, a receiver on 127.0.0.1 answering 204 "
          f"(load {' '.join(report['loadavg'])})", file=real_stdout)
    for name in ("call_to_receiver", "call_to_answer", "log_record"):
        figures = report[name]
        print(f"  {name:18} median {figures['median_ms']:7.1f} ms   p95 {figures['p95_ms']:7.1f} ms   "
              f"max {figures['max_ms']:7.1f} ms", file=real_stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
