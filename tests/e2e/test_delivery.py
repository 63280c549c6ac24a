"""Renditions an app can cache, through HTTP and storage on every backend: two reads in a
window give byte-identical URLs that storage serves, with Cache-Control immutable and the
exact Content-Type; on LocalStack and the RADOS Gateway (which check expiry) a URL handed out
at its window's last second still works a window later, and one whose window has passed is
refused. The service's clock is shifted for that (its GET code, in-process, on the runner's
table and storage); storage keeps the real time, so nothing sleeps."""
from __future__ import annotations

import time
from urllib.parse import unquote, urlsplit
from datetime import datetime, timedelta, timezone

import pytest
import requests
from botocore.credentials import Credentials

from chalicelib.adapters.dynamo_jobs import DynamoJobStore
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.adapters.s3_presign import GetPresigner
from chalicelib.adapters.s3_store import S3Store
from chalicelib.config import Settings
from chalicelib.usecases.manage import ManageJobs
from tests.e2e.test_images_api import headers, poll
from tests.e2e.test_upload_methods import BUCKET, s3
from tests.fakes import fake_context
from tests.images import photo

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def urls_of(body):
    return [body["image_url"], body["thumb_url"]] + [
        url for r in body["renditions"].values()
        for url in (r["url"], *(v["url"] for v in r["variants"].values()))]


def two_reads_in_one_window(runner, location):
    """Two GETs whose windows are the same (a read straddling a window's end reads again)."""
    for _ in range(3):
        first = requests.get(runner.api + location, headers=headers(), timeout=10)
        again = requests.get(runner.api + location, headers=headers(), timeout=10)
        if first.json()["urls_expire_at"] == again.json()["urls_expire_at"]:
            return first, again
    pytest.fail("three pairs of reads each straddled a window's end")


@pytest.fixture(scope="module")
def ready(runner):
    r = requests.post(f"{runner.api}/api/v1/images?formats=webp", data=photo(), timeout=30,
                      headers=headers(**{"Content-Type": "image/jpeg"}))
    assert r.status_code == 202, r.text
    location = r.headers["Location"]
    assert poll(runner, location).json()["status"] == "ready"
    return location


def test_two_reads_in_a_window_give_the_same_urls_which_storage_serves_immutable(runner, ready):
    first, again = two_reads_in_one_window(runner, ready)
    a, b = first.json(), again.json()
    assert urls_of(a) == urls_of(b) and a == b
    assert first.headers["ETag"] == again.headers["ETag"]
    expires = datetime.strptime(a["urls_expire_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert expires - datetime.now(timezone.utc) >= timedelta(seconds=3600 - 5)  # a window more, at least
    assert int((expires - EPOCH).total_seconds()) % 3600 == 0
    for rendition in a["renditions"].values():
        shown = [(rendition["url"], rendition["content_type"], rendition["cache_key"])]
        shown += [(v["url"], t, v["cache_key"]) for t, v in rendition["variants"].items()]
        for url, content_type, key in shown:
            got = requests.get(url, timeout=10)
            assert got.status_code == 200, got.text
            assert got.headers["Content-Type"] == content_type
            assert got.headers["Cache-Control"] == "public, max-age=604800, immutable"
            # A URL presigned for GET signs the method: HEAD by the SDK, as a CDN would.
            head = s3(runner).head_object(Bucket=BUCKET, Key=unquote(urlsplit(url).path).split("/", 2)[2])
            assert head["CacheControl"] == "public, max-age=604800, immutable"
            assert head["ContentType"] == content_type
            assert len(key) == 24
    assert len({k for r in a["renditions"].values() for k in [r["cache_key"], *(v["cache_key"] for v in r["variants"].values())]}) == \
        sum(1 + len(r["variants"]) for r in a["renditions"].values())


def test_an_original_is_stored_private_no_store(runner, ready):
    job_id = ready.rsplit("/", 1)[1]
    assert s3(runner).head_object(Bucket=BUCKET, Key=f"originals/{job_id}")["CacheControl"] == "private, no-store"


def service_at(runner, handed_out: int, window: int) -> ManageJobs:
    """The GET's use case with its clock at `handed_out` (microseconds too), on the runner's
    table and storage, with the runner's credentials."""
    settings = Settings(endpoint_url=runner.aws, s3_endpoint_url=runner.s3,
                        url_window_seconds=window, url_ttl_seconds=window)
    credentials = Credentials("test", "test")
    presigner = GetPresigner(lambda: credentials, settings.region, settings.presign_endpoint_url, client=None)
    objects = S3Store(None, settings.bucket, get_presigner=presigner)
    jobs = DynamoJobStore(DynamoTable(settings.table, settings.region, runner.aws))
    now = EPOCH + timedelta(seconds=handed_out, microseconds=999_000)
    return ManageJobs(fake_context(settings=settings, jobs=jobs, objects=objects, clock=lambda: now))


def find_window(search):
    """An expiry time from `search` and a window length near an hour that divides it: windows
    start on multiples of their length, and a URL handed out in a window's last second
    expires a window and URL_TTL_SECONDS (here the same) after its start."""
    for expires_at in search:
        for window in range(3000, 6000):
            if expires_at % window == 0:
                return expires_at, window
    pytest.fail("no window found")


def test_a_url_handed_out_at_its_windows_end_still_works_a_window_later(runner, ready):
    job = DynamoJobStore(DynamoTable(Settings().table, "us-east-1", runner.aws)).get(ready.rsplit("/", 1)[1])
    now = int(time.time())
    # Handed out in the last second of its window, a window (less a few seconds) ago.
    expires_at, window = find_window(range(now + 8, now + 60))
    handed_out = expires_at - window - 1
    urls = ManageJobs.urls(service_at(runner, handed_out, window), job)
    assert int((urls.expires_at - EPOCH).total_seconds()) == expires_at
    assert now - handed_out >= window - 60
    for url in urls.by_name.values():
        assert f"X-Amz-Date={(EPOCH + timedelta(seconds=handed_out - window + 1)):%Y%m%dT%H%M%SZ}" in url
        got = requests.get(url, timeout=10)
        assert got.status_code == 200, got.text
    # Its expiry is truthful where storage checks it: one whose urls_expire_at has just passed
    # is refused (moto checks no presigned URL's expiry: README).
    expires_at, window = find_window(range(now - 3, now - 60, -1))
    late = ManageJobs.urls(service_at(runner, expires_at - window - 1, window), job)
    for url in late.by_name.values():
        status = requests.get(url, timeout=10).status_code
        assert status == (403 if runner.strict else 200), (runner.backend, status)


def test_a_url_ends_with_its_job_where_storage_checks_it(runner, ready):
    """Issue 47, item 4: the signature itself ends at the job's expires_at, not only what
    urls_expire_at claims. A job whose end has just passed gets URLs that storage refuses
    (LocalStack, the RADOS Gateway), where the same read of a job ending later gets working
    ones; moto checks no expiry."""
    import dataclasses

    job = DynamoJobStore(DynamoTable(Settings().table, "us-east-1", runner.aws)).get(ready.rsplit("/", 1)[1])
    now = int(time.time())
    window = next(w for w in range(3600, 6000) if now % w > 60)  # the job's end well inside the window
    service = service_at(runner, now, window)
    ended = dataclasses.replace(job, expires_at=EPOCH + timedelta(seconds=now - 3, microseconds=500_000))
    cut = ManageJobs.urls(service, ended)
    assert int((cut.expires_at - EPOCH).total_seconds()) == now - 3
    for url in cut.by_name.values():
        status = requests.get(url, timeout=10).status_code
        assert status == (403 if runner.strict else 200), (runner.backend, status)
    live = ManageJobs.urls(service, dataclasses.replace(job, expires_at=EPOCH + timedelta(seconds=now + 3600)))
    for url in live.by_name.values():
        assert requests.get(url, timeout=10).status_code == 200
