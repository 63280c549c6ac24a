"""Job.wait on a fake clock: CONTRACT.md "How a client polls", wait by wait and stop rule by stop rule."""
from __future__ import annotations

import random
import threading
import time as real_time
from email.utils import format_datetime
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from image_jobs import (ConnectionFailed, Forbidden, InvalidRequest, JobExpired, JobNotFound, Status,
                        Unauthorized, WaitCancelled, WaitTimeout)
from tests.client.fakes import JOB_PATH, JPEG, FakeApi, FakeTime, accepted, job_answer, problem


@pytest.fixture
def time_():
    return FakeTime()


@pytest.fixture
def api(time_):
    return FakeApi(time_).on("POST", "/api/v1/images", accepted())


def uploaded(api, **options):
    return api.client(**options).upload(JPEG)


def test_the_first_poll_comes_after_retry_after_then_3_5_8_and_15_seconds(api, time_):
    api.on("GET", JOB_PATH, *[job_answer("processing")] * 6, job_answer("ready"))
    job = uploaded(api).wait()
    assert job.status == "ready"
    assert time_.sleeps == [2, 3, 5, 8, 15, 15, 15]
    assert api.times("GET", JOB_PATH) == [1002, 1005, 1010, 1018, 1033, 1048, 1063]


def test_the_first_poll_counts_retry_after_from_the_upload_answer(api, time_):
    api.on("GET", JOB_PATH, job_answer("ready"))
    job = uploaded(api)
    time_.now += 1.5  # the app did something else for a while
    job.wait()
    assert time_.sleeps == [0.5]


def test_the_lowest_jitter_is_minus_20_percent_of_each_step(api, time_):
    api.on("GET", JOB_PATH, *[job_answer("processing", retry_after=None)] * 5, job_answer("ready"))
    uploaded(api, random=lambda: 0.0).wait()
    assert time_.sleeps == pytest.approx([2, 2.4, 4, 6.4, 12, 12])


def test_the_highest_jitter_stays_under_plus_20_percent(api, time_):
    api.on("GET", JOB_PATH, *[job_answer("processing", retry_after=None)] * 4, job_answer("ready"))
    uploaded(api, random=lambda: 1 - 1e-12).wait()
    assert time_.sleeps[0] == 2  # Retry-After itself is the server's floor, not jittered
    for waited, base in zip(time_.sleeps[1:], [3, 5, 8, 15]):
        assert base * 1.2 - 1e-9 < waited < base * 1.2


def test_real_jitter_spreads_over_the_whole_band_and_never_leaves_it(api, time_):
    api.on("GET", JOB_PATH, job_answer("processing", retry_after=None))
    job = uploaded(api, random=random.Random(13).random)
    with pytest.raises(WaitTimeout):
        job.wait(deadline=15 * 400)
    ratios = [w / 15 for w in time_.sleeps[4:]]  # the 15 s steps
    assert len(ratios) > 300
    assert all(0.8 <= r < 1.2 for r in ratios)
    assert min(ratios) < 0.81 and max(ratios) > 1.19  # it uses the band, not one value


def test_a_longer_retry_after_on_a_poll_is_honoured(api, time_):
    api.on("GET", JOB_PATH, job_answer("processing", retry_after="10"), job_answer("processing"),
           job_answer("ready"))
    uploaded(api).wait()
    assert time_.sleeps == [2, 10, 5]  # 10 instead of 3, then the schedule goes on


def test_retry_after_as_an_http_date_is_read_against_the_answer_date(api, time_):
    sent = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)
    answer = httpx.Response(200, json={"job_id": "j-1", "status": "processing"}, headers={
        "Date": format_datetime(sent, usegmt=True),
        "Retry-After": format_datetime(sent + timedelta(seconds=12), usegmt=True)})
    api.on("GET", JOB_PATH, answer, job_answer("ready"))
    uploaded(api).wait()
    assert time_.sleeps == [2, 12]


@pytest.mark.parametrize("status,code", [(503, "overloaded"), (429, "rate_limited"),
                                         (503, "storage_unavailable")])
def test_a_busy_answer_while_polling_waits_its_retry_after_and_goes_on(api, time_, status, code):
    api.on("GET", JOB_PATH, problem(status, code, retry_after="30"), job_answer("ready"))
    assert uploaded(api).wait().ready
    assert time_.sleeps == [2, 30]


@pytest.mark.parametrize("final", ["ready", "failed", "cancelled"])
def test_a_terminal_status_ends_polling_at_once(api, time_, final):
    api.on("GET", JOB_PATH, job_answer("queued"), job_answer(final, retry_after=None),
           job_answer("processing"))  # a later answer that must never be asked for
    job = uploaded(api).wait()
    assert job.status == final and job.finished
    assert len(api.sent("GET")) == 2 and time_.sleeps == [2, 3]


def test_wait_on_a_finished_job_asks_nothing(api, time_):
    api.on("GET", JOB_PATH, job_answer("ready", retry_after=None))
    job = uploaded(api).wait()
    assert job.wait() is job and len(api.sent("GET")) == 1


@pytest.mark.parametrize("status,code,error", [(404, "job_not_found", JobNotFound),
                                               (410, "job_expired", JobExpired),
                                               (401, "unauthorized", Unauthorized),
                                               (403, "forbidden", Forbidden)])
def test_404_410_401_and_403_stop_polling_with_their_typed_error(api, time_, status, code, error):
    api.on("GET", JOB_PATH, job_answer("processing"), problem(status, code), job_answer("ready"))
    with pytest.raises(error) as raised:
        uploaded(api).wait()
    assert raised.value.status == status
    assert len(api.sent("GET")) == 2 and time_.sleeps == [2, 3]


def test_a_403_without_a_problem_body_is_still_forbidden(api, time_):
    api.on("GET", JOB_PATH, httpx.Response(403, text="<html>Forbidden</html>"))
    with pytest.raises(Forbidden):
        uploaded(api).wait()
    assert len(api.sent("GET")) == 1


def test_the_deadline_stops_before_a_poll_that_would_come_after_it(api, time_):
    api.on("GET", JOB_PATH, job_answer("processing"))
    job = uploaded(api)
    with pytest.raises(WaitTimeout) as raised:
        job.wait(deadline=12)  # polls at +2, +5, +10; the next would be at +18
    assert isinstance(raised.value, TimeoutError)
    assert time_.sleeps == [2, 3, 5] and time_.now == 1010  # it did not sleep out the rest
    assert raised.value.job is job and job.status == "processing"


def test_a_poll_exactly_at_the_deadline_is_still_made(api, time_):
    api.on("GET", JOB_PATH, job_answer("processing"), job_answer("processing"), job_answer("ready"))
    assert uploaded(api).wait(deadline=10).ready  # polls at +2, +5, +10


def test_a_deadline_shorter_than_retry_after_polls_never(api, time_):
    api.on("GET", JOB_PATH, job_answer("ready"))
    with pytest.raises(WaitTimeout):
        uploaded(api).wait(deadline=1)
    assert api.sent("GET") == [] and time_.sleeps == []


def test_the_callers_stop_event_ends_waiting(api, time_):
    stop = threading.Event()
    api.on("GET", JOB_PATH, job_answer("queued"), job_answer("processing"), job_answer("ready"))

    def on_status(job):
        if job.status == "processing":
            stop.set()

    with pytest.raises(WaitCancelled) as raised:
        uploaded(api).wait(on_status=on_status, stop=stop)
    assert raised.value.job.status == "processing" and len(api.sent("GET")) == 2


def test_a_stop_event_set_before_waiting_asks_nothing(api, time_):
    stop = threading.Event()
    stop.set()
    api.on("GET", JOB_PATH, job_answer("ready"))
    with pytest.raises(WaitCancelled):
        uploaded(api).wait(stop=stop)
    assert api.sent("GET") == []


def test_a_stop_event_wakes_a_real_sleep_at_once():
    time_ = FakeTime()
    api = FakeApi(time_).on("POST", "/api/v1/images", accepted(retry_after="30"))
    api.on("GET", JOB_PATH, job_answer("ready"))
    client = api.client()
    client.sleep = real_time.sleep  # the default sleep, which a stop event can cut short
    job = client.upload(JPEG)
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    started = real_time.monotonic()
    with pytest.raises(WaitCancelled):
        job.wait(stop=stop)
    assert real_time.monotonic() - started < 5


def test_an_unknown_status_means_not_finished_and_unknown_fields_are_ignored(api, time_):
    api.on("GET", JOB_PATH, job_answer("resizing", colour="blue", progress={"pct": 50}),
           job_answer("ready", retry_after=None, renditions={"display": {"url": "http://s/d.jpg", "dpi": 72}},
                      extra=[1, 2]))
    seen = []
    job = uploaded(api).wait(on_status=lambda j: seen.append(j.status))
    assert seen == ["resizing", "ready"]
    assert job.ready and job.renditions["display"].url == "http://s/d.jpg"
    assert job.raw["extra"] == [1, 2]  # kept for whoever wants it


def test_on_status_is_called_on_each_change_only(api, time_):
    api.on("GET", JOB_PATH, job_answer("queued"), job_answer("queued"), job_answer("processing"),
           job_answer("processing"), job_answer("ready"))
    seen = []
    uploaded(api).wait(on_status=lambda j: seen.append(j.status))
    assert seen == [Status.QUEUED, Status.PROCESSING, Status.READY]


def test_connection_errors_while_polling_count_as_not_finished(api, time_):
    api.on("GET", JOB_PATH, httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), job_answer("ready"))
    assert uploaded(api).wait().ready
    assert time_.sleeps == [2, 3, 5]


def test_polling_gives_up_after_max_attempts_failures_in_a_row(api, time_):
    api.on("GET", JOB_PATH, job_answer("processing"), httpx.ConnectError("refused"))
    with pytest.raises(ConnectionFailed):
        uploaded(api, max_attempts=3).wait()
    assert len(api.sent("GET")) == 4 and time_.sleeps == [2, 3, 5, 8]


def test_an_unexpected_client_error_while_polling_is_raised(api, time_):
    api.on("GET", JOB_PATH, problem(400, "invalid_request"))
    with pytest.raises(InvalidRequest):
        uploaded(api).wait()


def test_a_job_resumed_from_its_location_polls_at_once_then_follows_the_schedule(time_):
    api = FakeApi(time_).on("GET", JOB_PATH, job_answer("processing"), job_answer("ready"))
    job = api.client().job("http://api.test" + JOB_PATH)
    assert job.status is None and not job.finished  # nothing fetched yet
    job.wait()
    assert api.times("GET", JOB_PATH) == [1000, 1003]
    assert job.job_id == "j-1"


# -- Prefer: wait -------------------------------------------------------------------------------

def held(status: str, etag: str = 'W/"v2"', applied: str = "wait=20", **fields) -> httpx.Response:
    answer = job_answer(status, **fields)
    answer.headers["ETag"] = etag
    if applied:
        answer.headers["Preference-Applied"] = applied
    return answer


def test_with_waits_each_poll_is_held_and_the_next_goes_at_once(api, time_):
    answers = [held("processing", 'W/"v2"'), held("processing", 'W/"v3"'), held("ready", 'W/"v4"')]

    def slow(answer, seconds):
        def respond(request):
            time_.now += seconds  # the server held it
            return answer
        return respond

    api.on("GET", JOB_PATH, *[slow(a, s) for a, s in zip(answers, (0.3, 20, 0.2))])
    job = uploaded(api, waits=True).wait()
    assert job.status == "ready" and time_.sleeps == []
    gets = [r for _, r in api.requests if r.method == "GET"]
    assert all(r.headers["Prefer"] == "wait=20" for r in gets)
    assert "If-None-Match" not in gets[0].headers  # the 202 had no ETag
    assert [r.headers.get("If-None-Match") for r in gets[1:]] == ['W/"v2"', 'W/"v3"']


def test_a_server_that_does_not_hold_gets_the_usual_schedule(api, time_):
    api.on("GET", JOB_PATH, *[job_answer("processing")] * 3, job_answer("ready"))
    job = uploaded(api, waits=True).wait()
    assert job.status == "ready"
    # One poll at once (it asked to be held), then the contract's schedule from that answer.
    assert time_.sleeps == [3, 5, 8]


def test_a_held_answer_back_at_once_and_unchanged_never_makes_a_tight_loop(api, time_):
    api.on("GET", JOB_PATH, *[held("processing", 'W/"v2"', applied="wait=1")] * 5, held("ready"))
    uploaded(api, waits=True).wait()
    # Every poll after an unchanged quick answer waits as scheduled: never faster than the contract.
    assert time_.sleeps == [5, 8, 15, 15]  # only the first (news: processing) is followed at once


def test_a_held_poll_asks_no_longer_than_the_deadline_or_the_read_timeout(api, time_):
    api.on("GET", JOB_PATH, held("ready"))
    uploaded(api, waits=True).wait(deadline=7)
    assert api.requests[-1][1].headers["Prefer"] == "wait=7"
    assert api.client(waits=True, timeout=9).hold_seconds == 7  # room for the answer


def test_upload_with_wait_asks_the_post_to_be_held_and_a_200_is_the_finished_job(time_):
    finished = httpx.Response(200, headers={"Location": JOB_PATH, "ETag": 'W/"v9"', "Preference-Applied": "wait=10"},
                              json={"job_id": "j-1", "status": "ready", "image_url": "u", "thumb_url": "t"})
    api = FakeApi(time_).on("POST", "/api/v1/images", finished)
    job = api.client(waits=True).upload(JPEG, wait=10)
    assert job.status == "ready" and job.location.endswith(JOB_PATH)
    assert api.requests[0][1].headers["Prefer"] == "wait=10"


def test_upload_without_wait_sends_no_prefer(api, time_):
    uploaded(api, waits=True)
    assert "Prefer" not in api.requests[0][1].headers


def test_a_wait_that_can_be_stopped_asks_for_short_holds(api, time_):
    api.on("GET", JOB_PATH, held("ready"))
    uploaded(api, waits=True).wait(stop=threading.Event())
    assert api.requests[-1][1].headers["Prefer"] == "wait=3"
