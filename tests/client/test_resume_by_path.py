"""upload(path) with a resume_dir (issue 52): the record is keyed by the file's path, size and
modification time, so the same call after a cut resumes the saved job, and an edited file is
another upload. On a scripted API."""
from __future__ import annotations

import os

import httpx
import pytest
from image_jobs import ConnectionFailed

from tests.client.fakes import JOB_PATH, JPEG, FakeApi, FakeTime, accepted, job_answer

UPLOADS = "/api/v1/uploads"
DATA = JPEG * 40


def parts(stored=()):
    sizes = (1000, 1000, len(DATA) - 2000)
    return {"method": "multipart", "part_size": 1000, "expires_at": "2026-07-15T10:15:00Z", "parts": [
        {"part_number": n, "size": s, "stored": n in stored, **({"etag": '"e"'} if n in stored else
                                                                 {"url": f"http://storage.test/part/{n}"})}
        for n, s in enumerate(sizes, start=1)]}


def cut_api() -> FakeApi:
    """An upload whose second part's connection is lost."""
    api = FakeApi(FakeTime()).on("POST", UPLOADS, accepted("awaiting_upload", upload=parts()))
    api.on("PUT", "/part/1", httpx.Response(200, headers={"ETag": '"e"'}))
    api.on("PUT", "/part/2", httpx.ConnectError("lost"))
    api.on("PUT", "/part/3", httpx.ConnectError("lost"))
    return api


def cut(api: FakeApi, photo, folder):
    client = api.client(max_upload_bytes=10, multipart_threshold=100, max_attempts=1, resume_dir=folder)
    with pytest.raises(ConnectionFailed) as failed:
        client.upload(photo)
    return failed.value


def test_the_same_upload_of_a_path_after_a_cut_resumes_its_saved_job(tmp_path):
    photo = tmp_path / "p.jpg"
    photo.write_bytes(DATA)
    folder = tmp_path / "records"
    failed = cut(cut_api(), photo, folder)
    (record,) = folder.glob("*.json")
    assert failed.state == record and JOB_PATH in record.read_text()

    api = FakeApi(FakeTime()).on("GET", JOB_PATH, job_answer("awaiting_upload"), job_answer("queued"))
    api.on("GET", JOB_PATH + "/upload", httpx.Response(200, json=parts(stored={1})))
    for n in (2, 3):
        api.on("PUT", f"/part/{n}", httpx.Response(200, headers={"ETag": '"e"'}))
    api.on("POST", JOB_PATH + "/upload", job_answer("queued"))
    events = []
    job = api.client(max_upload_bytes=10, multipart_threshold=100, resume_dir=folder).upload(
        photo, on_progress=lambda sent, total: events.append(sent))
    assert job.status == "queued" and api.sent("POST", UPLOADS) == []
    assert sorted(r.url.path for r in api.sent("PUT")) == ["/part/2", "/part/3"]  # only what storage lacks
    assert events[0] == 1000  # from what storage holds
    assert list(folder.glob("*.json")) == []  # done: the next upload of this file is a new one


def test_a_file_edited_since_the_cut_is_another_upload_with_another_key(tmp_path):
    photo = tmp_path / "p.jpg"
    photo.write_bytes(DATA)
    folder = tmp_path / "records"
    first = cut_api()
    cut(first, photo, folder)
    stat = photo.stat()
    os.utime(photo, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # touched: modified
    second = cut_api()
    cut(second, photo, folder)
    keys = [api.sent("POST", UPLOADS)[0].headers["Idempotency-Key"] for api in (first, second)]
    assert keys[0] != keys[1] and second.sent("GET") == []  # never resumed into the old parts
    assert len(list(folder.glob("*.json"))) == 2
