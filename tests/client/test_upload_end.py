"""How a direct upload ends, against a scripted API on a fake clock: a finished upload never
reads `awaiting_upload` (a single PUT waits, held and bounded, for storage's event to move its
job; a multipart one takes its completion's answer), and a stopped upload cancels its job
unless the caller keeps it to resume (docs/contract.md "POST /api/v1/uploads")."""
from __future__ import annotations

import threading

import httpx
import pytest
from image_jobs import UploadStopped, polling

from tests.client.fakes import JOB_PATH, JPEG, FakeApi, FakeTime, accepted, job_answer

UPLOADS = "/api/v1/uploads"
PUT_URL = "http://storage.test/bucket/originals/j-1"


@pytest.fixture
def time_():
    return FakeTime()


def put_accepted():
    return accepted("awaiting_upload", upload={"method": "PUT", "url": PUT_URL, "expires_at": "2026-07-15T10:15:00Z",
                                               "headers": {"Content-Type": "image/jpeg"}})


def held(status: str) -> httpx.Response:
    """A poll the server held (Prefer: wait), answered when the job changed or the hold ended."""
    return httpx.Response(200, headers={"Retry-After": "2", "Preference-Applied": "wait=20"},
                          json={"job_id": "j-1", "status": status})


def test_a_put_upload_waits_held_until_storages_event_has_moved_its_job(time_):
    api = FakeApi(time_).on("POST", UPLOADS, put_accepted()).on("PUT", "/bucket/originals/j-1", httpx.Response(200))
    api.on("GET", JOB_PATH, held("awaiting_upload"), held("queued"))
    job = api.client(max_upload_bytes=10, waits=True).upload(JPEG)
    assert job.status == "queued"
    polls = api.sent("GET", JOB_PATH)
    assert len(polls) == 2 and all(p.headers["Prefer"].startswith("wait=") for p in polls)
    assert time_.sleeps == []  # held by the server, not by the client
    assert job.refresh().status == "queued"  # and a refresh agrees


def test_the_wait_for_storages_event_is_bounded_and_never_raises(time_):
    api = FakeApi(time_).on("POST", UPLOADS, put_accepted()).on("PUT", "/bucket/originals/j-1", httpx.Response(200))
    api.on("GET", JOB_PATH, job_answer("awaiting_upload"))  # the event is late: no poll shows it
    started = time_.now
    job = api.client(max_upload_bytes=10).upload(JPEG)
    assert job.status == "awaiting_upload"
    assert time_.now - started <= polling.ARRIVAL_SECONDS and len(api.sent("GET", JOB_PATH)) >= 3


def test_a_multipart_upload_takes_its_completions_answer_and_polls_nothing(time_):
    data = JPEG * 40
    parts = [{"part_number": n, "size": s, "stored": False, "url": f"http://storage.test/part/{n}"}
             for n, s in ((1, 1000), (2, 1000), (3, len(data) - 2000))]
    api = FakeApi(time_).on("POST", UPLOADS, accepted("awaiting_upload", upload={
        "method": "multipart", "part_size": 1000, "parts": parts, "expires_at": "2026-07-15T10:15:00Z"}))
    for n in (1, 2, 3):
        api.on("PUT", f"/part/{n}", httpx.Response(200, headers={"ETag": f'"e{n}"'}))
    api.on("POST", JOB_PATH + "/upload", job_answer("queued"))
    job = api.client(max_upload_bytes=10, multipart_threshold=100, waits=True).upload(data)
    assert job.status == "queued" and api.sent("GET") == []


def stopped_during_the_put(api, stop):
    """Storage's answer to a PUT during which the caller stops: a 5xx, whose retry the stop ends."""
    def answer(request):
        stop.set()
        return httpx.Response(503)
    api.on("PUT", "/bucket/originals/j-1", answer)
    api.on("POST", JOB_PATH + "/cancel", job_answer("cancelled", retry_after=None))


def stopped_upload(time_, **options):
    api = FakeApi(time_).on("POST", UPLOADS, put_accepted())
    stop = threading.Event()
    stopped_during_the_put(api, stop)
    with pytest.raises(UploadStopped) as stopped:
        api.client(max_upload_bytes=10).upload(JPEG, stop=stop, **options)
    return api, stopped.value.job


def test_a_stopped_upload_cancels_its_job_so_it_no_longer_counts_as_unfinished(time_):
    api, job = stopped_upload(time_)
    assert [r.url.path for r in api.sent("POST")] == [UPLOADS, JOB_PATH + "/cancel"]
    assert job.status == "cancelled" and len(api.sent("PUT")) == 1


def test_a_stopped_upload_the_caller_keeps_stays_awaiting_its_file_for_resume(time_):
    api, job = stopped_upload(time_, keep_stopped=True)
    assert [r.url.path for r in api.sent("POST")] == [UPLOADS]
    assert job.status == "awaiting_upload"


def test_a_stopped_resume_cancels_its_job_too_unless_kept(time_):
    for keep, cancels in ((False, 1), (True, 0)):
        api = FakeApi(time_).on("GET", JOB_PATH + "/upload", httpx.Response(200, json={
            "method": "PUT", "url": PUT_URL, "headers": {}, "expires_at": "2026-07-15T10:15:00Z"}))
        stop = threading.Event()
        stopped_during_the_put(api, stop)
        client = api.client()
        with pytest.raises(UploadStopped):
            client.resume(client.job(JOB_PATH), JPEG, stop=stop, keep_stopped=keep)
        assert len(api.sent("POST", JOB_PATH + "/cancel")) == cancels
