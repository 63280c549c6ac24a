"""PreparedUpload's rules on a scripted API (issue 52): the plain requests from each upload
shape, what POST /uploads is asked, the saved dict as JSON and back, renew() and complete()."""
from __future__ import annotations

import base64
import hashlib
import json

import httpx
import pytest
from image_jobs import PreparedUpload, UploadIncomplete, UploadRequest

from tests.client.fakes import JOB_PATH, JPEG, FakeApi, FakeTime, accepted, job_answer, problem

UPLOADS = "/api/v1/uploads"
MIB = 1024 * 1024


def multipart(stored=()):
    sizes = [8 * MIB, 8 * MIB, MIB]
    return {"method": "multipart", "part_size": 8 * MIB, "expires_at": "2026-07-15T10:15:00Z", "parts": [
        {"part_number": n, "size": s, "stored": True, "etag": f'"e{n}"'} if n in stored else
        {"part_number": n, "size": s, "stored": False, "url": f"http://storage.test/part/{n}?sig={n}"}
        for n, s in enumerate(sizes, start=1)]}


def put():
    return {"method": "PUT", "url": "http://storage.test/bucket/originals/j-1?sig", "expires_at": "2026-07-15T10:15:00Z",
            "headers": {"Content-Type": "image/jpeg", "x-amz-checksum-sha256": "abc="}}


@pytest.fixture
def api():
    return FakeApi(FakeTime())


def test_a_multipart_upload_is_one_plain_request_a_part_from_its_offset(api):
    api.on("POST", UPLOADS, accepted("awaiting_upload", upload=multipart()))
    prepared = api.client(multipart_threshold=16 * MIB).prepare_upload(
        size=17 * MIB, content_type="image/heic", idempotency_key="k-1", metadata={"a": "b"}, formats=["avif"],
        renditions=["thumb_512"])
    (create,) = api.sent("POST", UPLOADS)
    assert json.loads(create.content) == {"content_type": "image/heic", "size": 17 * MIB, "method": "multipart",
                                          "metadata": {"a": "b"}, "formats": ["avif"], "renditions": ["thumb_512"]}
    assert create.headers["Idempotency-Key"] == "k-1"
    assert prepared.requests == [
        UploadRequest("PUT", f"http://storage.test/part/{n}?sig={n}",
                      {"Content-Length": str(length), "Content-Type": "application/octet-stream"}, offset, length, n)
        for n, offset, length in ((1, 0, 8 * MIB), (2, 8 * MIB, 8 * MIB), (3, 16 * MIB, MIB))]
    assert prepared.job.status == "awaiting_upload" and prepared.expires_at == "2026-07-15T10:15:00Z"


def test_a_file_below_the_multipart_threshold_is_one_put_pinned_by_its_checksum(api, tmp_path):
    photo = tmp_path / "p.jpg"
    photo.write_bytes(JPEG * 100)
    api.on("POST", UPLOADS, accepted("awaiting_upload", upload=put()))
    prepared = api.client(max_upload_bytes=10).prepare_upload(photo)
    body = json.loads(api.sent("POST", UPLOADS)[0].content)
    assert body == {"content_type": "image/jpeg", "size": len(JPEG) * 100, "method": "PUT",
                    "sha256": base64.b64encode(hashlib.sha256(JPEG * 100).digest()).decode()}
    (request,) = prepared.requests
    assert request.headers == {**put()["headers"], "Content-Length": str(len(JPEG) * 100)}
    assert (request.offset, request.length, request.part_number) == (0, len(JPEG) * 100, None)


def test_a_file_under_the_api_limit_is_still_prepared_for_storage_never_posted_through_the_api(api):
    api.on("POST", UPLOADS, accepted("awaiting_upload", upload=put()))
    api.client().prepare_upload(JPEG)  # 64 bytes, far under max_upload_bytes
    assert [r.url.path for r in api.sent("POST")] == [UPLOADS]


def test_without_a_file_the_size_and_type_are_needed(api):
    with pytest.raises(ValueError):
        api.client().prepare_upload(size=10)


def saved(method: str, **extra) -> dict:
    """What to_dict() (and the JavaScript package's toJSON()) writes."""
    return {"version": 1, "job": "http://api.test" + JOB_PATH, "method": method, "size": 17 * MIB,
            "contentType": "image/jpeg", "partSize": 8 * MIB if method == "multipart" else None,
            "expiresAt": None, "requests": [], "record": None, **extra}


def test_the_saved_dict_is_json_in_the_javascript_packages_shape_and_another_client_takes_it_up(api):
    api.on("POST", UPLOADS, accepted("awaiting_upload", upload=multipart()))
    prepared = api.client(multipart_threshold=16 * MIB).prepare_upload(size=17 * MIB, content_type="image/jpeg")
    kept = json.loads(json.dumps(prepared.to_dict()))
    assert set(kept) == {"version", "job", "method", "size", "contentType", "partSize", "expiresAt", "requests",
                         "record"}  # clients/js/src/prepared.ts, SavedUpload
    assert set(kept["requests"][0]) == {"method", "url", "headers", "offset", "length", "partNumber"}
    restored = PreparedUpload.from_dict(kept, FakeApi(FakeTime()).client())
    assert restored.to_dict() == kept and restored.requests == prepared.requests
    assert restored.job.location == prepared.job.location and "tok" not in json.dumps(kept)
    with pytest.raises(ValueError):
        PreparedUpload.from_dict({**kept, "version": 99}, api.client())


def test_renew_lists_only_the_parts_storage_lacks_with_fresh_urls_then_nothing_once_arrived(api):
    api.on("GET", JOB_PATH + "/upload", httpx.Response(200, json=multipart(stored={1, 3})),
           job_answer("queued"))
    prepared = api.client().prepared(saved("multipart"))
    assert [(r.part_number, r.offset) for r in prepared.renew()] == [(2, 8 * MIB)]
    assert prepared.expires_at == "2026-07-15T10:15:00Z"
    assert prepared.renew() == [] and prepared.job.status == "queued"


def test_complete_posts_the_multipart_completion_and_names_the_parts_storage_lacks(api):
    api.on("POST", JOB_PATH + "/upload", problem(400, "invalid_request"), job_answer("queued"))
    api.on("GET", JOB_PATH + "/upload", httpx.Response(200, json=multipart(stored={1, 3})))
    prepared = api.client().prepared(saved("multipart"))
    with pytest.raises(UploadIncomplete) as incomplete:
        prepared.complete()
    assert incomplete.value.missing == [2] and [r.part_number for r in prepared.requests] == [2]
    assert prepared.complete().status == "queued" and prepared.requests == []
    assert all(r.content == b"" for r in api.sent("POST", JOB_PATH + "/upload"))  # the server lists the parts


def test_complete_of_a_single_put_waits_until_the_job_has_left_awaiting_upload(api):
    held = {"Retry-After": "2", "Preference-Applied": "wait=20"}
    api.on("GET", JOB_PATH, job_answer("awaiting_upload"),
           httpx.Response(200, headers=held, json={"job_id": "j-1", "status": "awaiting_upload"}),
           httpx.Response(200, headers=held, json={"job_id": "j-1", "status": "queued"}))
    prepared = api.client(waits=True).prepared(saved("PUT", size=10))
    assert prepared.complete().status == "queued"
    assert api.sent("POST") == []


def test_complete_of_a_put_whose_file_storage_never_told_of_is_incomplete(api):
    api.on("GET", JOB_PATH, job_answer("awaiting_upload"))
    with pytest.raises(UploadIncomplete) as incomplete:
        api.client().prepared(saved("PUT", size=10)).complete(timeout=10)
    assert incomplete.value.missing == [] and incomplete.value.job.status == "awaiting_upload"


def test_the_focus_goes_as_the_contract_says_on_either_route(api):
    """`?focus=x,y` on POST /images, `"focus": {"x", "y"}` in POST /uploads (and prepare_upload)."""
    api.on("POST", "/api/v1/images", accepted("queued"))
    api.on("POST", UPLOADS, accepted("awaiting_upload", upload=put()))
    client = api.client()
    client.upload(JPEG, focus=(0.25, 0.5), formats=["avif"])
    client.prepare_upload(JPEG, focus=(0.25, 0.5))
    (images,) = api.sent("POST", "/api/v1/images")
    assert images.url.params["focus"] == "0.25,0.5" and images.url.params["formats"] == "avif"
    assert json.loads(api.sent("POST", UPLOADS)[0].content)["focus"] == {"x": 0.25, "y": 0.5}
