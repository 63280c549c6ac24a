"""The app's backend as a client (docs/contract.md "The service principal", "Metadata",
"The list"), through HTTP on a whole local run (`python -m local`) on each backend: the
embedded stack, LocalStack and the RADOS Gateway (storage notifying RabbitMQ), with
real receivers on 127.0.0.1 verifying signatures with the standardwebhooks library.

  - a table of tokens (user, other user, service, expired, wrong scope) by route;
  - metadata as given through every route (raw, multipart, direct upload) and out of every
    reader: GET, the list, the service's GET and list, the owner's webhook, the service
    webhook, the push message;
  - the service webhook: every owner's events of the statuses it asked for, signed, with
    the owner's subject; a hanging service receiver does not delay an owner's webhook.
"""
from __future__ import annotations

import http.server
import json
import threading
import time
import uuid
from collections import defaultdict

import pytest
import requests
from standardwebhooks import Webhook as StandardWebhook
from websockets.sync.client import connect

from chalicelib.http.auth import BEARER_PROTOCOL, PUSH_PROTOCOL, SERVICE_SCOPE, mint_token
from tests.e2e.test_images_api import SECRET, poll
from tests.e2e.test_webhooks_and_metrics import wait_for
from tests.images import jpeg
from tests.local_runner import runner_on

SLOW_SECONDS = 20
METADATA = {"post_id": "p-42", "kind": "avatar", "note": "naïve ☃ \"quoted\""}


def token(subject, scope=None, ttl=600):
    return {"Authorization": f"Bearer {mint_token(subject, SECRET, ttl, int(time.time()), scope=scope)}"}


def service():
    return token("app-backend", SERVICE_SCOPE)


def metadata_header(metadata):
    return {"Image-Jobs-Metadata": json.dumps(metadata)}  # ASCII: json escapes the rest


class Receivers(http.server.BaseHTTPRequestHandler):
    calls: dict

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.calls[self.path].append((time.monotonic(), dict(self.headers), body))
        if self.path == "/slow":
            time.sleep(SLOW_SECONDS)
        try:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
        except OSError:
            pass

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def receivers(run):
    """Per runner (so per backend): what each path was sent."""
    calls = defaultdict(list)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), type("H", (Receivers,), {"calls": calls}))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", calls
    server.shutdown()


@pytest.fixture(scope="module", params=["embedded", "localstack", "rgw"])
def run(request):
    """A runner of its own on each backend: fast webhook retries, and a service webhook
    (deployment-wide) that no other test's runner shares."""
    settings = {"WEBHOOK_RETRY_DELAYS": "1,1,1,1,1,1,1", "WEBHOOK_ATTEMPT_SECONDS": "2",
                "WEBHOOK_CONCURRENCY": "2"}
    if request.param == "localstack":
        # Names of its own: the session's LocalStack runner must take neither these events
        # nor these webhook deliveries (it would look the service webhook up in its table).
        suffix = uuid.uuid4().hex[:8]
        settings.update(IMAGES_BUCKET=f"service-{suffix}", JOBS_TABLE=f"service-{suffix}",
                        EVENTS_QUEUE=f"service-{suffix}", WEBHOOK_QUEUE=f"service-hooks-{suffix}")
    elif request.param == "rgw":
        request.getfixturevalue("rabbitmq")
    with runner_on(request.param, request, **settings) as runner:
        yield runner


def upload(run, owner, metadata=None, multipart=False):
    extra = metadata_header(metadata) if metadata is not None else {}
    if multipart:
        r = requests.post(f"{run.api}/api/v1/images", headers={**token(owner), **extra}, timeout=30,
                          files={"file": ("photo.jpg", jpeg(), "image/jpeg")})
    else:
        r = requests.post(f"{run.api}/api/v1/images", data=jpeg(), timeout=30,
                          headers={**token(owner), "Content-Type": "image/jpeg", **extra})
    assert r.status_code == 202, r.text
    return r.json()["job_id"]


# -- who may do what ---------------------------------------------------------------------------
def test_a_table_of_tokens_by_route(run):
    alice_job = upload(run, "alice")
    victims = [upload(run, "alice") for _ in range(3)]
    tokens = {"user": token("alice"), "other": token("bob"), "service": service(),
              "expired": token("alice", ttl=-60), "wrong_scope": token("alice", scope="image-jobs/other")}
    routes = {
        "upload": lambda t: requests.post(f"{run.api}/api/v1/images", data=jpeg(), timeout=30,
                                          headers={**t, "Content-Type": "image/jpeg"}),
        "direct": lambda t: requests.post(f"{run.api}/api/v1/uploads", json={"content_type": "image/jpeg", "size": 9},
                                          headers=t, timeout=30),
        "get": lambda t: requests.get(f"{run.api}/api/v1/image-jobs/{alice_job}", headers=t, timeout=30),
        "list": lambda t: requests.get(f"{run.api}/api/v1/image-jobs", headers=t, timeout=30),
        "webhook": lambda t: requests.get(f"{run.api}/api/v1/webhook", headers=t, timeout=30),
        "service_get": lambda t: requests.get(f"{run.api}/api/v1/service/image-jobs/{alice_job}", headers=t, timeout=30),
        "service_list": lambda t: requests.get(f"{run.api}/api/v1/service/image-jobs?owner=alice", headers=t, timeout=30),
        "service_webhook": lambda t: requests.get(f"{run.api}/api/v1/service/webhook", headers=t, timeout=30),
        "service_put_webhook": lambda t: requests.put(f"{run.api}/api/v1/service/webhook", headers=t, timeout=30,
                                                      json={"url": "https://127.0.0.1:1/x", "events": ["ready"]}),
    }
    expected = {
        #                upload direct get  list webhook s_get s_list s_hook s_put
        "user":        (202, 202, 200, 200, 200, 403, 403, 403, 403),
        "other":       (202, 202, 404, 200, 200, 403, 403, 403, 403),
        "service":     (403, 403, 403, 403, 403, 200, 200, 200, 200),
        "expired":     (401, 401, 401, 401, 401, 401, 401, 401, 401),
        "wrong_scope": (202, 202, 200, 200, 200, 403, 403, 403, 403),
    }
    got = {name: tuple(call(t).status_code for call in routes.values()) for name, t in tokens.items()}
    assert got == expected
    for name, t in tokens.items():  # every refusal is problem+json with its code
        r = routes["service_list"](t) if name != "service" else routes["upload"](t)
        assert r.headers["Content-Type"] == "application/problem+json"
        assert r.json()["code"] == ("unauthorized" if name == "expired" else "forbidden")
    # Delete: the owner and the service may, another owner gets 404; a user token never
    # reaches the service's delete.
    first, second, third = victims
    assert requests.delete(f"{run.api}/api/v1/image-jobs/{first}", headers=token("bob"), timeout=30).status_code == 404
    assert requests.delete(f"{run.api}/api/v1/service/image-jobs/{first}", headers=token("alice"),
                           timeout=30).status_code == 403
    assert requests.delete(f"{run.api}/api/v1/image-jobs/{first}", headers=service(), timeout=30).status_code == 403
    assert requests.delete(f"{run.api}/api/v1/image-jobs/{first}", headers=token("alice"), timeout=30).status_code == 204
    assert requests.delete(f"{run.api}/api/v1/service/image-jobs/{second}", headers=service(),
                           timeout=30).status_code == 204
    for gone in (first, second):
        assert requests.get(f"{run.api}/api/v1/image-jobs/{gone}", headers=token("alice"), timeout=30).status_code == 404
    assert requests.get(f"{run.api}/api/v1/image-jobs/{third}", headers=token("alice"), timeout=30).status_code == 200
    listed = requests.get(f"{run.api}/api/v1/image-jobs?page_size=100", headers=token("bob"), timeout=30).json()
    assert alice_job not in {j["job_id"] for j in listed["jobs"]}
    requests.delete(f"{run.api}/api/v1/service/webhook", headers=service(), timeout=30)


# -- metadata ----------------------------------------------------------------------------------
@pytest.mark.parametrize("metadata", [
    {f"k{i}": "v" for i in range(17)},            # more than 16 keys
    {"k" * 65: "v"},                               # a key over 64 characters
    {"bad key": "v"},                              # a character keys may not have
    {"": "v"},                                     # an empty key
    {"k": "v" * 513},                              # a value over 512 characters
    {"k": 1},                                      # not a string
    {"k": {"nested": "no"}},                       # not flat
    {"k": "line\nbreak"},                          # a control character
    {f"k{i}": "é" * 100 for i in range(11)},       # over 2048 bytes in all
    ["not", "an", "object"],
    None,                                          # null is not an object (the spec's type)
])
def test_metadata_over_its_bounds_is_400_on_both_routes_and_nothing_is_made(run, metadata):
    before = requests.get(f"{run.api}/api/v1/image-jobs?page_size=100", headers=token("bounds"), timeout=30).json()
    r = requests.post(f"{run.api}/api/v1/images", data=jpeg(), timeout=30,
                      headers={**token("bounds"), "Content-Type": "image/jpeg", **metadata_header(metadata)})
    assert r.status_code == 400 and r.json()["code"] == "invalid_request", r.text
    r = requests.post(f"{run.api}/api/v1/uploads", headers=token("bounds"), timeout=30,
                      json={"content_type": "image/jpeg", "size": 9, "metadata": metadata})
    assert r.status_code == 400 and r.json()["code"] == "invalid_request", r.text
    after = requests.get(f"{run.api}/api/v1/image-jobs?page_size=100", headers=token("bounds"), timeout=30).json()
    assert after == before


def test_metadata_at_its_bounds_is_taken_and_a_bad_header_is_400(run):
    full = {f"k{i:02d}": "x" * 120 for i in range(16)}
    assert len(json.dumps(full)) > 1900
    job_id = upload(run, "bounds-ok", full)
    got = requests.get(f"{run.api}/api/v1/image-jobs/{job_id}", headers=token("bounds-ok"), timeout=30).json()
    assert got["metadata"] == full
    r = requests.post(f"{run.api}/api/v1/images", data=jpeg(), timeout=30,
                      headers={**token("bounds-ok"), "Content-Type": "image/jpeg", "Image-Jobs-Metadata": "{nope"})
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"


def test_metadata_is_part_of_the_idempotency_fingerprint(run):
    key = {"Idempotency-Key": f"meta-{time.time()}"}
    send = lambda metadata: requests.post(  # noqa: E731
        f"{run.api}/api/v1/images", data=jpeg(), timeout=30,
        headers={**token("idem"), "Content-Type": "image/jpeg", **key, **metadata_header(metadata)})
    first = send({"a": "1", "b": "2"})
    assert first.status_code == 202
    again = send({"b": "2", "a": "1"})  # the same metadata, its keys in another order
    assert again.status_code == 202 and again.json()["job_id"] == first.json()["job_id"]
    assert again.headers["Idempotent-Replayed"] == "true"
    other = send({"a": "1", "b": "3"})
    assert other.status_code == 409 and other.json()["code"] == "idempotency_key_reused"


# -- the service webhook, and metadata out of every reader -------------------------------------
@pytest.fixture(scope="module")
def story(run, receivers):
    base, calls = receivers
    r = requests.put(f"{run.api}/api/v1/service/webhook", headers=service(), timeout=30,
                     json={"url": f"{base}/svc", "events": ["queued", "processing", "ready", "failed", "cancelled"]})
    assert r.status_code == 200, r.text
    service_secret = r.json()["secret"]
    assert r.json()["events"] == ["queued", "processing", "cancelled", "failed", "ready"]
    r = requests.put(f"{run.api}/api/v1/webhook", json={"url": f"{base}/meta-owner"}, headers=token("meta-owner"),
                     timeout=30)
    owner_secret = r.json()["secret"]
    push = requests.get(f"{run.api}/api/v1/push", headers=token("meta-owner"), timeout=30).json()["url"]
    bearer = BEARER_PROTOCOL + token("meta-owner")["Authorization"][len("Bearer "):]
    with connect(push, subprotocols=[PUSH_PROTOCOL, bearer], open_timeout=10) as socket:
        raw = upload(run, "meta-owner", METADATA)
        form = upload(run, "meta-owner", {"form": "multipart"}, multipart=True)
        direct = requests.post(f"{run.api}/api/v1/uploads", headers=token("meta-owner"), timeout=30,
                               json={"content_type": "image/jpeg", "size": 1234, "metadata": {"direct": "yes"}}).json()
        cancelled = requests.post(f"{run.api}/api/v1/image-jobs/{direct['job_id']}/cancel",
                                  headers=token("meta-owner"), timeout=30)
        assert cancelled.status_code == 200 and cancelled.json()["metadata"] == {"direct": "yes"}
        ready = {job_id: poll(run, f"/api/v1/image-jobs/{job_id}", owner="meta-owner").json() for job_id in (raw, form)}
        pushed = []
        deadline = time.monotonic() + 30
        while sum(1 for m in pushed if m["job"]["status"] == "ready") < 2 and time.monotonic() < deadline:
            try:
                pushed.append(json.loads(socket.recv(timeout=max(0.1, deadline - time.monotonic()))))
            except TimeoutError:
                break
    wait_for("the service webhook's ready events",
             lambda: sum(1 for _, _, b in calls["/svc"] if json.loads(b)["status"] == "ready") >= 2)
    wait_for("the service webhook's cancelled event",
             lambda: any(json.loads(b)["status"] == "cancelled" for _, _, b in calls["/svc"]))
    wait_for("the owner's webhooks", lambda: len(calls["/meta-owner"]) >= 3)
    return dict(calls=calls, service_secret=service_secret, owner_secret=owner_secret, raw=raw, form=form,
                direct=direct["job_id"], ready=ready, pushed=pushed)


def test_metadata_comes_back_exactly_from_every_reader(run, story):
    raw, form, direct = story["raw"], story["form"], story["direct"]
    given = {raw: METADATA, form: {"form": "multipart"}, direct: {"direct": "yes"}}
    for job_id, metadata in given.items():
        got = requests.get(f"{run.api}/api/v1/image-jobs/{job_id}", headers=token("meta-owner"), timeout=30).json()
        assert got["metadata"] == metadata and list(got["metadata"]) == list(metadata)
        assert "owner" not in got
        svc = requests.get(f"{run.api}/api/v1/service/image-jobs/{job_id}", headers=service(), timeout=30).json()
        assert svc["metadata"] == metadata and svc["owner"] == "meta-owner"
    listed = requests.get(f"{run.api}/api/v1/image-jobs", headers=token("meta-owner"), timeout=30).json()["jobs"]
    assert {j["job_id"]: j.get("metadata") for j in listed} == given
    assert [j["job_id"] for j in listed] == [direct, form, raw]  # newest first
    listed = requests.get(f"{run.api}/api/v1/service/image-jobs?owner=meta-owner&status=ready", headers=service(),
                          timeout=30).json()["jobs"]
    assert {j["job_id"]: (j["owner"], j["metadata"]) for j in listed} == \
        {raw: ("meta-owner", METADATA), form: ("meta-owner", {"form": "multipart"})}
    owner_hooks = [StandardWebhook(story["owner_secret"]).verify(b, h) for _, h, b in story["calls"]["/meta-owner"]]
    assert {j["job_id"]: j.get("metadata") for j in owner_hooks} == given
    pushed = {(m["job"]["job_id"], m["job"]["status"]): m["job"].get("metadata") for m in story["pushed"]}
    assert pushed[raw, "ready"] == METADATA and pushed[form, "ready"] == {"form": "multipart"}


def test_the_service_webhook_gets_every_asked_status_signed_with_owner_and_metadata(run, story):
    verifier = StandardWebhook(story["service_secret"])
    events = [(h["webhook-id"], verifier.verify(b, h)) for _, h, b in story["calls"]["/svc"]]
    mine = [(i, e) for i, e in events if e.get("owner") == "meta-owner"]
    statuses = {}
    for _, e in mine:
        statuses.setdefault(e["job_id"], []).append(e["status"])
    assert "ready" in statuses[story["raw"]] and "ready" in statuses[story["form"]]
    assert statuses[story["direct"]] == ["cancelled"]
    # queued and processing were asked for: each is sent, unless the job had moved on by then.
    assert {s for job in (story["raw"], story["form"]) for s in statuses[job]} <= {"queued", "processing", "ready"}
    # Each of the two was queued as queued, processing and ready for the service; a progress
    # event not delivered was dropped as superseded (the job had moved on: how soon depends
    # on the backend's event path, so which of them go out is the race's).
    lines = run.logged()
    delivered = {h["webhook-id"] for _, h, _ in story["calls"]["/svc"]}
    for job in (story["raw"], story["form"]):
        queued = {line["event_id"] for line in lines if line.get("event") == "webhook_queued"
                  and line.get("job_id") == job and line.get("receiver") == "@service"}
        dropped = {line["event_id"] for line in lines if line.get("event") == "webhook_dropped"
                   and line.get("job_id") == job and line.get("reason") == "superseded"}
        assert len(queued) >= 3, queued
        assert queued <= delivered | dropped, (queued, delivered, dropped)
    ready = next(e for _, e in mine if e["job_id"] == story["raw"] and e["status"] == "ready")
    assert ready["metadata"] == METADATA and ready["image_url"].startswith("http")
    # Not the owner's webhook-ids: another receiver, its own events.
    owner_ids = {h["webhook-id"] for _, h, _ in story["calls"]["/meta-owner"]}
    assert not owner_ids & {i for i, _ in mine}
    with pytest.raises(Exception):
        StandardWebhook(story["owner_secret"]).verify(story["calls"]["/svc"][0][2], story["calls"]["/svc"][0][1])


def test_a_hanging_service_receiver_does_not_delay_an_owners_webhook(run, receivers, story):
    base, calls = receivers
    r = requests.put(f"{run.api}/api/v1/service/webhook", json={"url": f"{base}/slow"}, headers=service(), timeout=30)
    assert r.status_code == 200 and r.json()["events"] == ["cancelled", "failed", "ready"]  # the default
    requests.put(f"{run.api}/api/v1/webhook", json={"url": f"{base}/dave"}, headers=token("dave"), timeout=30)
    first = upload(run, "dave")
    wait_for("the slow service receiver called", lambda: calls["/slow"], 60)
    later = [upload(run, "dave") for _ in range(3)]
    done_at = {}
    for job_id in later:
        poll(run, f"/api/v1/image-jobs/{job_id}", owner="dave")
        done_at[job_id] = time.monotonic()
    wait_for("dave's webhooks", lambda: {json.loads(b)["job_id"] for _, _, b in calls["/dave"]} >= {first, *later})
    for at, _, body in calls["/dave"]:
        job_id = json.loads(body)["job_id"]
        if job_id in done_at:
            assert at - done_at[job_id] < SLOW_SECONDS / 2
    requests.delete(f"{run.api}/api/v1/service/webhook", headers=service(), timeout=30)
