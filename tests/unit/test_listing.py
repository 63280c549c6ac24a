"""GET /image-jobs (docs/contract.md "The list") through the app's routes, on the in-memory
store: pages newest first, filters, page tokens bound to the caller and the filter, and
paging while jobs are inserted (none twice, none skipped). The store's side is
tests/integration/test_job_store.py's, on moto too."""
import base64
import itertools
import json
import threading
import time
import uuid
from datetime import timedelta

import pytest
from chalice.test import Client

import app as application
from chalicelib.domain.jobs import Job, JobStatus
from chalicelib.http.auth import SERVICE_SCOPE, mint_token
from tests.unit.test_app import assert_problem, auth, client, use_cases  # noqa: F401 (fixtures)


def service_auth():
    token = mint_token("app-backend", application.settings.jwt_secret, 300, int(time.time()), scope=SERVICE_SCOPE)
    return {"Authorization": f"Bearer {token}"}


_made = itertools.count()


def add_jobs(use_cases, owner, count, status=JobStatus.QUEUED, step=timedelta(microseconds=1700), start=None):
    """Jobs created an hour ago (each one a step after the last made), or from `start` on."""
    store, now = use_cases.ctx.jobs, use_cases.ctx.clock()
    made = []
    for i in range(count):
        job_id = str(uuid.uuid4())
        at = start + i * step if start else now - timedelta(hours=1) + next(_made) * step
        job = Job(job_id=job_id, owner=owner, status=status, created_at=at, updated_at=at,
                  expires_at=now + timedelta(days=7), original_key=f"originals/{job_id}")
        store.create(job, 10 ** 6)
        made.append(job)
    return made


def get_page(client, path="/api/v1/image-jobs", headers=None, **params):
    query = "&".join(f"{k}={v}" for k, v in params.items())
    r = client.http.get(f"{path}?{query}" if query else path, headers=headers or auth())
    return r, json.loads(r.body)


def every_page(client, path="/api/v1/image-jobs", headers=None, between=lambda: None, **params):
    ids, token = [], None
    while True:
        r, body = get_page(client, path, headers, **params, **({"page_token": token} if token else {}))
        assert r.status_code == 200, r.body
        ids += [j["job_id"] for j in body["jobs"]]
        token = body.get("next_page_token")
        if token is None:
            return ids
        between()


def test_pages_are_newest_first_as_get_shows_each_and_the_last_has_no_token(client, use_cases):
    made = add_jobs(use_cases, "alice", 45)
    add_jobs(use_cases, "bob", 5)
    r, body = get_page(client)
    assert r.status_code == 200 and r.headers["Cache-Control"] == "no-store"
    assert len(body["jobs"]) == 20 and "next_page_token" in body
    newest = made[-1]
    assert body["jobs"][0] == json.loads(client.http.get(f"/api/v1/image-jobs/{newest.job_id}", headers=auth()).body)
    assert every_page(client, page_size=7) == [j.job_id for j in reversed(made)]
    r, body = get_page(client, page_size=45)
    assert len(body["jobs"]) == 45 and "next_page_token" not in body


def test_paging_while_jobs_are_inserted_lists_none_twice_and_skips_none(client, use_cases):
    made = add_jobs(use_cases, "alice", 60)
    clock = use_cases.ctx.clock

    def insert_newer():  # new jobs arrive between the pages, as uploads would
        clock.advance(0.001)
        for _ in range(3):  # created now: newer than every job already listed
            add_jobs(use_cases, "alice", 1, start=clock())
            clock.advance(0.000001)

    ids = every_page(client, page_size=9, between=insert_newer)
    assert ids == [j.job_id for j in reversed(made)]
    assert len(set(ids)) == len(ids)


def test_status_and_created_filters_and_expired_jobs_left_out(client, use_cases):
    queued = add_jobs(use_cases, "alice", 12)
    ready = add_jobs(use_cases, "alice", 5, status=JobStatus.READY)
    store, now = use_cases.ctx.jobs, use_cases.ctx.clock()
    expired = add_jobs(use_cases, "alice", 1)[0]
    store.items[expired.job_id] = Job(**{**expired.__dict__, "expires_at": now - timedelta(seconds=1)})
    assert expired.job_id not in every_page(client)
    assert every_page(client, status="ready", page_size=2) == [j.job_id for j in reversed(ready)]
    both = every_page(client, status="ready,queued", page_size=50)
    assert set(both) == {j.job_id for j in queued + ready}
    r = client.http.get("/api/v1/image-jobs?status=ready&status=queued&page_size=100", headers=auth())
    assert {j["job_id"] for j in json.loads(r.body)["jobs"]} == set(both)
    middle = queued[3:7]
    after = middle[0].created_at - timedelta(microseconds=1)
    before = middle[-1].created_at + timedelta(microseconds=1)
    stamp = lambda t: t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # noqa: E731
    assert every_page(client, created_after=stamp(after), created_before=stamp(before), page_size=3) == \
        [j.job_id for j in reversed(middle)]
    # Exclusive bounds: a job created at the bound itself is out.
    assert every_page(client, created_after=stamp(middle[0].created_at), created_before=stamp(middle[-1].created_at)) \
        == [j.job_id for j in reversed(middle[1:-1])]


@pytest.mark.parametrize("params", [
    {"page_size": "0"}, {"page_size": "101"}, {"page_size": "ten"}, {"status": "done"},
    {"created_after": "yesterday"}, {"created_before": "2026-07-15T10:00:00"}, {"owner": "bob"},
    {"pagesize": "5"}, {"page_token": "not-a-token"},
])
def test_bad_parameters_are_400(client, use_cases, params):
    r, _ = get_page(client, **params)
    assert_problem(r, 400, "invalid_request")


def test_a_page_token_is_bound_to_its_caller_and_filter_and_refused_when_tampered(client, use_cases):
    add_jobs(use_cases, "alice", 5)
    add_jobs(use_cases, "bob", 5)
    _, body = get_page(client, page_size=2)
    token = body["next_page_token"]
    r, _ = get_page(client, page_size=3, page_token=token)  # another page_size is the same list
    assert r.status_code == 200
    r, _ = get_page(client, headers=auth("bob"), page_size=2, page_token=token)
    assert_problem(r, 400, "invalid_request")
    r, _ = get_page(client, page_size=2, status="ready", page_token=token)
    assert_problem(r, 400, "invalid_request")
    r, _ = get_page(client, "/api/v1/service/image-jobs", service_auth(), owner="alice", page_token=token)
    assert_problem(r, 400, "invalid_request")
    raw = bytearray(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    for i in range(0, len(raw), max(1, len(raw) // 12)):
        tampered = raw.copy()
        tampered[i] ^= 0x01
        text = base64.urlsafe_b64encode(bytes(tampered)).decode().rstrip("=")
        r, _ = get_page(client, page_size=2, page_token=text)
        assert r.status_code in (400, 200)
        if r.status_code == 200:  # only a changed place that still names a job of the same list
            data = json.loads(bytes(tampered))
            assert data["b"] == json.loads(bytes(raw))["b"]
    r, _ = get_page(client, page_size=2, page_token=token[:-3])
    assert_problem(r, 400, "invalid_request")


def test_the_service_lists_any_owner_with_owner_shown_and_needs_owner(client, use_cases):
    made = add_jobs(use_cases, "alice", 4)
    add_jobs(use_cases, "bob", 2)
    r, body = get_page(client, "/api/v1/service/image-jobs", service_auth(), owner="alice", page_size=3)
    assert r.status_code == 200 and [j["owner"] for j in body["jobs"]] == ["alice"] * 3
    assert every_page(client, "/api/v1/service/image-jobs", service_auth(), owner="alice", page_size=3) == \
        [j.job_id for j in reversed(made)]
    r, _ = get_page(client, "/api/v1/service/image-jobs", service_auth())
    assert_problem(r, 400, "invalid_request")
