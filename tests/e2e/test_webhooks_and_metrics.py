"""Webhooks, metrics and logs through a whole local run (`python -m local`), with real
receivers on 127.0.0.1 verifying signatures with the standardwebhooks library.

One runner for the module, with a short retry schedule (1 s steps, the same number of
attempts as the cloud's) and a 2 s delivery timeout. Owners and their receivers:
  alice  answers 500, then 200           the retry carries the same webhook-id
  sloth  hangs for 20 s on every call    it must not hold up bob, nor the worker
  bob    answers 200 at once
  ghost  nothing listens at its port     dead-lettered after the last attempt
Then the run's EMF lines are parsed and checked, and `make stats` reads its log.
"""
from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import time
from collections import defaultdict

import boto3
import pytest
import requests
from standardwebhooks import Webhook as StandardWebhook

from tests.conftest import ROOT, free_port
from tests.e2e.test_images_api import assert_problem, headers, poll
from tests.images import jpeg
from tests.local_runner import start_local

SLOW_SECONDS = 20
URL_FIELDS = ("image_url", "thumb_url", "urls_expire_at")


class Receivers(http.server.BaseHTTPRequestHandler):
    calls: dict  # path -> [(monotonic time, headers, body)]

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        seen = self.calls[self.path]
        seen.append((time.monotonic(), dict(self.headers), body))
        if self.path == "/sloth":
            time.sleep(SLOW_SECONDS)
        status = 500 if self.path == "/alice" and len(seen) == 1 else 200
        try:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()
        except OSError:
            pass  # the sender gave up long ago

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def receivers():
    calls = defaultdict(list)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), type("H", (Receivers,), {"calls": calls}))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", calls
    server.shutdown()


class Run:
    def __init__(self, api, aws, proc, log_file):
        self.api, self.aws, self.proc, self.log_file = api, aws, proc, log_file

    def records(self) -> list[dict]:
        found = []
        for line in self.proc.text().splitlines():
            if line.startswith("{"):
                try:
                    found.append(json.loads(line))
                except ValueError:
                    pass
        return found

    def metric_points(self):
        """(metric, dimensions but service, value) of every EMF line of the run."""
        for record in self.records():
            if "_aws" not in record:
                continue
            (directive,) = record["_aws"]["CloudWatchMetrics"]
            assert directive["Namespace"] == "ImageJobs" and record["service"] == "image-jobs"
            names = {n for dims in directive["Dimensions"] for n in dims} - {"service"}
            for metric in directive["Metrics"]:
                for value in record[metric["Name"]]:
                    yield metric["Name"], {n: record[n] for n in names}, value

    def total(self, metric, **dims):
        return sum(v for name, d, v in self.metric_points()
                   if name == metric and all(d.get(k) == x for k, x in dims.items()))

    def values(self, metric):
        return [v for name, _, v in self.metric_points() if name == metric]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    api_port, aws_port = free_port(), free_port()
    log_file = tmp_path_factory.mktemp("run") / "runner.log"
    env = dict(os.environ, API_PORT=str(api_port), AWS_PORT=str(aws_port), EMBEDDED_AWS="1",
               PYTHONUNBUFFERED="1", LOG_FILE=str(log_file), WEBHOOK_RETRY_DELAYS="1,1,1,1,1,1,1",
               WEBHOOK_ATTEMPT_SECONDS="2", WEBHOOK_CONCURRENCY="2", SWEEP_INTERVAL_SECONDS="5")
    env.pop("AWS_ENDPOINT_URL", None)
    proc = start_local(env, "the local runner for webhooks")
    yield Run(f"http://127.0.0.1:{api_port}", f"http://127.0.0.1:{aws_port}", proc, log_file)
    if not proc.stop():
        pytest.fail("local runner did not stop on SIGTERM")


def register(run, owner, url):
    r = requests.put(f"{run.api}/api/v1/webhook", json={"url": url},
                     headers=headers(owner, **{"Content-Type": "application/json"}), timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["secret"]


def upload(run, owner):
    r = requests.post(f"{run.api}/api/v1/images", data=jpeg(), timeout=30,
                      headers=headers(owner, **{"Content-Type": "image/jpeg"}))
    assert r.status_code == 202, r.text
    return r.headers["Location"]


def wait_for(what, predicate, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    pytest.fail(f"{what} after {timeout} s")


def without_urls(body):
    body = {k: v for k, v in body.items() if k not in URL_FIELDS}
    if "renditions" in body:
        body["renditions"] = {n: {k: v for k, v in r.items() if k != "url"} for n, r in body["renditions"].items()}
    return body


@pytest.fixture(scope="module")
def story(run, receivers):
    """The run the tests below look at, told once."""
    base, calls = receivers
    secrets = {owner: register(run, owner, f"{base}/{owner}") for owner in ("alice", "sloth", "bob")}
    secrets["ghost"] = register(run, "ghost", f"http://127.0.0.1:{free_port()}/nobody-listens")
    refused = requests.put(f"{run.api}/api/v1/webhook", json={"url": "http://169.254.169.254/latest/meta-data/"},
                           headers=headers("alice", **{"Content-Type": "application/json"}), timeout=30)
    sloth = [upload(run, "sloth") for _ in range(3)]
    wait_for("sloth's receiver called", lambda: calls["/sloth"], 60)
    bob = upload(run, "bob")
    bob_ready = poll(run, bob, owner="bob")
    bob_ready_at = time.monotonic()
    alice = upload(run, "alice")
    ghost = upload(run, "ghost")
    jobs = {"alice": poll(run, alice, owner="alice").json(), "bob": bob_ready.json(),
            "ghost": poll(run, ghost, owner="ghost").json()}
    sloth_jobs = [poll(run, location, owner="sloth").json() for location in sloth]
    wait_for("bob's webhook", lambda: calls["/bob"], 60)
    wait_for("alice's second attempt", lambda: len(calls["/alice"]) >= 2, 60)
    return dict(secrets=secrets, calls=calls, jobs=jobs, sloth_jobs=sloth_jobs, refused=refused,
                bob_ready_at=bob_ready_at)


def test_a_retry_after_a_500_carries_the_same_webhook_id_and_both_verify(run, story):
    attempts = story["calls"]["/alice"]
    assert len(attempts) == 2
    (first_at, first, first_body), (second_at, second, second_body) = attempts
    assert first["webhook-id"] == second["webhook-id"]
    assert second_at - first_at >= 0.9  # it waited out the schedule's first delay (1 s here)
    verifier = StandardWebhook(story["secrets"]["alice"])
    for headers_, body in ((first, first_body), (second, second_body)):
        assert headers_["webhook-signature"].startswith("v1,")
        job = verifier.verify(body, headers_)
        # The job as GET shows it: the same fields, with freshly presigned URLs.
        assert without_urls(job) == without_urls(story["jobs"]["alice"])
        assert job["status"] == "ready" and job["image_url"].startswith("http")


def test_a_hanging_receiver_holds_up_neither_the_worker_nor_another_owner(story):
    assert [j["status"] for j in story["sloth_jobs"]] == ["ready"] * 3
    (received_at, headers_, body) = story["calls"]["/bob"][0]
    assert received_at - story["bob_ready_at"] < SLOW_SECONDS / 2
    assert StandardWebhook(story["secrets"]["bob"]).verify(body, headers_)["job_id"] == story["jobs"]["bob"]["job_id"]


def test_a_dead_endpoint_is_dead_lettered_after_the_last_attempt(run, story):
    sqs = boto3.session.Session().client("sqs", region_name="us-east-1", endpoint_url=run.aws)
    url = sqs.get_queue_url(QueueName="image-jobs-webhooks-dlq")["QueueUrl"]
    events = []

    def dead_lettered():
        messages = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages", [])
        events.extend(json.loads(m["Body"]) for m in messages)
        return any(e["owner"] == "ghost" for e in events)

    wait_for("ghost's event in the dead-letter queue", dead_lettered, 90)
    (event,) = [e for e in events if e["owner"] == "ghost"]
    assert event["job_id"] == story["jobs"]["ghost"]["job_id"]
    # Every attempt was made or waited out: 8 in all (the template's maxReceiveCount).
    wait_for("the ghost's last attempt logged", lambda: any(
        r.get("event") == "webhook_attempt_failed" and r.get("dead_letter") and r.get("job_id") == event["job_id"]
        for r in run.records()), 30)


def test_registration_refuses_the_metadata_address_and_the_problem_names_the_logged_request(run, story):
    body = assert_problem(story["refused"], 400, "invalid_request")
    request_id = story["refused"].headers["X-Request-Id"]
    assert body["instance"] == f"urn:uuid:{request_id}"
    lines = [r for r in run.records() if r.get("correlation_id") == request_id]
    assert [(r["event"], r["status"]) for r in lines] == [("http_request", 400)]


def test_the_metric_lines_of_the_run(run, story):
    wait_for("the webhook dead-letter depth reported", lambda: run.total("DeadLetters", Queue="webhooks") >= 1, 60)
    assert run.total("JobsAccepted", Route="images") == 6
    assert run.total("JobsReady") == 6 and run.total("JobsFailed") == 0
    assert run.total("WebhooksQueued") == 6
    assert run.total("WebhookDeliveries") == 2  # alice's second attempt, bob's first
    assert run.total("WebhookFailures", Reason="status") == 1  # alice's 500
    assert run.total("WebhookFailures", Reason="timeout") >= 1  # sloth
    assert run.total("WebhookFailures", Reason="connection") >= 1  # ghost
    assert run.total("ApiProblems", Code="invalid_request") == 1
    assert run.total("ApiProblems", Code="job_not_found") == 1  # the runner's warm-up
    assert run.total("ApiServerErrors") == 0
    for metric in ("EndToEnd", "QueueWait", "ProcessingTime"):
        values = run.values(metric)
        assert len(values) == 6 and all(0 <= v < 60_000 for v in values), (metric, values)
    assert run.values("Attempts") == [1.0] * 6
    # Low cardinality: no job id and no owner is ever a dimension.
    ids = {j["job_id"] for j in story["jobs"].values()} | {j["job_id"] for j in story["sloth_jobs"]}
    owners = {"alice", "bob", "sloth", "ghost"}
    assert not {v for _, dims, _ in run.metric_points() for v in dims.values()} & (ids | owners)


def test_every_log_line_is_json_and_a_jobs_lines_carry_its_id(run, story):
    job_id = story["jobs"]["alice"]["job_id"]
    events = [r["event"] for r in run.records() if r.get("job_id") == job_id]
    for expected in ("upload_accepted", "job_claimed", "job_ready", "webhook_queued",
                     "webhook_attempt_failed", "webhook_delivered"):
        assert expected in events
    for line in run.proc.text().splitlines():
        if line.startswith("{"):
            assert json.loads(line)
    # The local server's own answers (no such route) are logged in the same shape.
    assert requests.get(f"{run.api}/nothing/here", timeout=10).status_code == 400  # as API Gateway answers (local/gateway.py)
    wait_for("the server's own access line", lambda: any(
        r.get("event") == "http_request" and r.get("route") == "/nothing/here" and r.get("status") == 400
        for r in run.records()), 10)


def test_make_stats_and_trace_read_the_runs_log(run, story):
    table = subprocess.run([sys.executable, "-m", "local.stats", str(run.log_file)], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    assert table.returncode == 0, table.stderr
    rows = {tuple(line.split()[:2]): line.split() for line in table.stdout.splitlines() if line.strip()}
    assert rows[("JobsReady", "(all)")][2:4] == ["6", "6"]
    assert rows[("WebhookDeliveries", "(all)")][3] == "2"
    job_id = story["jobs"]["alice"]["job_id"]
    trace = subprocess.run([sys.executable, "-m", "local.stats", str(run.log_file), "--job", job_id],
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert trace.returncode == 0, trace.stderr
    events = [line.split()[3] for line in trace.stdout.splitlines()]
    assert events.index("upload_accepted") < events.index("job_ready") < events.index("webhook_delivered")


def test_rotating_with_no_webhook_registered_is_404_webhook_not_found(run):
    r = requests.post(f"{run.api}/api/v1/webhook/rotate-secret", headers=headers("nobody-registered"),
                      timeout=30)
    assert_problem(r, 404, "webhook_not_found")


def test_an_international_url_is_stored_encoded_and_delivered(run, receivers):
    base, calls = receivers
    register(run, "ines", f"{base}/ínès/straße")
    shown = requests.get(f"{run.api}/api/v1/webhook", headers=headers("ines"), timeout=30).json()
    assert shown["url"] == f"{base}/%C3%ADn%C3%A8s/stra%C3%9Fe"
    upload(run, "ines")
    wait_for("ines's webhook", lambda: calls["/%C3%ADn%C3%A8s/stra%C3%9Fe"], 60)


# -- deliveries you can see, and the test event (issue 52) -----------------------------------

def shown(run, owner):
    r = requests.get(f"{run.api}/api/v1/webhook", headers=headers(owner), timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def test_get_shows_each_attempt_with_the_receivers_answer_or_why_none_came(run, story):
    job_id = story["jobs"]["alice"]["job_id"]
    wait_for("alice's two attempts shown", lambda: len(shown(run, "alice")["deliveries"]) >= 2, 30)
    body = shown(run, "alice")
    assert body["breaker"] == {"state": "closed"}
    delivered, failed = body["deliveries"]
    assert (delivered["status_code"], delivered["outcome"], delivered["attempt"]) == (200, "delivered", 2)
    assert (failed["status_code"], failed["outcome"], failed["attempt"]) == (500, "retrying", 1)
    assert failed["next_attempt_at"] >= failed["at"] and "next_attempt_at" not in delivered
    assert {(a["job_id"], a["event"]) for a in (delivered, failed)} == {(job_id, "ready")}
    assert delivered["webhook_id"] == failed["webhook_id"] == story["calls"]["/alice"][0][1]["webhook-id"]
    # Nobody listens at ghost's port: every attempt says so, and the last one gave up.
    wait_for("ghost's last attempt shown", lambda: any(
        a["outcome"] == "dead_lettered" for a in shown(run, "ghost")["deliveries"]), 90)
    ghost = shown(run, "ghost")["deliveries"]
    assert {a["reason"] for a in ghost} == {"refused"} and all("status_code" not in a for a in ghost)


def test_the_test_event_reaches_the_receiver_signed_and_answers_what_it_did(run, receivers, story):
    base, calls = receivers
    secret = register(run, "tess", f"{base}/tess")
    started = time.monotonic()
    r = requests.post(f"{run.api}/api/v1/webhook/test", headers=headers("tess"), timeout=30)
    assert r.status_code == 200, r.text
    attempt = r.json()
    ((received_at, headers_, body),) = calls["/tess"]
    print(f"\ntest event: call to receiver {1000 * (received_at - started):.0f} ms, "
          f"whole call {1000 * (time.monotonic() - started):.0f} ms")
    assert StandardWebhook(secret).verify(body, headers_)["type"] == "webhook.test"
    assert headers_["webhook-id"] == attempt["webhook_id"]
    assert (attempt["event"], attempt["status_code"], attempt["outcome"]) == ("webhook.test", 200, "delivered")
    assert shown(run, "tess")["deliveries"] == [attempt]
    for _ in range(2):
        assert requests.post(f"{run.api}/api/v1/webhook/test", headers=headers("tess"), timeout=30).status_code == 200
    refused = requests.post(f"{run.api}/api/v1/webhook/test", headers=headers("tess"), timeout=30)
    assert_problem(refused, 429, "rate_limited")
    assert 1 <= int(refused.headers["Retry-After"]) <= 20
    assert len(calls["/tess"]) == 3
    nobody = requests.post(f"{run.api}/api/v1/webhook/test", headers=headers("nobody-registered"), timeout=30)
    assert_problem(nobody, 404, "webhook_not_found")
