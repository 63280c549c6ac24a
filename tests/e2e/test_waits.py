"""Prefer: wait through HTTP against the local runner (real worker, real table): one round trip
for a fast job, a held GET that ends on the change, and a held GET ended by a delete."""
from __future__ import annotations

import re
import threading
import time

import requests

from tests.e2e.test_images_api import headers
from tests.images import jpeg


def test_a_post_with_prefer_wait_answers_200_ready_in_one_round_trip(runner):
    key = f"wait-{time.time_ns()}"
    r = requests.post(f"{runner.api}/api/v1/images", data=jpeg(), timeout=40,
                      headers=headers(**{"Content-Type": "image/jpeg", "Prefer": "wait=20",
                                         "Idempotency-Key": key}))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "ready" and set(body["renditions"]) == {"display", "thumb", "thumb_512"}
    assert r.headers["Location"] == f"/api/v1/image-jobs/{body['job_id']}"
    # At most what it asked: less when the upload itself used some of the function's time.
    assert re.fullmatch(r"wait=(1\d|20)", r.headers["Preference-Applied"]) and r.headers["ETag"].startswith('W/"')
    # A replay with the same key: the same job, at once (it is terminal), as a replay.
    again = requests.post(f"{runner.api}/api/v1/images", data=jpeg(), timeout=40,
                          headers=headers(**{"Content-Type": "image/jpeg", "Prefer": "wait=20",
                                             "Idempotency-Key": key}))
    assert again.status_code == 200 and again.json()["job_id"] == body["job_id"]
    assert again.headers["Idempotent-Replayed"] == "true"
    # The ETag names the state: GET shows the same one, with other presigned URLs or not.
    got = requests.get(runner.api + r.headers["Location"], headers=headers(), timeout=10)
    assert got.headers["ETag"] == r.headers["ETag"]


def test_a_held_get_ends_when_the_job_changes_not_at_its_deadline(runner):
    r = requests.post(f"{runner.api}/api/v1/images", data=jpeg(), timeout=30,
                      headers=headers(**{"Content-Type": "image/jpeg"}))
    location, status = r.headers["Location"], r.json()["status"]
    started = time.monotonic()
    seen = [status]
    while seen[-1] not in ("ready", "failed"):
        got = requests.get(runner.api + location, timeout=30, headers=headers(Prefer="wait=20"))
        assert got.status_code == 200
        seen.append(got.json()["status"])
        assert "Preference-Applied" in got.headers or seen[-1] in ("ready", "failed")
    assert seen[-1] == "ready" and time.monotonic() - started < 15  # each answer came on a change
    assert len(seen) <= 4  # queued -> processing -> ready: one held GET per change at most


def test_a_job_deleted_while_a_get_waits_on_it_ends_the_wait_with_404(runner):
    # A direct upload stays awaiting_upload until its file comes: nothing else moves it.
    r = requests.post(f"{runner.api}/api/v1/uploads", json={"content_type": "image/jpeg", "size": 1000},
                      timeout=30, headers=headers())
    location = r.headers["Location"]
    answers = []
    waiting = threading.Thread(target=lambda: answers.append(requests.get(
        runner.api + location, timeout=30, headers=headers(Prefer="wait=15"))))
    started = time.monotonic()
    waiting.start()
    time.sleep(1.0)
    assert requests.delete(runner.api + location, headers=headers(), timeout=10).status_code == 204
    waiting.join(20)
    assert answers and answers[0].status_code == 404
    assert answers[0].json()["code"] == "job_not_found"
    assert time.monotonic() - started < 5  # not at the wait's 15 s
