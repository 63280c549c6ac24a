"""Push through a real WebSocket against the local runner (local/push_gateway.py playing API
Gateway, the app's own handlers, the real worker and table): a bad token is refused at
connect, only the owner's jobs arrive, and every status of an upload arrives in order; the
SDK's watch too. On every backend: the embedded stack, LocalStack, and the AMQP path."""
from __future__ import annotations

import contextlib
import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import jwt
import pytest
import requests
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from chalicelib.http.auth import BEARER_PROTOCOL, PUSH_PROTOCOL, mint_token
from tests.e2e.test_images_api import SECRET, headers
from tests.images import jpeg
from tests.local_runner import BACKENDS, dedicated_runner, runner_on


@pytest.fixture(scope="module", params=BACKENDS)
def runner(request):
    """The session's embedded runner, and runners on LocalStack and on the AMQP path."""
    if request.param == "embedded":
        yield request.getfixturevalue("embedded_runner")
        return
    with runner_on(request.param, request) as started:
        yield started


def push_url(runner) -> str:
    r = requests.get(f"{runner.api}/api/v1/push", headers=headers(), timeout=10)
    assert r.status_code == 200 and r.headers["Cache-Control"] == "no-store"
    body = r.json()
    assert body["protocols"] == [PUSH_PROTOCOL, BEARER_PROTOCOL + "<token>"]
    return body["url"]


def open_socket(runner, owner="alice", token=None):
    token = token or mint_token(owner, SECRET, 600, int(time.time()))
    return connect(push_url(runner), subprotocols=[PUSH_PROTOCOL, BEARER_PROTOCOL + token], open_timeout=10)


def messages_until(socket, done, timeout=30.0) -> list[dict]:
    found, deadline = [], time.monotonic() + timeout
    while not done(found):
        left = deadline - time.monotonic()
        if left <= 0:
            pytest.fail(f"timed out; got {found}")
        try:
            found.append(json.loads(socket.recv(timeout=left)))
        except TimeoutError:
            pytest.fail(f"timed out; got {found}")
    return found


# The tokens the runner's routes refuse (tests/unit/test_auth.py; the cloud's Cognito table is
# tests/unit/test_cognito_tokens.py), refused at connect alike.
BAD_TOKENS = [
    "not-a-jwt",
    mint_token("alice", SECRET, -60, int(time.time())),                            # expired
    mint_token("alice", "a-secret-that-is-not-the-runners-0123456789", 600, int(time.time())),  # foreign
    jwt.encode({"sub": "alice", "exp": int(time.time()) + 600}, None, algorithm="none"),
    jwt.encode({"exp": int(time.time()) + 600}, SECRET, algorithm="HS256"),       # no subject
    jwt.encode({"sub": "alice"}, SECRET, algorithm="HS256"),                      # no expiry
]


# Ids with no times in them: the same in every pytest-xdist worker.
@pytest.mark.parametrize("token", BAD_TOKENS, ids=["not-a-jwt", "expired", "foreign", "alg-none", "no-subject", "no-expiry"])
def test_a_bad_token_is_refused_at_connect_as_on_every_route(runner, token):
    with pytest.raises(InvalidStatus) as refused:
        open_socket(runner, token=token)
    assert refused.value.response.status_code == 401
    r = requests.get(f"{runner.api}/api/v1/push", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert r.status_code == 401


def test_a_clients_messages_are_answered_by_the_gateway_and_the_socket_stays_open(runner):
    """No $default route: each message is answered with API Gateway's no-route frame (which
    clients ignore: it has no `type`), runs nothing, and pushes keep coming."""
    with open_socket(runner, "push-chatty") as socket:
        for n in range(300):
            socket.send(json.dumps({"type": "keepalive"}) if n % 2 else "hello?")
        answers = [json.loads(socket.recv(timeout=30)) for _ in range(300)]
        assert {a["message"] for a in answers} == {"Forbidden"} and all("type" not in a for a in answers)
        socket.ping().wait(10)
        r = requests.post(f"{runner.api}/api/v1/images", data=jpeg(), timeout=30,
                          headers=headers("push-chatty", **{"Content-Type": "image/jpeg"}))
        assert r.status_code == 202, r.text
        mine = messages_until(socket, lambda found: any(m["job"]["status"] == "ready" for m in found))
        assert {m["job"]["job_id"] for m in mine} == {r.json()["job_id"]}


def test_connects_take_from_the_owners_request_rate_as_its_requests_do():
    """One token churning connect/disconnect cycles: past the owner's rate (a burst of 10,
    then 1 a second) a connect is refused with 429 before any upgrade, and the owner's
    routes find the rate spent too; another owner connects."""
    with dedicated_runner(LOCAL_COMPONENTS="api,push", OWNER_REQUESTS_PER_SECOND="1", OWNER_BURST="10") as api:
        r = requests.get(f"{api}/api/v1/push", headers=headers("churner"), timeout=10)
        url, token = r.json()["url"], mint_token("churner", SECRET, 600, int(time.time()))
        codes, started = [], time.monotonic()
        # Until ten are refused, not a fixed count: on a loaded machine a connect may take
        # most of the second that refills a token, and forty of them found only four refused.
        while codes.count(429) < 10 and len(codes) < 150:
            try:
                with connect(url, subprotocols=[PUSH_PROTOCOL, BEARER_PROTOCOL + token], open_timeout=10):
                    codes.append(101)
            except InvalidStatus as refused:
                codes.append(refused.response.status_code)
        assert set(codes) == {101, 429} and codes[:9] == [101] * 9, codes
        assert codes.count(429) >= 10, codes
        # The API process leases the owner's tokens apart from the push process: while the
        # push process waits for a lease worth a write, the bucket may hold a few tokens the
        # API takes. A request whose token is due within a second is held, not refused, so
        # one GET at a time is only slowed to the rate: six at once find it spent.
        gets = []
        with ThreadPoolExecutor(6) as pool:
            for _ in range(3):
                gets += pool.map(lambda _: requests.get(f"{api}/api/v1/push", headers=headers("churner"),
                                                        timeout=10).status_code, range(6))
                if 429 in gets:
                    break
        assert 429 in gets, gets
        # And all that was let through, connects and GETs, is within the owner's rate.
        allowed = 10 + (time.monotonic() - started) * 1 + 1  # the burst, the refill, the first GET
        assert codes.count(101) + gets.count(200) <= allowed * 1.1, (codes, gets)
        other = mint_token("patient", SECRET, 600, int(time.time()))
        with connect(url, subprotocols=[PUSH_PROTOCOL, BEARER_PROTOCOL + other], open_timeout=10) as socket:
            assert socket.subprotocol == PUSH_PROTOCOL


def test_no_token_at_all_is_refused_at_connect(runner):
    with pytest.raises(InvalidStatus) as refused:
        connect(push_url(runner), subprotocols=[PUSH_PROTOCOL], open_timeout=10)
    assert refused.value.response.status_code == 401


def test_every_status_of_an_upload_arrives_in_order_and_only_to_its_owner(runner):
    with open_socket(runner, "push-alice") as alice, open_socket(runner, "push-bob") as bob:
        assert alice.subprotocol == PUSH_PROTOCOL
        r = requests.post(f"{runner.api}/api/v1/images", data=jpeg(), timeout=30,
                          headers=headers("push-alice", **{"Content-Type": "image/jpeg"}))
        job_id = r.json()["job_id"]
        mine = messages_until(alice, lambda found: any(m["job"]["status"] == "ready" for m in found))
        assert [m["job"]["status"] for m in mine] == ["queued", "processing", "ready"]
        assert all(m["job"]["job_id"] == job_id for m in mine)
        sequences = [m["sequence"] for m in mine]
        assert sequences == sorted(sequences)
        got = requests.get(f"{runner.api}/api/v1/image-jobs/{job_id}", headers=headers("push-alice"), timeout=10)
        assert got.headers["ETag"] == mine[-1]["etag"] and got.json()["renditions"].keys() == mine[-1]["job"]["renditions"].keys()
        with pytest.raises(TimeoutError):
            bob.recv(timeout=1)


def test_twenty_concurrent_uploads_arrive_over_one_socket(runner):
    with open_socket(runner, "push-gallery") as socket:
        ids = set()
        for _ in range(20):
            r = requests.post(f"{runner.api}/api/v1/images", data=jpeg(), timeout=30,
                              headers=headers("push-gallery", **{"Content-Type": "image/jpeg"}))
            assert r.status_code == 202, r.text
            ids.add(r.json()["job_id"])
        seen = messages_until(socket, lambda found: {m["job"]["job_id"] for m in found
                                                      if m["job"]["status"] == "ready"} >= ids, timeout=120)
        for job_id in ids:
            statuses = [m["job"]["status"] for m in seen if m["job"]["job_id"] == job_id]
            assert statuses == ["queued", "processing", "ready"], (job_id, statuses)


def test_past_the_owners_cap_a_connect_is_refused_with_429_until_one_closes(runner):
    """MAX_PUSH_CONNECTIONS_PER_OWNER (10 by default) across the owner's connections, counted
    in the table; another owner is never refused for it."""
    owner = f"push-capped-{runner.backend}"
    with contextlib.ExitStack() as held:
        first = held.enter_context(open_socket(runner, owner))
        for _ in range(9):
            held.enter_context(open_socket(runner, owner))
        with pytest.raises(InvalidStatus) as refused:
            open_socket(runner, owner)
        assert refused.value.response.status_code == 429
        with open_socket(runner, f"{owner}-other") as other:
            assert other.subprotocol == PUSH_PROTOCOL
        first.close()
        deadline = time.monotonic() + 10
        while True:  # the gateway reports the disconnect on its own time
            try:
                held.enter_context(open_socket(runner, owner))
                break
            except InvalidStatus as still:
                assert still.response.status_code == 429
                assert time.monotonic() < deadline, "the closed connection was never forgotten"
                time.sleep(0.2)


def test_the_sdk_watch_brings_every_status_of_twenty_uploads_over_one_socket(runner):
    from image_jobs import Client

    owner = f"push-sdk-{uuid.uuid4().hex[:8]}"
    with Client(runner.api, mint_token(owner, SECRET, 600, int(time.time()))) as client:
        watch = client.watch()  # every job of the owner
        updates: list[tuple[str, str]] = []

        def follow():
            for job in watch:
                updates.append((job.job_id, job.status))
                if len({j for j, s in updates if s == "ready"}) == 20:
                    return

        with ThreadPoolExecutor(21) as pool:
            following = pool.submit(follow)
            try:
                deadline = time.monotonic() + 20
                while watch.connects < 1:
                    assert time.monotonic() < deadline and not following.done(), "the watch did not connect"
                    time.sleep(0.05)
                jobs = list(pool.map(lambda _: client.upload(jpeg()), range(20)))
                following.result(timeout=120)
            finally:
                watch.close()
        assert watch.connects == 1 and watch.received >= 60, (runner.backend, watch.received)
        for job in jobs:
            statuses = [s for j, s in updates if j == job.job_id]
            assert statuses[-1] == "ready" and statuses == sorted(statuses, key=ORDER.index), statuses


ORDER = ["queued", "processing", "ready"]
