"""GET /image-jobs (docs/contract.md "The list") through the app's routes, on the in-memory
store and on the real table (moto's server), whose keys are times serialised as strings:
pages newest first, filters, RFC 3339 times within what the store can hold, page tokens
signed by the deployment and bound to the caller and the filter, and paging while jobs are
inserted (none twice, none skipped). The store's side is tests/integration/test_job_store.py's."""
import base64
import dataclasses
import hashlib
import itertools
import json
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from urllib.parse import quote

import pytest
from chalice.test import Client

import app as application
from chalicelib.adapters.dynamo_jobs import DynamoJobStore
from chalicelib.adapters.dynamo_keys import DynamoKeys
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.domain.jobs import Job, JobStatus
from chalicelib.http.auth import SERVICE_SCOPE, mint_token
from chalicelib.usecases import UseCases
from chalicelib.usecases.listing import ListQuery
from local.provision import provision
from local.services import aws_client
from tests.fakes import Clock, FakeJobStore, FakeKeys, FakeObjectStore, fake_context
from tests.unit.test_app import assert_problem, auth, client  # noqa: F401 (fixtures)

SERVICE_LIST = "/api/v1/service/image-jobs"
# What moto lets pass and DynamoDB refuses (a BETWEEN whose bounds are crossed) shows on
# LocalStack, whose DynamoDB is Amazon's DynamoDB Local.
ON_LOCALSTACK_TOO = pytest.mark.parametrize("use_cases", ["memory", "moto", "localstack"], indirect=True)


@pytest.fixture(params=["memory", "moto"])
def use_cases(request, monkeypatch, settings_for):
    if request.param == "memory":
        jobs, keys = FakeJobStore(), FakeKeys()
    else:
        endpoint = request.getfixturevalue("localstack").endpoint if request.param == "localstack" else None
        settings = settings_for(**({"endpoint_url": endpoint} if endpoint else {}))
        provision(settings, *(aws_client(n, settings.region, settings.endpoint_url) for n in ("sqs", "s3", "dynamodb")))
        table = DynamoTable(settings.table, settings.region, settings.endpoint_url)
        jobs, keys = DynamoJobStore(table), DynamoKeys(table)
    # A test pages past an owner's burst in a moment: the rate is tests/unit/test_fairness.py's.
    settings = dataclasses.replace(application.settings, owner_burst=10_000)
    service = UseCases(fake_context(settings=settings, jobs=jobs, keys=keys,
                                    objects=FakeObjectStore(), clock=Clock(datetime.now(timezone.utc))))
    monkeypatch.setattr(application, "use_cases", lambda: service)
    return service


def service_auth():
    token = mint_token("app-backend", application.settings.jwt_secret, 300, int(time.time()), scope=SERVICE_SCOPE)
    return {"Authorization": f"Bearer {token}"}


_made = itertools.count()


def add_jobs(use_cases, owner, count, status=JobStatus.QUEUED, step=timedelta(microseconds=1700), start=None,
             expires_in=timedelta(days=7)):
    """Jobs created an hour ago (each one a step after the last made), or from `start` on."""
    store, now = use_cases.ctx.jobs, use_cases.ctx.clock()
    made = []
    for i in range(count):
        job_id = str(uuid.uuid4())
        at = start + i * step if start else now - timedelta(hours=1) + next(_made) * step
        job = Job(job_id=job_id, owner=owner, status=status, created_at=at, updated_at=at,
                  expires_at=now + expires_in, original_key=f"originals/{job_id}")
        store.create(job, 10 ** 6)
        made.append(job)
    return made


def get_page(client, path="/api/v1/image-jobs", headers=None, **params):
    query = "&".join(f"{k}={quote(str(v), safe=',')}" for k, v in params.items())
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
    expired = add_jobs(use_cases, "alice", 1, expires_in=-timedelta(seconds=1))[0]
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
    for i in range(len(raw)):  # the place, its shape or the MAC: each altered byte is refused
        tampered = raw.copy()
        tampered[i] ^= 0x01
        text = base64.urlsafe_b64encode(bytes(tampered)).decode().rstrip("=")
        r, _ = get_page(client, page_size=2, page_token=text)
        assert_problem(r, 400, "invalid_request")
    for text in (token[:-3], token + "A", token + "!", " " + token, token + "=" * (-len(token) % 4)):
        r, _ = get_page(client, page_size=2, page_token=text)
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


# -- times: RFC 3339, within what the store can hold, compared exactly ------------------------
ROUTES = [pytest.param("/api/v1/image-jobs", {}, id="owner"), pytest.param(SERVICE_LIST, {"owner": "alice"}, id="service")]


def route_auth(path):
    return service_auth() if path == SERVICE_LIST else auth()


@pytest.mark.parametrize("path,more", ROUTES)
@pytest.mark.parametrize("name,value", [
    ("created_after", "9999-12-31T23:59:59-01:00"),  # past year 9999 in UTC
    ("created_before", "0001-01-01T00:00:00+01:00"),  # before year 1 in UTC
    ("created_before", "9999-12-31T23:59:59.9999991Z"),  # past the last microsecond
    ("created_after", "0000-12-31T22:59:59-01:00"),
    ("created_after", "9999-12-31T23:59:60Z"),
])
def test_a_time_outside_what_the_store_can_hold_is_400(client, use_cases, path, more, name, value):
    add_jobs(use_cases, "alice", 2)
    r, body = get_page(client, path, route_auth(path), **more, **{name: value})
    assert_problem(r, 400, "invalid_request")
    assert "outside the times a job can have" in body["detail"]


@ON_LOCALSTACK_TOO
@pytest.mark.parametrize("path,more", ROUTES)
def test_the_first_and_last_times_the_store_can_hold_are_taken(client, use_cases, path, more):
    made = add_jobs(use_cases, "alice", 3)
    ids = [j.job_id for j in reversed(made)]
    for after, before in [("0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z"),
                          ("0000-12-31T23:00:00-01:00", "9999-12-31T23:59:59.999999Z"),
                          ("0001-01-01T01:00:00+01:00", "9999-12-31T23:59:59.999999-00:00")]:
        assert every_page(client, path, route_auth(path), **more, created_after=after, created_before=before,
                          page_size=2) == ids
    assert every_page(client, path, route_auth(path), **more, created_after="9999-12-31T23:59:59.999999Z") == []
    assert every_page(client, path, route_auth(path), **more, created_before="0001-01-01T00:00:00Z") == []


@pytest.mark.parametrize("value", [
    "20260715T100000Z",  # ISO 8601's basic form
    "2026-07-15T10:00Z", "2026-07-15T10Z", "2026-07-15",  # seconds left out
    "2026-07-15T10:00:00+0100", "2026-07-15T10:00:00+01",  # offsets not as hh:mm
    "2026-W29-3T10:00:00Z", "2026-196T10:00:00Z",  # week and ordinal dates
    "2026-07-15 10:00:00Z", "2026-07-15T10:00:00,5Z", "2026-07-15T10:00:00.Z",
    "+2026-07-15T10:00:00Z", "2026-07-15T24:00:00Z", "2026-02-29T10:00:00Z", "2026-07-15T10:00:00+24:00",
    "2026-07-15T10:00:00Z\n", "\u0662026-07-15T10:00:00Z",
])
def test_a_time_not_in_rfc_3339_is_400(client, use_cases, value):
    r, body = get_page(client, created_after=value)
    assert_problem(r, 400, "invalid_request")
    assert "RFC 3339" in body["detail"]


def test_a_fraction_finer_than_a_microsecond_leaves_out_exactly_what_it_says(client, use_cases):
    """A job's created_at has microseconds; a bound may have more digits (.NET writes 7,
    Go and Java 9), and both bounds stay exclusive of the time the text names."""
    job = add_jobs(use_cases, "alice", 1, start=datetime(2026, 7, 15, 10, 0, 0, 123456, tzinfo=timezone.utc))[0]
    listed = lambda **bounds: every_page(client, **bounds) == [job.job_id]  # noqa: E731
    assert listed(created_before="2026-07-15T10:00:00.1234561Z")
    assert listed(created_before="2026-07-15T10:00:00.123456000000001Z")
    assert not listed(created_before="2026-07-15T10:00:00.1234560Z")
    assert listed(created_after="2026-07-15T10:00:00.1234559Z")
    assert not listed(created_after="2026-07-15T10:00:00.1234560000Z")
    assert not listed(created_after="2026-07-15T10:00:00.1234561Z")
    assert listed(created_after="2026-07-15t09:00:00.1234559-01:00")  # lower case, another offset
    assert listed(created_before="2026-07-15T10:59:59Z", created_after="2026-07-15T09:59:60Z")  # a leap second


@ON_LOCALSTACK_TOO
def test_bounds_that_leave_no_room_are_an_empty_list(client, use_cases):
    add_jobs(use_cases, "alice", 3)
    for after, before in [("2026-07-15T10:00:00Z", "2026-07-15T09:00:00Z"),
                          ("2026-07-15T10:00:00Z", "2026-07-15T11:00:00+01:00")]:
        r, body = get_page(client, created_after=after, created_before=before)
        assert r.status_code == 200 and body == {"jobs": []}


def test_a_filter_is_bound_in_utc_so_an_equivalent_offset_keeps_the_token(client, use_cases):
    made = add_jobs(use_cases, "alice", 5)
    after = (made[0].created_at - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%f")
    _, body = get_page(client, page_size=2, created_after=after + "Z")
    token = body["next_page_token"]
    same = (made[0].created_at - timedelta(hours=1) + timedelta(hours=5, minutes=30)).strftime("%Y-%m-%dT%H:%M:%S.%f")
    r, body = get_page(client, page_size=2, created_after=same + "+05:30", page_token=token)
    assert r.status_code == 200, r.body
    assert [j["job_id"] for j in body["jobs"]] == [made[2].job_id, made[1].job_id]
    # A digit past the store's microsecond leaves out what the bound did: the same filter.
    r, _ = get_page(client, page_size=2, created_after=after + "1Z", page_token=token)
    assert r.status_code == 200, r.body
    later = (made[0].created_at - timedelta(hours=1) + timedelta(microseconds=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    r, _ = get_page(client, page_size=2, created_after=later, page_token=token)
    assert_problem(r, 400, "invalid_request")


# -- page tokens: only the service's own -------------------------------------------------------
def first_shape_token(caller, owner, place_at, job_id, statuses="", after="", before=""):
    """A token as the list gave them before tokens were keyed: its digest anyone can compute."""
    text = f"{caller}\n{owner}\n{statuses}\n{after}\n{before}"
    binding = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()[:16]).decode().rstrip("=")
    data = json.dumps({"t": place_at, "j": job_id, "b": binding}, separators=(",", ":"))
    return base64.urlsafe_b64encode(data.encode()).decode().rstrip("=")


@pytest.mark.parametrize("place_at", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00", None])
def test_a_token_of_the_first_shape_is_400_and_says_to_list_again(client, use_cases, place_at):
    made = add_jobs(use_cases, "alice", 3)
    forged = first_shape_token("alice", "alice", place_at or made[1].created_at.isoformat(), made[1].job_id)
    r, body = get_page(client, page_size=2, page_token=forged)
    assert_problem(r, 400, "invalid_request")
    assert "first page" in body["detail"]
    r, body = get_page(client, SERVICE_LIST, service_auth(), owner="alice", page_token=first_shape_token(
        "rate#service#app-backend", "alice", place_at or made[1].created_at.isoformat(), made[1].job_id))
    assert_problem(r, 400, "invalid_request")


def test_a_token_signed_with_another_deployments_key_is_400(client, use_cases):
    made = add_jobs(use_cases, "alice", 5)
    _, body = get_page(client, page_size=2)
    ours = body["next_page_token"]
    elsewhere = UseCases(fake_context(settings=application.settings, jobs=use_cases.ctx.jobs, keys=FakeKeys(),
                                      objects=FakeObjectStore(), clock=use_cases.ctx.clock))
    theirs = elsewhere.listing.page("alice", "alice", ListQuery(page_size=2)).next_page_token
    assert theirs != ours
    r, _ = get_page(client, page_size=2, page_token=theirs)
    assert_problem(r, 400, "invalid_request")
    r, body = get_page(client, page_size=2, page_token=ours)
    assert [j["job_id"] for j in body["jobs"]] == [made[2].job_id, made[1].job_id]
