"""The SDK's push rules without a server: which messages a watch keeps (never an older state,
never one twice, never another job's), and its reconnect backoff."""
from __future__ import annotations

import json

import pytest

from image_jobs import Client, PushUnavailable
from image_jobs.polling import BACKOFF_FIRST
from image_jobs.push import Watch
from tests.conftest import free_port


def message(job_id: str, status: str, sequence: int, etag: str | None = None, kind: str = "job") -> str:
    return json.dumps({"type": kind, "etag": etag or f'W/"{job_id}-{sequence}"', "sequence": sequence,
                       "job": {"job_id": job_id, "status": status}})


@pytest.fixture
def client():
    with Client("http://127.0.0.1:9") as c:
        yield c


def test_an_older_or_repeated_message_is_dropped_and_a_newer_one_kept(client):
    job = client.job("a")
    watch = Watch(client, [job])
    assert watch._take(message("a", "processing", 6)) is job and job.status == "processing"
    assert watch._take(message("a", "queued", 5)) is None  # late: the older state
    assert watch._take(message("a", "processing", 6)) is None  # at least once: the same again
    assert watch._take(message("a", "ready", 7)) is job and job.ready
    assert (watch.received, watch.dropped, job.status) == (4, 2, "ready")


def test_a_state_read_by_get_orders_against_messages_by_status_and_etag(client):
    job = client.job("a")
    watch = Watch(client, [job])
    job._from_push({"job_id": "a", "status": "processing"}, 'W/"p"')  # as a GET after a reconnect
    assert watch._take(message("a", "queued", 1)) is None  # behind what GET showed
    assert watch._take(message("a", "processing", 2, etag='W/"p"')) is None  # the state held
    assert watch._take(message("a", "ready", 3)) is job and job.ready


def test_other_jobs_and_unknown_types_are_ignored_unless_watching_all(client):
    named = Watch(client, ["a"])
    assert named._take(message("b", "queued", 1)) is None
    assert named._take(message("a", "failed", 3, kind="job-v2")) is None
    assert named._take("not json") is None and named.received == 0
    every = Watch(client, None)
    job = every._take(message("b", "queued", 1))
    assert job is not None and job.job_id == "b" and job.status == "queued"


def test_adding_a_job_the_watch_already_follows_keeps_the_callers_object_up_to_date(client):
    watch = Watch(client, None)
    watch._take(message("a", "processing", 2))
    mine = client.job("a")
    assert watch.add(mine) is mine and mine.status == "processing"
    assert watch._take(message("a", "ready", 3)) is mine and mine.ready


def test_connects_back_off_doubling_with_jitter_then_say_push_is_unavailable():
    waits: list[float] = []
    # Nothing listens on that port: GET /push itself fails, as an unreachable service does.
    with Client(f"http://127.0.0.1:{free_port()}", "t", max_attempts=5, sleep=waits.append,
                random=lambda: 0.0) as client:
        with pytest.raises(PushUnavailable):
            list(client.watch(["a"]))
    # Four waits between five tries, each half of the doubled base with random() = 0.
    assert waits == [BACKOFF_FIRST * 2 ** n * 0.5 for n in range(4)]
