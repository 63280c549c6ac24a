"""The whole flow through HTTP against the local runner: CONTRACT.md's upload and GET sections."""
from __future__ import annotations

import io
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
import requests
from PIL import Image

from chalicelib.adapters.dynamo_jobs import DynamoJobStore
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.config import Settings
from chalicelib.http.auth import mint_token
from tests.images import jpeg, png, size_of

SECRET = Settings().jwt_secret
PROBLEM_FIELDS = {"type", "title", "status", "detail", "code"}


def headers(owner="alice", **extra):
    return {"Authorization": f"Bearer {mint_token(owner, SECRET, 600, int(time.time()))}", **extra}


def upload_multipart(runner, data, owner="alice", name="file"):
    return requests.post(f"{runner.api}/api/v1/images", headers=headers(owner),
                         files={name: ("photo.jpg", data, "image/jpeg")}, timeout=30)


def upload_raw(runner, data, content_type="image/jpeg", owner="alice"):
    return requests.post(f"{runner.api}/api/v1/images", data=data, timeout=30,
                         headers=headers(owner, **{"Content-Type": content_type}))


def poll(runner, location, owner="alice", timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = requests.get(runner.api + location, headers=headers(owner), timeout=10)
        assert r.status_code == 200, r.text
        body = r.json()
        if body["status"] in ("ready", "failed", "cancelled"):
            return r
        assert r.headers["Retry-After"] == "2"
        time.sleep(0.2)
    pytest.fail(f"job {location} not finished after {timeout}s")


def assert_problem(r, status, code):
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"] == "application/problem+json"
    body = r.json()
    # `instance`: the request's correlation id (chalicelib/runtime/correlation.py), on every problem
    # the app answers, as X-Request-Id is; what the gateway answers itself has neither.
    request_id = r.headers.get("X-Request-Id")
    fields = PROBLEM_FIELDS | {"instance"} if request_id else PROBLEM_FIELDS
    assert set(body) == fields and body["code"] == code and body["status"] == status
    if request_id:
        assert body["instance"] == f"urn:uuid:{request_id}"
    return body


def test_upload_poll_ready_and_download_both_renditions(runner):
    r = upload_multipart(runner, jpeg(3000, 2000))
    assert r.status_code == 202, r.text
    body = r.json()
    assert set(body) == {"job_id", "status", "created_at"} and body["status"] == "queued"
    assert r.headers["Location"] == f"/api/v1/image-jobs/{body['job_id']}"
    assert r.headers["Retry-After"] == "2"

    done = poll(runner, r.headers["Location"])
    job = done.json()
    assert done.headers["Cache-Control"] == "no-store" and "Retry-After" not in done.headers
    assert job["status"] == "ready"
    assert set(job) == {"job_id", "status", "image_url", "thumb_url", "renditions",
                        "urls_expire_at", "placeholder", "phash", "source", "focus", "created_at", "finished_at",
                        "expires_at"}
    assert job["focus"]["source"] in ("faces", "saliency", "centre")
    assert job["renditions"]["display"] == {"url": job["image_url"], "width": 1280, "height": 853,
                                            "content_type": "image/jpeg", "variants": {},
                                            "cache_key": job["renditions"]["display"]["cache_key"]}
    assert {r["cache_key"] for r in job["renditions"].values()} != {None}
    assert job["renditions"]["thumb"]["url"] == job["thumb_url"]
    for url, size in [(job["image_url"], (1280, 853)), (job["thumb_url"], (256, 256))]:
        got = requests.get(url, timeout=10)
        assert got.status_code == 200
        assert size_of(got.content) == size
        assert Image.open(io.BytesIO(got.content)).format == "JPEG"
    for field in ("created_at", "finished_at", "expires_at", "urls_expire_at"):
        datetime.strptime(job[field], "%Y-%m-%dT%H:%M:%SZ")


def test_raw_png_body_with_transparency_becomes_ready(runner):
    r = upload_raw(runner, png(300, 200), content_type="image/png")
    assert r.status_code == 202, r.text
    job = poll(runner, r.headers["Location"]).json()
    assert job["status"] == "ready"
    assert (job["renditions"]["display"]["width"], job["renditions"]["display"]["height"]) == (300, 200)


def test_an_image_that_cannot_be_decoded_ends_failed_with_a_safe_error(runner):
    whole = jpeg(2000, 1500, color=(12, 34, 56))
    r = upload_raw(runner, whole[: len(whole) // 3])  # header readable, pixels cut off
    assert r.status_code == 202, r.text
    job = poll(runner, r.headers["Location"]).json()
    assert job["status"] == "failed"
    assert job["error"] == {"code": "invalid_image", "message": "The image could not be processed"}
    assert set(job) == {"job_id", "status", "error", "source", "created_at", "finished_at", "expires_at"}
    assert job["source"]["width"] == 2000  # its header was readable


@pytest.mark.parametrize("auth", [None, "Bearer nonsense", "Basic YWxpY2U6cHc="])
def test_missing_or_bad_token_is_401(runner, auth):
    h = {"Content-Type": "image/jpeg"}
    if auth:
        h["Authorization"] = auth
    r = requests.post(f"{runner.api}/api/v1/images", data=jpeg(), headers=h, timeout=10)
    assert_problem(r, 401, "unauthorized")
    r = requests.get(f"{runner.api}/api/v1/image-jobs/x", headers={k: v for k, v in h.items() if k != "Content-Type"}, timeout=10)
    assert_problem(r, 401, "unauthorized")


def test_file_over_4_mib_is_413_raw_and_multipart(runner):
    big = b"\xff\xd8\xff\xe0" + b"\x00" * (4 * 1024 * 1024)
    assert_problem(upload_raw(runner, big), 413, "file_too_large")
    assert_problem(upload_multipart(runner, big), 413, "file_too_large")


def test_type_is_sniffed_from_the_bytes_not_the_header(runner):
    assert_problem(upload_raw(runner, b"%PDF-1.7\n" + b"0" * 100, "image/jpeg"), 415, "unsupported_format")
    assert_problem(upload_multipart(runner, b"GIF-ish but not really"), 415, "unsupported_format")
    r = upload_raw(runner, png(40, 30, mode="RGB"), content_type="image/jpeg")  # a PNG labelled JPEG
    assert r.status_code == 202


def test_unreadable_header_is_422_invalid_image(runner):
    assert_problem(upload_raw(runner, b"\x89PNG\r\n\x1a\n" + b"\x00" * 64), 422, "invalid_image")


def test_too_many_pixels_is_422_image_too_large(runner):
    r = upload_raw(runner, jpeg(8000, 7000))  # 56 MP, small on the wire
    assert_problem(r, 422, "image_too_large")


def test_multipart_without_a_file_part_is_400(runner):
    assert_problem(upload_multipart(runner, jpeg(), name="photo"), 400, "invalid_request")


def test_unknown_and_someone_elses_job_are_both_404(runner):
    r = upload_raw(runner, jpeg())
    location = r.headers["Location"]
    assert_problem(requests.get(runner.api + location, headers=headers("mallory"), timeout=10),
                   404, "job_not_found")
    unknown = "/api/v1/image-jobs/5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0"
    assert_problem(requests.get(runner.api + unknown, headers=headers(), timeout=10), 404, "job_not_found")


def test_a_job_past_its_expiry_is_410_even_before_the_ttl_deletes_it(runner):
    r = upload_raw(runner, jpeg())
    job_id = r.json()["job_id"]
    poll(runner, r.headers["Location"])
    settings = Settings(endpoint_url=runner.aws)
    store = DynamoJobStore(DynamoTable(settings.table, settings.region, runner.aws))
    job = store.get(job_id)
    store.move(replace(job, expires_at=datetime.now(timezone.utc) - timedelta(seconds=1)), job.status)
    assert_problem(requests.get(runner.api + r.headers["Location"], headers=headers(), timeout=10),
                   410, "job_expired")
