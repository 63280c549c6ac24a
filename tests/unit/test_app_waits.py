"""Prefer: wait through app.py's routes (Chalice's test client, in-memory stores): the headers,
the POST's 200, replays, and the stage's switch."""
from __future__ import annotations

import dataclasses
import json
import time
from datetime import datetime, timezone

import pytest
from chalice.test import Client

import app as application
from chalicelib.domain.jobs import JobStatus
from chalicelib.domain.vocabulary import ErrorCode
from chalicelib.http.auth import mint_token
from chalicelib.usecases import UseCases
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, FakeWaitSlots, fake_context
from tests.images import jpeg


class ChangingStore(FakeJobStore):
    """A job store where a worker seems to act: the n-th read of a job after `arm` finds it
    moved on (as a worker's write would have moved it)."""

    def __init__(self):
        super().__init__()
        self.plan: list[tuple[int, dict]] = []
        self.reads = 0

    def arm(self, *steps: tuple[int, dict]) -> None:
        self.plan, self.reads = list(steps), 0

    def get(self, job_id):
        self.reads += 1
        for after, changes in list(self.plan):
            if self.reads >= after and job_id in self.items:
                self.items[job_id] = dataclasses.replace(self.items[job_id], **changes)
                self.plan.remove((after, changes))
        return super().get(job_id)


@pytest.fixture
def store():
    return ChangingStore()


@pytest.fixture
def client(monkeypatch, store):
    service = UseCases(fake_context(settings=application.settings, jobs=store, objects=FakeObjectStore(),
                                    clock=Clock(datetime.now(timezone.utc)), wait_slots=FakeWaitSlots()))
    monkeypatch.setattr(application, "use_cases", lambda: service)
    with Client(application.app) as c:
        yield c


def auth(**extra):
    token = mint_token("alice", application.settings.jwt_secret, 300, int(time.time()))
    return {"Authorization": f"Bearer {token}", **extra}


FAILED = {"status": JobStatus.FAILED, "error_code": ErrorCode.INVALID_IMAGE,
          "finished_at": datetime.now(timezone.utc)}


def upload(client, **headers):
    return client.http.post("/api/v1/images", headers=auth(**{"Content-Type": "image/jpeg", **headers}),
                            body=jpeg())


def test_every_200_carries_an_etag_and_no_preference_applied_without_prefer(client):
    job_id = json.loads(upload(client).body)["job_id"]
    r = client.http.get(f"/api/v1/image-jobs/{job_id}", headers=auth())
    assert r.status_code == 200 and r.headers["ETag"].startswith('W/"')
    assert "Preference-Applied" not in r.headers and r.headers["Retry-After"] == "2"


def test_a_held_get_answers_the_new_status_with_a_new_etag(client, store):
    job_id = json.loads(upload(client).body)["job_id"]
    first = client.http.get(f"/api/v1/image-jobs/{job_id}", headers=auth())
    store.arm((3, {"status": JobStatus.PROCESSING, "attempt": 1}))
    started = time.monotonic()
    r = client.http.get(f"/api/v1/image-jobs/{job_id}", headers=auth(Prefer="wait=10"))
    assert time.monotonic() - started < 5  # on the change, not at the deadline
    assert r.status_code == 200 and json.loads(r.body)["status"] == "processing"
    assert r.headers["Preference-Applied"] == "wait=10" and r.headers["ETag"] != first.headers["ETag"]
    # Naming the state it now has: held again until it changes from that.
    store.arm((2, FAILED))
    again = client.http.get(f"/api/v1/image-jobs/{job_id}",
                            headers=auth(Prefer="wait=10", **{"If-None-Match": r.headers["ETag"]}))
    assert json.loads(again.body)["status"] == "failed" and "Retry-After" not in again.headers


def test_a_stale_if_none_match_is_answered_at_once(client, store):
    job_id = json.loads(upload(client).body)["job_id"]
    r = client.http.get(f"/api/v1/image-jobs/{job_id}", headers=auth(Prefer="wait=10", **{"If-None-Match": 'W/"old"'}))
    assert r.status_code == 200 and "Preference-Applied" not in r.headers and store.reads == 1


def test_a_waiting_post_answers_200_with_the_finished_job_and_its_location(client, store):
    store.arm((2, {"status": JobStatus.PROCESSING, "attempt": 1}), (4, FAILED))
    r = upload(client, Prefer="wait=10", **{"Idempotency-Key": "k1"})
    body = json.loads(r.body)
    assert r.status_code == 200 and body["status"] == "failed" and body["error"]["code"] == "invalid_image"
    assert r.headers["Location"] == f"/api/v1/image-jobs/{body['job_id']}"
    assert r.headers["Preference-Applied"] == "wait=10" and "finished_at" in body
    # A replay with the same key and the same wish: the same job, finished, as a replay.
    replay = upload(client, Prefer="wait=10", **{"Idempotency-Key": "k1"})
    assert replay.status_code == 200 and json.loads(replay.body)["job_id"] == body["job_id"]
    assert replay.headers["Idempotent-Replayed"] == "true"


def test_a_post_still_unfinished_after_its_wait_is_the_usual_202(client, store, monkeypatch):
    monkeypatch.setattr(application, "settings", dataclasses.replace(application.settings, max_wait_seconds=1))
    r = upload(client, Prefer="wait=1")
    assert r.status_code == 202 and json.loads(r.body)["status"] == "queued"
    assert r.headers["Preference-Applied"] == "wait=1" and r.headers["Retry-After"] == "2"


def test_with_waits_off_prefer_is_ignored(client, store, monkeypatch):
    monkeypatch.setattr(application, "settings", dataclasses.replace(application.settings, max_wait_seconds=0))
    job_id = json.loads(upload(client).body)["job_id"]
    store.arm((2, FAILED))
    r = client.http.get(f"/api/v1/image-jobs/{job_id}", headers=auth(Prefer="wait=10"))
    assert json.loads(r.body)["status"] == "queued" and "Preference-Applied" not in r.headers


def test_a_malformed_prefer_is_no_error(client):
    job_id = json.loads(upload(client).body)["job_id"]
    r = client.http.get(f"/api/v1/image-jobs/{job_id}", headers=auth(Prefer="wait=soon, =;,"))
    assert r.status_code == 200 and "Preference-Applied" not in r.headers
