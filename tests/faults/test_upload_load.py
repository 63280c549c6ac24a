"""Uploads at the machine's saturation while the table loses answers after it committed
(issue 32 item 9): `python -m local` (the API and the worker) against moto's server, with
DynamoDB's calls through tests/dynamo_stub.py, which drops or holds a fraction of the
answers to the table's writes once they have committed, so botocore sends them again.

The promise: an upload is answered 202, or a 4xx with its code, never a 5xx, while the table
answers. A bounded number of requests from more clients than cores; it stops by itself.

The one 5xx allowed is the service's answer when the table's answer to a create never came:
503 storage_unavailable with Retry-After, as for any dependency that does not answer. Here
that happens when the stub loses the answers to all of botocore's attempts at the create's
transaction, or when botocore makes no more attempts after a lost one: its retry quota is
spent (each client's: a retry spends from it and only a 2xx gives it back, and moto answers the
re-send of a transaction that had committed with a refusal, where DynamoDB, which honours
the ClientRequestToken, answers 200) or the request's time budget is. A slow machine makes both
likelier: an answer held 1 s then comes past the client's patience (2.78 s at the default
timeouts) and is one more lost. Such a 503 must be one the API logged from a call that got
no answer (a transport error or BudgetSpent; an answer the table gave and the service read
wrong is a ClientError in the chain, and fails the test), and there may be no more of them
than creates whose last attempt's answer the stub lost.
"""
from __future__ import annotations

import io
import json
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
def test_uploads_get_no_5xx_but_a_503_for_a_create_the_table_never_answered(moto_endpoint):
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
        unavailable: list[tuple] = []  # each 503's code and Retry-After
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
                if answer.status_code == 503:
                    code = answer.json().get("code") if "json" in answer.headers.get("Content-Type", "") else None
                    unavailable.append((code, answer.headers.get("Retry-After")))

        with ThreadPoolExecutor(CLIENTS) as pool:
            list(pool.map(upload, range(UPLOADS)))
        seconds = time.monotonic() - started
        with open("/proc/loadavg") as f:
            load = f.read().split()[0]
        print(f"{UPLOADS} uploads in {seconds:.1f} s ({UPLOADS / seconds:.1f}/s), load {load}, "
              f"statuses {dict(statuses)}, table answers lost {stub.lost}, conflicts {stub.conflicts}, of {stub.requests} calls")
        assert stub.lost >= UPLOADS // 10, "too few answers lost to show anything"
        assert sum(statuses.values()) == UPLOADS
        unanswered = stub.unanswered("TransactWriteItems")
        failures = logged_failures(runner.text())
        print(f"creates whose last attempt's answer was dropped or held: {len(unanswered)}")
        # A 503 only as the answer to a create that got no answer, and saying so.
        assert all(code == "storage_unavailable" and retry_after for code, retry_after in unavailable), bodies[:5]
        unexplained = [chain(failure) for failure in failures if not got_no_answer(failure)]
        assert not unexplained, ("a 5xx that the lost answers do not explain", unexplained[:3])
        assert len(failures) == statuses[503] <= len(unanswered), (statuses[503], len(failures), len(unanswered))
        # A 4xx is the client's to fix and carries its code; here only the quota can answer one.
        assert set(statuses) <= {202, 429, 503}, bodies[:5]
        assert statuses[202] >= UPLOADS // 2
    finally:
        runner.stop()
        stub.close()


# A botocore attempt that got no answer: the connection cut or timed out, or the time budget
# left no room for another.
_NO_ANSWER = ("botocore.exceptions.ConnectionClosedError", "botocore.exceptions.ReadTimeoutError",
              "botocore.exceptions.ConnectTimeoutError", "botocore.exceptions.EndpointConnectionError",
              "BudgetSpent")


def logged_failures(output: str) -> list[str]:
    """What the API logged of each request it answered 5xx (backend_unavailable, internal_error):
    the event's name and its exception."""
    found = []
    for line in output.splitlines():
        for event in ("backend_unavailable", "internal_error"):
            if f'"event": "{event}"' in line:
                try:
                    exception = json.loads(line[line.index("{"):]).get("exception", "")
                except ValueError:
                    exception = line  # interleaved with another line: read as it is
                found.append(f"{event}: {exception}")
    return found


def chain(failure: str) -> list[str]:
    """A logged exception's chain, an exception a line, without the frames."""
    return [line for line in failure.splitlines() if line and not line[0].isspace() and ": " in line]


def got_no_answer(failure: str) -> bool:
    """A 503 for a table call that got no answer: no answer from DynamoDB in its chain."""
    return (failure.startswith("backend_unavailable:") and "TransientError: job table unavailable" in failure
            and any(marker in failure for marker in _NO_ANSWER) and "ClientError" not in failure)
