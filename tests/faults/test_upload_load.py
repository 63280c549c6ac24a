"""Uploads at the machine's saturation while the table loses answers after it committed
(issue 32 item 9): `python -m local` (the API and the worker) against moto's server, with
DynamoDB's calls through tests/dynamo_stub.py, which drops or holds a fraction of the
answers to the table's writes once they have committed, so botocore sends them again.

The promise: an upload is answered 202, or a 4xx with its code, never a 5xx, while the table
answers at all. A bounded number of requests from more clients than cores; it stops by itself.
"""
from __future__ import annotations

import io
import os
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from PIL import Image

from chalicelib.config import DEFAULT_JWT_SECRET
from chalicelib.http.auth import mint_token
from tests.conftest import free_port
from tests.dynamo_stub import DynamoStub
from tests.images import jpeg, png
from tests.local_runner import push_ports, start_local

UPLOADS = 240
CLIENTS = 12  # six times the cores: the API, the worker and moto's server compete for them
OWNERS = 6


def gif(width=40, height=30) -> bytes:
    out = io.BytesIO()
    Image.new("P", (width, height), 3).save(out, "GIF")
    return out.getvalue()


IMAGES = [("image/jpeg", jpeg(64, 48)), ("image/png", png(40, 30)), ("image/gif", gif()),
          ("image/jpeg", jpeg(640, 480))]


@pytest.mark.timeout(900)
def test_uploads_get_no_5xx_while_the_table_loses_answers_after_committing(moto_endpoint):
    stub = DynamoStub(moto_endpoint, seed=9)
    api_port, suffix = free_port(), uuid.uuid4().hex[:10]
    env = {**os.environ, "EMBEDDED_AWS": "0", "AWS_ENDPOINT_URL": stub.url, "S3_ENDPOINT_URL": moto_endpoint,
           "IMAGES_BUCKET": f"images-{suffix}", "JOBS_TABLE": f"jobs-{suffix}", "EVENTS_QUEUE": f"events-{suffix}",
           "API_PORT": str(api_port), "WEB_PORT": str(free_port()), "PYTHONUNBUFFERED": "1",
           "OWNER_REQUESTS_PER_SECOND": "1000", "OWNER_BURST": "1000", "LOCAL_RUNNER": "1", **push_ports()}
    runner = start_local(env, "the local runner")
    try:
        # From here on: one write in eight loses its answer after committing, dropped (the
        # connection cut) or held a while (a slow answer, past the client's patience or not).
        stub.lose_fraction, stub.lose_how, stub.delay_seconds = 0.125, ("drop", "delay"), 1.0
        # And one write of an owner's item in ten meets another's transaction (item 10).
        stub.conflict_fraction = 0.1
        statuses: Counter = Counter()
        bodies: list[str] = []
        lock = threading.Lock()
        tokens = [mint_token(f"owner-{n}", DEFAULT_JWT_SECRET, 3600, int(time.time())) for n in range(OWNERS)]
        started = time.monotonic()

        def upload(n: int) -> None:
            content_type, data = IMAGES[n % len(IMAGES)]
            answer = requests.post(f"http://127.0.0.1:{api_port}/api/v1/images", data=data, timeout=60,
                                   headers={"Authorization": f"Bearer {tokens[n % OWNERS]}",
                                            "Content-Type": content_type})
            with lock:
                statuses[answer.status_code] += 1
                if answer.status_code >= 500 or answer.status_code not in (202, 429):
                    bodies.append(f"{answer.status_code} {answer.text[:300]}")

        with ThreadPoolExecutor(CLIENTS) as pool:
            list(pool.map(upload, range(UPLOADS)))
        seconds = time.monotonic() - started
        with open("/proc/loadavg") as f:
            load = f.read().split()[0]
        print(f"{UPLOADS} uploads in {seconds:.1f} s ({UPLOADS / seconds:.1f}/s), load {load}, "
              f"statuses {dict(statuses)}, table answers lost {stub.lost}, conflicts {stub.conflicts}, of {stub.requests} calls")
        assert stub.lost >= UPLOADS // 10, "too few answers lost to show anything"
        assert sum(statuses.values()) == UPLOADS
        fives = {s: c for s, c in statuses.items() if s >= 500}
        assert not fives, (fives, bodies[:5])
        # A 4xx is the client's to fix and carries its code; here only the quota can answer one.
        assert set(statuses) <= {202, 429}, bodies[:5]
        assert statuses[202] >= UPLOADS // 2
    finally:
        runner.stop()
        stub.close()
