"""The SDK against the real local runner: both upload routes, polling, download, resume, cancel,
delete and typed refusals."""
from __future__ import annotations

import io
import uuid

import httpx
import pytest
from PIL import Image

from image_jobs import (Client, ImageTooLarge, InvalidImage, Job, JobFinished, JobNotFound, Unauthorized,
                        UnsupportedFormat)
from tests.client.conftest import jobs_of, noisy_png, token_for
from tests.images import jpeg


@pytest.fixture
def recorded(runner, owner):
    """A client whose every request is recorded, to see which route an upload took."""
    sent: list[httpx.Request] = []
    http = httpx.Client(timeout=30, event_hooks={"request": [sent.append]})
    with Client(runner.api, token_for(owner), http=http) as client:
        yield client, sent
    http.close()


def dimensions(path) -> tuple[int, int]:
    with Image.open(path) as image:
        return image.size


def test_a_small_photo_goes_through_images_and_comes_back_as_two_renditions(recorded, tmp_path):
    client, sent = recorded
    statuses = []
    job = client.upload(jpeg(3000, 2000))
    assert [r.url.path for r in sent] == ["/api/v1/images"] and job.status == "queued"
    job.wait(deadline=60, on_status=lambda j: statuses.append(j.status))
    assert job.ready and statuses[-1] == "ready" and job.finished_at is not None
    saved = job.download(tmp_path, stem="photo")
    assert set(saved) == {"display", "thumb", "thumb_512"}
    assert dimensions(saved["display"]) == (1280, 853) and dimensions(saved["thumb"]) == (256, 256)
    assert dimensions(saved["thumb_512"]) == (512, 512)
    assert saved["display"].name == "photo.display.jpg"


def test_downloads_are_keyed_by_cache_key_so_a_rendition_is_fetched_once(runner, owner, tmp_path):
    sent: list[httpx.Request] = []
    http = httpx.Client(timeout=30, event_hooks={"request": [sent.append]})
    with Client(runner.api, token_for(owner), http=http, cache_dir=tmp_path / "cache") as client:
        job = client.upload(jpeg(1600, 1200))
        job.wait(deadline=60)
        first = job.download(tmp_path / "a")
        assert client.downloads == len(first) == 3
        fetched = [r for r in sent if "/renditions/" in r.url.path]
        again = Job.from_location(job.location, client).refresh()  # another read, maybe other URLs
        second = again.download(tmp_path / "b")
        assert client.downloads == 3  # nothing fetched again
        assert [r for r in sent if "/renditions/" in r.url.path] == fetched
        assert all(first[n].read_bytes() == second[n].read_bytes() for n in first)
        assert {r.cache_key for r in again.renditions.values()} == {r.cache_key for r in job.renditions.values()}
    http.close()


def test_a_file_over_4_mib_takes_the_direct_route_to_storage(runner, recorded, tmp_path):
    client, sent = recorded
    path = tmp_path / "noise.png"
    path.write_bytes(noisy_png())
    size = path.stat().st_size
    assert size > 4 * 1024 * 1024
    progress = []
    job = client.upload(path, on_progress=lambda done, total: progress.append((done, total)))

    create, store, *polls = sent
    assert create.url.path == "/api/v1/uploads" and "Authorization" in create.headers
    assert f"{store.url.scheme}://{store.url.host}:{store.url.port}" == runner.aws  # storage itself
    assert "Authorization" not in store.headers and store.method == "PUT"  # one PUT, as a phone's
    # Then held polls of the job until storage's event has moved it: it has its file.
    assert polls and all(p.url.path == httpx.URL(job.location).path and "Prefer" in p.headers for p in polls)
    assert job.status != "awaiting_upload"
    assert progress[-1] == (size, size) and len(progress) > 10  # bytes reported as they go
    assert job.wait(deadline=90).ready
    saved = job.download(tmp_path / "out")
    assert dimensions(saved["display"]) == (1280, 1024) and dimensions(saved["thumb"]) == (256, 256)


def test_a_job_resumes_from_its_location_alone(runner, owner):
    with Client(runner.api, token_for(owner)) as client:
        location = client.upload(jpeg()).location
    assert location.startswith(runner.api + "/api/v1/image-jobs/")
    resumed = Job.from_location(location, token=token_for(owner))  # as after a restart
    assert resumed.status is None
    assert resumed.wait(deadline=60).ready and resumed.renditions["thumb"].width == 256


def test_cancel_then_delete_then_the_job_is_gone(recorded, owner, runner):
    client, _ = recorded
    # A job that waits for its file: nothing can finish it before the cancel lands.
    created = client.request("POST", "/api/v1/uploads", json={"content_type": "image/jpeg", "size": 1000},
                             headers={"Idempotency-Key": str(uuid.uuid4())})
    job = client.job(created.headers["Location"])
    assert job.cancel().status == "cancelled" and job.finished
    assert job.cancel().status == "cancelled"  # unchanged, still 200
    assert job.wait() is job  # finished: nothing to poll
    job.delete()
    with pytest.raises(JobNotFound):
        job.refresh()
    with pytest.raises(JobNotFound):
        client.job(job.job_id).wait(deadline=30)
    assert jobs_of(runner, owner) == []


def test_a_ready_job_cannot_be_cancelled(recorded):
    client, _ = recorded
    job = client.upload(jpeg()).wait(deadline=60)
    with pytest.raises(JobFinished):
        job.cancel()
    assert job.refresh().ready


def test_a_file_the_worker_cannot_decode_ends_failed_with_its_code(recorded):
    client, _ = recorded
    whole = io.BytesIO()
    Image.effect_noise((900, 700), 60).convert("RGB").save(whole, "JPEG", quality=95)
    truncated = whole.getvalue()[: len(whole.getvalue()) // 2]  # its header still reads
    job = client.upload(truncated).wait(deadline=60)
    assert job.status == "failed" and job.error is not None and job.error.code == "invalid_image"
    assert job.renditions == {}


def test_refusals_at_upload_are_typed(recorded):
    client, _ = recorded
    with pytest.raises(UnsupportedFormat):
        client.upload(b"just some text")
    with pytest.raises(InvalidImage):
        client.upload(b"\xff\xd8\xff\xe0" + b"\x00" * 200)
    big = io.BytesIO()
    Image.new("1", (8000, 7000)).save(big, "PNG")  # 56 MP in a few kB
    with pytest.raises(ImageTooLarge):
        client.upload(big.getvalue())


def test_another_owners_job_is_not_found_and_a_bad_token_is_unauthorized(runner, recorded):
    client, _ = recorded
    job = client.upload(jpeg())
    with Client(runner.api, token_for("someone-else")) as other:
        with pytest.raises(JobNotFound):
            other.job(job.location).wait(deadline=30)
    with Client(runner.api, "not-a-token") as anonymous:
        with pytest.raises(Unauthorized):
            anonymous.job(job.location).wait(deadline=30)
