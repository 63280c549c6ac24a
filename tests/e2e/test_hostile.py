"""A hostile corpus and an unfair owner, through HTTP against the local runner."""
from __future__ import annotations

import concurrent.futures
import time

import pytest
import requests

from tests import hostile
from tests.e2e.test_images_api import assert_problem, headers, poll
from tests.images import jpeg
from tests.local_runner import ApiAt, dedicated_runner


def send(api: str, data: bytes, owner: str = "hostile", content_type: str = "application/octet-stream"):
    return requests.post(f"{api}/api/v1/images", data=data, timeout=60,
                         headers=headers(owner, **{"Content-Type": content_type}))


REFUSED_AT_UPLOAD = [
    ("scan bomb", lambda: hostile.scan_bomb(1000, 1000, 3000), 422, "image_too_complex"),
    ("frame bomb", lambda: hostile.frame_bomb(1200), 422, "image_too_complex"),
    ("page bomb", lambda: hostile.page_bomb(1500), 422, "image_too_complex"),
    ("huge profile", lambda: hostile.huge_profile_jpeg(2 * 1024 * 1024), 422, "image_too_complex"),
    ("one pixel over the limit", lambda: hostile.png_header(10_000, 5_001), 422, "image_too_large"),
    ("GIF magic then HTML", hostile.gif_html_polyglot, 422, "invalid_image"),
    ("zero bytes", lambda: b"", 400, "invalid_request"),
    ("no image at all", lambda: b"%PDF-1.7\n" + b"0" * 100, 415, "unsupported_format"),
]

ACCEPTED_THEN = [
    ("exactly the pixel limit, no pixel data", lambda: hostile.png_header(10_000, 5_000), "failed", "invalid_image"),
    ("truncated JPEG", hostile.truncated_jpeg, "failed", "invalid_image"),
    ("JPEG with a ZIP appended", hostile.jpeg_with_zip_appended, "ready", None),
]


@pytest.mark.parametrize("name,make,status,code", REFUSED_AT_UPLOAD, ids=[c[0] for c in REFUSED_AT_UPLOAD])
def test_hostile_files_are_refused_at_upload_with_their_code(runner, name, make, status, code):
    started = time.monotonic()
    assert_problem(send(runner.api, make()), status, code)
    assert time.monotonic() - started < 10  # refused from the structure, never decoded


@pytest.mark.parametrize("name,make,status,code", ACCEPTED_THEN, ids=[c[0] for c in ACCEPTED_THEN])
def test_files_that_pass_the_header_end_with_the_right_status(runner, name, make, status, code):
    r = send(runner.api, make())
    assert r.status_code == 202, r.text
    body = poll(runner, r.headers["Location"], owner="hostile").json()
    assert body["status"] == status
    if code:
        assert body["error"]["code"] == code


def test_an_image_over_its_cpu_budget_fails_image_too_complex_in_the_worker():
    """The structure allowed (scan limit raised), the CPU limit stops it in the worker."""
    with dedicated_runner(MAX_SCANS="100000", DECODE_CPU_SECONDS="1",
                    WORKER_CONCURRENCY="1") as api:
        bomb = hostile.scan_bomb(3000, 3000, 3000)
        r = send(api, bomb)
        assert r.status_code == 202, r.text
        body = poll(ApiAt(api), r.headers["Location"], owner="hostile", timeout=90).json()
        assert body["status"] == "failed" and body["error"]["code"] == "image_too_complex"


def test_one_owner_flooding_cannot_hold_up_another():
    """Quota 3 and a flood of CPU-costly files: the flooder gets 429 past its quota, and an
    honest owner's job waits behind at most the flooder's 3, not behind all 12."""
    with dedicated_runner(MAX_SCANS="100000", DECODE_CPU_SECONDS="1", MAX_ACTIVE_JOBS="3",
                    WORKER_CONCURRENCY="1") as api:
        bomb = hostile.scan_bomb(3000, 3000, 3000)
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(lambda _: send(api, bomb, owner="flooder"), range(12)))
        accepted = [r for r in answers if r.status_code == 202]
        limited = [r for r in answers if r.status_code == 429]
        assert len(accepted) <= 3 + 1 and len(accepted) + len(limited) == 12  # +1: one may finish meanwhile
        for r in limited:
            assert_problem(r, 429, "rate_limited")
            assert int(r.headers["Retry-After"]) >= 1
        started = time.monotonic()
        honest = send(api, jpeg(), owner="honest", content_type="image/jpeg")
        assert honest.status_code == 202, honest.text
        body = poll(ApiAt(api), honest.headers["Location"], owner="honest", timeout=60).json()
        assert body["status"] == "ready"
        assert time.monotonic() - started < 30  # behind at most a few 1-second CPU limits


def test_an_owner_past_its_request_rate_gets_429_with_retry_after():
    with dedicated_runner(LOCAL_COMPONENTS="api", OWNER_REQUESTS_PER_SECOND="1",
                    OWNER_BURST="3") as api:
        url = f"{api}/api/v1/image-jobs/00000000-0000-4000-8000-000000000000"
        codes = [requests.get(url, headers=headers("eager"), timeout=10).status_code for _ in range(6)]
        assert codes[:3] == [404, 404, 404] and 429 in codes[3:]
        limited = requests.get(url, headers=headers("eager"), timeout=10)
        assert_problem(limited, 429, "rate_limited")
        assert int(limited.headers["Retry-After"]) >= 1
        assert requests.get(url, headers=headers("patient"), timeout=10).status_code == 404
