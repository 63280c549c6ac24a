"""POST /uploads by "PUT" and by "multipart" through HTTP, on moto's server and on LocalStack
(tests/e2e/conftest.py runs each test on both).

Where they differ: LocalStack checks a presigned URL's signature and expiry, so storage itself
refuses a PUT of another length, type or checksum and a part URL past its expiry. moto checks
neither (it stores whatever is sent): there the worker's own check ends such a job `failed`,
never `ready`, and an expired URL still works.
"""
from __future__ import annotations

import base64
import hashlib
import time
import uuid
from urllib.parse import urlsplit, urlunsplit

import boto3
from botocore.exceptions import ClientError
import pytest
import requests

from chalicelib.config import MIB, Settings
from tests.e2e.test_images_api import headers, poll
from tests.images import jpeg
from tests.proxy import TcpProxy

BUCKET = Settings().bucket
ORIGINALS = Settings().originals_prefix


def padded_jpeg(size: int) -> bytes:
    """A JPEG of exactly `size` bytes: decoders stop at its end-of-image marker."""
    data = jpeg(1600, 1200)
    return data + b"\0" * (size - len(data))


def create(runner, data, method, key=None, sha256=None, content_type="image/jpeg", size=None):
    body = {"content_type": content_type, "size": len(data) if size is None else size, "method": method}
    if sha256 is not None:
        body["sha256"] = sha256
    extra = {"Content-Type": "application/json"}
    if key is not None:
        extra["Idempotency-Key"] = key
    r = requests.post(f"{runner.api}/api/v1/uploads", json=body, headers=headers(**extra), timeout=30)
    assert r.status_code == 202, r.text
    return r


def sha256_of(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def put_file(upload, data, **changed):
    return requests.put(upload["url"], data=data, headers={**upload["headers"], **changed}, timeout=60)


def put_parts(upload, data, numbers=None, via=None):
    """PUT the parts not stored (those in `numbers`, if given); {number: ETag}. `via`: a proxy
    port to send them through, with the Host the URL was signed for."""
    etags = {}
    for part in upload["parts"]:
        if part["stored"] or (numbers is not None and part["part_number"] not in numbers):
            continue
        start = (part["part_number"] - 1) * upload["part_size"]
        url, extra = part["url"], {}
        if via is not None:
            split = urlsplit(url)
            extra["Host"] = split.netloc
            url = urlunsplit(split._replace(netloc=f"127.0.0.1:{via}"))
        answer = requests.put(url, data=data[start:start + part["size"]], headers=extra, timeout=60)
        assert answer.status_code == 200, answer.text
        etags[part["part_number"]] = answer.headers["ETag"]
    return etags


def upload_of(runner, location):
    return requests.get(f"{runner.api}{location}/upload", headers=headers(), timeout=30)


def complete(runner, location, etags=None):
    body = None if etags is None else {"parts": [{"part_number": n, "etag": e} for n, e in sorted(etags.items())]}
    return requests.post(f"{runner.api}{location}/upload", json=body, headers=headers(), timeout=60)


def s3(runner):
    return boto3.client("s3", endpoint_url=runner.s3, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test")


def uploads_in_progress(runner, key):
    listed = s3(runner).list_multipart_uploads(Bucket=BUCKET, Prefix=key)
    return listed.get("Uploads", [])


def parts_stored(runner, key, upload_id):
    try:
        return len(s3(runner).list_parts(Bucket=BUCKET, Key=key, UploadId=upload_id).get("Parts", []))
    except ClientError as error:
        # S3 (and LocalStack, moto): NoSuchUpload; the RADOS Gateway: NoSuchKey.
        expected = "NoSuchKey" if runner.backend == "rgw" else "NoSuchUpload"
        assert error.response["Error"]["Code"] == expected
        return 0


# ---------------------------------------------------------------------------- PUT


def test_a_phone_style_put_becomes_ready(runner):
    data = jpeg(1600, 1200)
    r = create(runner, data, "PUT", sha256=sha256_of(data))
    upload = r.json()["upload"]
    assert set(upload) == {"method", "url", "headers", "expires_at"} and upload["method"] == "PUT"
    assert upload["headers"]["Content-Length"] == str(len(data))
    assert put_file(upload, data).status_code == 200
    job = poll(runner, r.headers["Location"]).json()
    assert job["status"] == "ready" and job["renditions"]["display"]["width"] == 1280


@pytest.mark.parametrize("change", ["length", "type", "checksum"])
def test_a_put_of_other_bytes_than_signed_is_refused_by_storage_or_ends_failed(runner, change):
    data = jpeg(800, 600)
    r = create(runner, data, "PUT", sha256=sha256_of(data))
    upload = r.json()["upload"]
    # The RADOS Gateway checks the signature but not the checksum header (Ceph 16).
    refused = runner.backend == "localstack" or (runner.backend == "rgw" and change != "checksum")
    if change == "length":
        sent = put_file(upload, data + b"\0" * 10, **{"Content-Length": str(len(data) + 10)})
    elif change == "type":
        sent = put_file(upload, data, **{"Content-Type": "image/png"})
    else:
        other = bytearray(data)
        other[-3] ^= 0xFF
        sent = put_file(upload, bytes(other))
    if refused:
        assert sent.status_code in (400, 403), sent.text  # the signature or the checksum
        time.sleep(1.5)
        job = requests.get(runner.api + r.headers["Location"], headers=headers(), timeout=10).json()
        assert job["status"] == "awaiting_upload"
        assert put_file(upload, data).status_code == 200  # the right bytes still go through
        assert poll(runner, r.headers["Location"]).json()["status"] == "ready"
    else:
        assert sent.status_code == 200  # moto checks no signature and no checksum, rgw no checksum
        job = poll(runner, r.headers["Location"]).json()
        # A changed Content-Type header alone leaves the bytes as declared: moto stores the
        # object under the other type, and the bytes make the job.
        assert job["status"] == ("ready" if change == "type" else "failed")


def test_the_same_idempotency_key_answers_the_same_put_and_multipart_upload(runner):
    key = str(uuid.uuid4())
    data = padded_jpeg(17 * MIB)
    first = create(runner, data, "multipart", key=key)
    again = create(runner, data, "multipart", key=key)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["job_id"] == first.json()["job_id"]
    assert len(uploads_in_progress(runner, ORIGINALS + first.json()["job_id"])) == 1
    small = jpeg(200, 100)
    put_key = str(uuid.uuid4())
    assert create(runner, small, "PUT", key=put_key).json()["job_id"] == \
        create(runner, small, "PUT", key=put_key).json()["job_id"]


# ---------------------------------------------------------------------------- multipart


def test_a_multipart_upload_completed_with_its_etags_becomes_ready(runner):
    data = padded_jpeg(17 * MIB)
    r = create(runner, data, "multipart")
    upload = r.json()["upload"]
    assert upload["part_size"] == 8 * MIB and [p["size"] for p in upload["parts"]] == [8 * MIB, 8 * MIB, MIB]
    etags = put_parts(upload, data)
    done = complete(runner, r.headers["Location"], etags)
    assert done.status_code == 200, done.text
    assert done.json()["status"] in ("queued", "processing", "ready")  # never awaiting_upload
    job = poll(runner, r.headers["Location"]).json()
    assert job["status"] == "ready"
    assert complete(runner, r.headers["Location"]).status_code == 200  # a retried completion


def test_a_multipart_upload_cut_mid_way_resumes_with_only_the_missing_parts(runner):
    """Through the TCP proxy, which is cut after the first part: the resumed upload sends only
    the parts not stored, and the bucket ends with exactly one object for exactly one job."""
    data = padded_jpeg(17 * MIB)
    r = create(runner, data, "multipart")
    location, job_id = r.headers["Location"], r.json()["job_id"]
    proxy = TcpProxy(urlsplit(runner.s3).port)
    put_parts(r.json()["upload"], data, numbers={1}, via=proxy.port)
    proxy.down()
    with pytest.raises(requests.ConnectionError):
        put_parts(r.json()["upload"], data, numbers={2}, via=proxy.port)
    proxy.up()
    resumed = upload_of(runner, location).json()
    assert [p["part_number"] for p in resumed["parts"] if p["stored"]] == [1]
    sent = put_parts(resumed, data, via=proxy.port)
    assert sorted(sent) == [2, 3]
    assert complete(runner, location).status_code == 200  # empty body: the server lists the parts
    assert poll(runner, location).json()["status"] == "ready"
    listed = s3(runner).list_objects_v2(Bucket=BUCKET, Prefix=ORIGINALS + job_id)
    assert [o["Key"] for o in listed["Contents"]] == [ORIGINALS + job_id]
    assert uploads_in_progress(runner, ORIGINALS + job_id) == []
    proxy.down()


def test_a_completion_with_a_part_missing_is_400_naming_it(runner):
    data = padded_jpeg(17 * MIB)
    r = create(runner, data, "multipart")
    put_parts(r.json()["upload"], data, numbers={1, 3})
    answer = complete(runner, r.headers["Location"])
    assert answer.status_code == 400 and answer.json()["code"] == "invalid_request"
    assert ": 2" in answer.json()["detail"]


@pytest.mark.parametrize("sent", [3, 0.5])
def test_a_part_of_another_length_than_planned_is_refused_by_storage_or_by_the_completion(runner, sent):
    """Each part URL signs its planned length: storage that checks signatures (LocalStack, the
    gateway) refuses a part three times (or half) its size, and holds none; moto stores it,
    and the completion refuses a part not of its planned size."""
    data = padded_jpeg(17 * MIB)
    r = create(runner, data, "multipart")
    upload, location, job_id = r.json()["upload"], r.headers["Location"], r.json()["job_id"]
    first = upload["parts"][0]
    wrong = requests.put(first["url"], data=b"\0" * int(first["size"] * sent), timeout=120)
    (in_progress,) = uploads_in_progress(runner, ORIGINALS + job_id)
    if runner.strict:
        assert wrong.status_code == 403 and b"SignatureDoesNotMatch" in wrong.content, wrong.text
        assert parts_stored(runner, ORIGINALS + job_id, in_progress["UploadId"]) == 0
    else:
        assert wrong.status_code == 200  # moto checks no signature
        answer = complete(runner, location)
        assert answer.status_code == 400 and ": 1" in answer.json()["detail"]
    assert "content-length" in urlsplit(first["url"]).query.lower()  # X-Amz-SignedHeaders
    put_parts(upload_of(runner, location).json(), data)  # the right bytes still go through
    assert complete(runner, location).status_code == 200
    assert poll(runner, location).json()["status"] == "ready"


@pytest.mark.parametrize("end", ["cancel", "delete"])
def test_a_cancel_or_delete_aborts_the_upload_and_leaves_no_parts(runner, end):
    data = padded_jpeg(17 * MIB)
    r = create(runner, data, "multipart")
    job_id, location = r.json()["job_id"], r.headers["Location"]
    put_parts(r.json()["upload"], data, numbers={1, 2})
    (in_progress,) = uploads_in_progress(runner, ORIGINALS + job_id)
    assert parts_stored(runner, ORIGINALS + job_id, in_progress["UploadId"]) == 2
    if end == "cancel":
        assert requests.post(f"{runner.api}{location}/cancel", headers=headers(), timeout=10).status_code == 200
        assert complete(runner, location).json()["code"] == "job_finished"
    else:
        assert requests.delete(runner.api + location, headers=headers(), timeout=10).status_code == 204
    assert uploads_in_progress(runner, ORIGINALS + job_id) == []
    assert parts_stored(runner, ORIGINALS + job_id, in_progress["UploadId"]) == 0


def test_a_part_url_past_its_expiry_is_refused_and_a_fresh_one_works(runner):
    """Signed here for one second (the API's are signed for UPLOAD_URL_TTL_SECONDS): LocalStack
    refuses it once expired, saying so; the RADOS Gateway refuses it without a word; moto takes
    it anyway."""
    client = s3(runner)
    key = f"{ORIGINALS}expiry-{uuid.uuid4()}"
    upload_id = client.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    params = {"Bucket": BUCKET, "Key": key, "UploadId": upload_id, "PartNumber": 1}
    stale = client.generate_presigned_url("upload_part", Params=params, ExpiresIn=1)
    time.sleep(2.5)
    refused = requests.put(stale, data=b"x" * 100, timeout=30)
    fresh = client.generate_presigned_url("upload_part", Params=params, ExpiresIn=60)
    if runner.strict:
        said = b"expired" if runner.backend == "localstack" else b"<Code>AccessDenied</Code><Message></Message>"
        assert refused.status_code == 403 and said in refused.content
    else:
        assert refused.status_code == 200
    assert requests.put(fresh, data=b"x" * 100, timeout=30).status_code == 200
    client.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id)
