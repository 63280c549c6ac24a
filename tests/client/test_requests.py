"""Client.upload routing, bounded retries under one Idempotency-Key, tokens and typed errors,
against a scripted API (httpx.MockTransport) on a fake clock."""
from __future__ import annotations

import json
import re

import httpx
import image_jobs
import pytest
from image_jobs import (
    ERRORS_BY_CODE,
    ApiError,
    Client,
    ConnectionFailed,
    IdempotencyKeyReused,
    JobFinished,
    JobNotFound,
    Overloaded,
    RateLimited,
    StorageError,
    StorageUnavailable,
    Unauthorized,
    UnsupportedFormat,
)
from image_jobs.errors import error_for

from chalicelib.domain.idempotency import IDEMPOTENCY_KEY
from chalicelib.http.problems import PROBLEMS
from tests.client.fakes import API, JOB_PATH, JPEG, FakeApi, FakeTime, accepted, job_answer, problem

IMAGES, UPLOADS = "/api/v1/images", "/api/v1/uploads"
STORAGE = "http://storage.test/bucket"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8  # 2056 bytes


@pytest.fixture
def time_():
    return FakeTime()


def keys(requests):
    return [r.headers.get("Idempotency-Key") for r in requests]


def direct_accepted(status="awaiting_upload"):
    return accepted(status, upload={"method": "POST", "url": STORAGE, "expires_at": "2026-07-15T10:15:00Z",
                                    "fields": {"key": "originals/j-1", "Content-Type": "image/png",
                                               "policy": "cG9saWN5", "x-amz-signature": "abc"}})


# -- the route -----------------------------------------------------------------------------------
def test_a_small_file_goes_through_images_as_a_raw_body_with_its_length(time_):
    api = FakeApi(time_).on("POST", IMAGES, accepted())
    progress = []
    job = api.client().upload(JPEG, on_progress=lambda sent, total: progress.append((sent, total)))
    (request,) = api.sent()
    assert request.url.path == IMAGES and request.content == JPEG
    assert request.headers["Content-Type"] == "image/jpeg"
    assert request.headers["Content-Length"] == str(len(JPEG)) and "Transfer-Encoding" not in request.headers
    assert request.headers["Authorization"] == "Bearer tok"
    assert progress[0] == (0, len(JPEG)) and progress[-1] == (len(JPEG), len(JPEG))
    assert job.status == "queued" and job.location == API + JOB_PATH and job.job_id == "j-1"


def test_a_file_over_the_threshold_goes_direct_to_storage_with_the_form_and_no_token(time_):
    api = FakeApi(time_).on("POST", UPLOADS, direct_accepted()).on("POST", "/bucket", httpx.Response(204))
    api.on("GET", JOB_PATH, job_answer("queued"))
    progress = []
    job = api.client(max_upload_bytes=1000).upload(PNG, filename="big.png",
                                                   on_progress=lambda s, t: progress.append((s, t)))
    create, store, arrived = api.sent()
    # It asks for a PUT; a server that answers with a form (an older one) gets the form.
    asked = json.loads(create.content)
    assert create.url.path == UPLOADS and asked.pop("sha256") and asked == {
        "content_type": "image/png", "size": len(PNG), "method": "PUT"}
    assert str(store.url) == STORAGE and "Authorization" not in store.headers
    body = store.content
    names = re.findall(rb'form-data; name="([^"]+)"', body)
    assert names == [b"key", b"Content-Type", b"policy", b"x-amz-signature", b"file"]  # the file last
    assert b'filename="big.png"' in body and PNG in body
    assert progress[-1] == (len(PNG), len(PNG))
    assert arrived.url.path == JOB_PATH and job.status == "queued"  # read once the event moved it


def test_exactly_the_threshold_still_goes_through_images(time_):
    api = FakeApi(time_).on("POST", IMAGES, accepted())
    api.client(max_upload_bytes=len(PNG)).upload(PNG)
    assert [r.url.path for r in api.sent()] == [IMAGES]


def test_the_default_threshold_is_the_servers_default_limit_on_images():
    from chalicelib.config import Settings

    assert Client().max_upload_bytes == image_jobs.DEFAULT_MAX_UPLOAD_BYTES == Settings().max_upload_bytes


def test_a_413_from_images_falls_back_to_the_direct_route_with_the_same_key(time_):
    api = FakeApi(time_).on("POST", IMAGES, problem(413, "file_too_large"))
    api.on("POST", UPLOADS, direct_accepted()).on("POST", "/bucket", httpx.Response(204))
    api.on("GET", JOB_PATH, job_answer("queued"))
    api.client().upload(PNG)
    first, second, _, _ = api.sent()
    assert (first.url.path, second.url.path) == (IMAGES, UPLOADS)
    assert first.headers["Idempotency-Key"] == second.headers["Idempotency-Key"]


def test_a_direct_replay_whose_file_already_arrived_sends_nothing_to_storage(time_):
    api = FakeApi(time_).on("POST", UPLOADS, direct_accepted(status="processing"))
    job = api.client(max_upload_bytes=1000).upload(PNG)
    assert [r.url.path for r in api.sent()] == [UPLOADS] and job.status == "processing"


def test_the_first_poll_of_a_direct_upload_counts_from_the_end_of_the_file_transfer(time_):
    def slow_storage(request):
        time_.now += 30  # a long transfer
        return httpx.Response(204)

    api = FakeApi(time_).on("POST", UPLOADS, direct_accepted()).on("POST", "/bucket", slow_storage)
    api.on("GET", JOB_PATH, job_answer("ready"))
    api.client(max_upload_bytes=1000).upload(PNG).wait()
    assert time_.sleeps == [2]


def test_storage_refusing_the_form_is_a_storage_error_with_its_code(time_):
    refusal = httpx.Response(403, content=b"<?xml version='1.0'?><Error><Code>AccessDenied</Code>"
                                         b"<Message>Policy expired</Message></Error>")
    api = FakeApi(time_).on("POST", UPLOADS, direct_accepted()).on("POST", "/bucket", refusal)
    with pytest.raises(StorageError) as raised:
        api.client(max_upload_bytes=1000).upload(PNG)
    refused = raised.value
    assert (refused.status, refused.code, refused.message) == (403, "AccessDenied", "Policy expired")
    assert len(api.sent("POST", "/bucket")) == 1


def test_storage_errors_and_lost_connections_are_retried(time_):
    api = FakeApi(time_).on("POST", UPLOADS, direct_accepted())
    api.on("POST", "/bucket", httpx.Response(503, headers={"Retry-After": "4"}), httpx.WriteError("cut"),
           httpx.Response(204))
    api.on("GET", JOB_PATH, job_answer("queued"))
    api.client(max_upload_bytes=1000).upload(PNG)
    stored = api.sent("POST", "/bucket")
    assert len(stored) == 3 and all(PNG in r.content for r in stored)
    assert time_.sleeps[:2] == [4, 2]  # then the job's first poll, after its Retry-After


# -- retries under one key -----------------------------------------------------------------------
def test_503_and_429_are_retried_after_their_retry_after_with_the_same_key_and_bytes(time_):
    api = FakeApi(time_).on("POST", IMAGES, problem(503, "overloaded", retry_after="7"),
                            problem(429, "rate_limited", retry_after="3"), accepted())
    job = api.client().upload(JPEG)
    sent = api.sent()
    assert time_.sleeps == [7, 3]
    assert len(set(keys(sent))) == 1 and all(r.content == JPEG for r in sent)
    assert IDEMPOTENCY_KEY.fullmatch(keys(sent)[0])  # the contract's key alphabet
    assert job.status == "queued"


@pytest.mark.parametrize("failure", [httpx.ConnectError("refused"), httpx.ReadError("reset"),
                                     httpx.RemoteProtocolError("Server disconnected"),
                                     httpx.ReadTimeout("slow")])
def test_a_lost_connection_is_retried_with_the_same_key(time_, failure):
    api = FakeApi(time_).on("POST", IMAGES, failure, accepted())
    api.client().upload(JPEG)
    assert len(api.sent()) == 2 and len(set(keys(api.sent()))) == 1
    assert time_.sleeps == [1]  # no Retry-After: a jittered 1, 2, 4... s backoff (jitter 0 here)


def test_retries_are_bounded_and_the_last_error_is_raised(time_):
    api = FakeApi(time_).on("POST", IMAGES, problem(503, "storage_unavailable", retry_after="1"))
    with pytest.raises(StorageUnavailable) as raised:
        api.client(max_attempts=4).upload(JPEG)
    assert len(api.sent()) == 4 and time_.sleeps == [1, 1, 1]
    assert raised.value.retry_after == 1


def test_lost_connections_are_bounded_too(time_):
    api = FakeApi(time_).on("POST", IMAGES, httpx.ConnectError("refused"))
    with pytest.raises(ConnectionFailed):
        api.client(max_attempts=3).upload(JPEG)
    assert len(api.sent()) == 3 and time_.sleeps == [1, 2]


def test_a_retry_after_beyond_the_clients_patience_is_raised_at_once(time_):
    api = FakeApi(time_).on("POST", IMAGES, problem(429, "rate_limited", retry_after="3600"))
    with pytest.raises(RateLimited):
        api.client(max_retry_wait=60).upload(JPEG)
    assert len(api.sent()) == 1 and time_.sleeps == []


@pytest.mark.parametrize("status,code,error", [(415, "unsupported_format", UnsupportedFormat),
                                               (409, "idempotency_key_reused", IdempotencyKeyReused),
                                               (401, "unauthorized", Unauthorized)])
def test_refusals_are_not_retried(time_, status, code, error):
    api = FakeApi(time_).on("POST", IMAGES, problem(status, code))
    with pytest.raises(error):
        api.client().upload(JPEG)
    assert len(api.sent()) == 1


def test_each_logical_upload_has_its_own_key_unless_the_caller_gives_one(time_):
    api = FakeApi(time_).on("POST", IMAGES, accepted())
    client = api.client()
    client.upload(JPEG)
    client.upload(JPEG)
    client.upload(JPEG, idempotency_key="photo-42")
    first, second, third = keys(api.sent())
    assert first != second and third == "photo-42"


def test_an_unknown_type_is_sent_as_octet_stream_for_the_server_to_judge(time_):
    api = FakeApi(time_).on("POST", IMAGES, problem(415, "unsupported_format"))
    with pytest.raises(UnsupportedFormat):
        api.client().upload(b"hello, not an image")
    assert api.sent()[0].headers["Content-Type"] == "application/octet-stream"


def test_a_path_is_read_and_named(time_, tmp_path):
    path = tmp_path / "photo.png"
    path.write_bytes(PNG)
    api = FakeApi(time_).on("POST", UPLOADS, direct_accepted()).on("POST", "/bucket", httpx.Response(204))
    api.on("GET", JOB_PATH, job_answer("queued"))
    api.client(max_upload_bytes=10).upload(path)
    assert b'filename="photo.png"' in api.sent("POST", "/bucket")[0].content


# -- tokens --------------------------------------------------------------------------------------
def test_a_token_provider_is_asked_before_each_request_and_again_after_a_401(time_):
    tokens = iter(["old", "new", "new"])
    api = FakeApi(time_).on("POST", IMAGES, problem(401, "unauthorized"), accepted())
    client = Client(API, token_provider=lambda: next(tokens),
                    http=httpx.Client(transport=httpx.MockTransport(api.handle)),
                    clock=time_.clock, sleep=time_.sleep)
    client.upload(JPEG)
    assert [r.headers["Authorization"] for r in api.sent()] == ["Bearer old", "Bearer new"]
    assert len(set(keys(api.sent()))) == 1


def test_a_401_with_no_newer_token_is_raised(time_):
    api = FakeApi(time_).on("POST", IMAGES, problem(401, "unauthorized"))
    client = Client(API, token_provider=lambda: "same",
                    http=httpx.Client(transport=httpx.MockTransport(api.handle)))
    with pytest.raises(Unauthorized):
        client.upload(JPEG)
    assert len(api.sent()) == 1


def test_token_and_token_provider_exclude_each_other():
    with pytest.raises(ValueError):
        Client(API, "a", token_provider=lambda: "b")


# -- the job's other calls -----------------------------------------------------------------------
def test_cancel_posts_to_the_job_and_reads_the_answer(time_):
    api = FakeApi(time_).on("POST", JOB_PATH + "/cancel", job_answer("cancelled", retry_after=None))
    job = api.client().job("j-1").cancel()
    assert job.status == "cancelled" and job.finished


def test_cancel_of_a_finished_job_is_job_finished(time_):
    api = FakeApi(time_).on("POST", JOB_PATH + "/cancel", problem(409, "job_finished"))
    with pytest.raises(JobFinished):
        api.client().job("j-1").cancel()


def test_a_delete_whose_answer_was_lost_is_done_when_the_retry_finds_nothing(time_):
    api = FakeApi(time_).on("DELETE", JOB_PATH, httpx.ReadError("reset"), problem(404, "job_not_found"))
    api.client().job(JOB_PATH).delete()
    assert len(api.sent("DELETE")) == 2


def test_a_delete_of_a_job_that_is_not_there_is_job_not_found(time_):
    api = FakeApi(time_).on("DELETE", JOB_PATH, problem(404, "job_not_found"))
    with pytest.raises(JobNotFound):
        api.client().job("j-1").delete()


def test_a_job_reference_may_be_an_id_a_path_or_a_url(time_):
    client = FakeApi(time_).client()
    for ref in ("j-1", JOB_PATH, API + JOB_PATH):
        assert client.job(ref).location == API + JOB_PATH


def test_from_location_needs_a_full_url_or_a_client():
    job = image_jobs.Job.from_location("http://h.test:9000" + JOB_PATH, token="t")
    assert job.location == "http://h.test:9000" + JOB_PATH and job._client.base_url == "http://h.test:9000"
    with pytest.raises(ValueError):
        image_jobs.Job.from_location(JOB_PATH)


def test_download_refreshes_urls_that_storage_refuses(time_, tmp_path):
    def ready(url):
        return job_answer("ready", retry_after=None, renditions={
            "display": {"url": url, "width": 2, "height": 1, "content_type": "image/jpeg"}})

    api = FakeApi(time_).on("GET", JOB_PATH, ready("http://storage.test/old"),
                            ready("http://storage.test/new"))
    api.on("GET", "/old", httpx.Response(403, content=b"<Error><Code>AccessDenied</Code></Error>"))
    api.on("GET", "/new", httpx.Response(200, content=b"jpeg bytes"))
    job = api.client().job("j-1")
    saved = job.download(tmp_path, stem="photo")
    assert saved == {"display": tmp_path / "photo.display.jpg"}
    assert saved["display"].read_bytes() == b"jpeg bytes"
    assert [p.name for p in tmp_path.iterdir()] == ["photo.display.jpg"]  # no partial file left


def test_download_of_an_unfinished_job_is_refused(time_, tmp_path):
    api = FakeApi(time_).on("GET", JOB_PATH, job_answer("processing"))
    with pytest.raises(image_jobs.JobNotReady):
        api.client().job("j-1").download(tmp_path)


# -- typed errors --------------------------------------------------------------------------------
def test_every_code_the_server_sends_has_its_own_error_class():
    missing = set(PROBLEMS) - set(ERRORS_BY_CODE)
    assert not missing
    for code, (status, _) in PROBLEMS.items():
        error = error_for(status, {"code": code, "title": "t", "detail": "d"})
        assert type(error) is ERRORS_BY_CODE[code] and error.code == code and error.status == status
        assert isinstance(error, ApiError) and type(error) is not ApiError


def test_an_unknown_code_is_an_api_error_that_keeps_its_code_and_detail():
    error = error_for(418, {"code": "teapot", "detail": "short and stout", "instance": "urn:x"})
    assert type(error) is ApiError and error.code == "teapot" and error.instance == "urn:x"
    assert "short and stout" in str(error)


def test_a_body_that_is_not_a_problem_still_gives_an_error_by_status():
    assert type(error_for(429, None)) is RateLimited
    assert type(error_for(404, "<html>")) is ApiError  # a wrong base URL is not "job not found"
    assert type(error_for(503, {"code": "overloaded"}, retry_after=5)) is Overloaded


def test_the_sdk_imports_neither_chalice_nor_boto3():
    import importlib.metadata
    import subprocess
    import sys

    requires = importlib.metadata.requires("image-jobs-client") or []
    assert not [r for r in requires if re.match(r"(chalice|boto3|botocore)\b", r)]
    blocker = ("import sys\nfor name in ('chalice', 'boto3', 'botocore', 'chalicelib'):\n"
               "    sys.modules[name] = None\nimport image_jobs, image_jobs.cli\n")
    subprocess.run([sys.executable, "-c", blocker], check=True, cwd="/")


def test_upload_asks_for_formats_and_download_saves_the_variant_or_the_jpeg(time_, tmp_path):
    api = FakeApi(time_).on("POST", "/api/v1/images", accepted())
    api.client().upload(JPEG, formats=["avif", "webp"])
    assert api.requests[-1][1].url.params["formats"] == "avif,webp"
    variants = {"image/avif": {"url": "http://storage.test/d.avif", "bytes": 5, "width": 2, "height": 1}}
    api.on("GET", JOB_PATH, job_answer("ready", retry_after=None, placeholder={
        "blurhash": "LEHV6nWB2yk8pyo0adR*.7kCMdnj", "average_color": "#aabbcc"}, renditions={
        "display": {"url": "http://storage.test/d.jpg", "width": 2, "height": 1,
                    "content_type": "image/jpeg", "variants": variants},
        "thumb": {"url": "http://storage.test/t.jpg", "width": 1, "height": 1, "content_type": "image/jpeg",
                  "variants": {}}}))
    api.on("GET", "/d.avif", httpx.Response(200, content=b"avif"))
    api.on("GET", "/t.jpg", httpx.Response(200, content=b"jpeg"))
    job = api.client().job("j-1").refresh()
    assert job.renditions["display"].variants["image/avif"].bytes == 5
    assert job.placeholder["average_color"] == "#aabbcc"
    saved = job.download(tmp_path, stem="p", format="avif")
    # The display has an AVIF; the thumb has none, so its JPEG is saved.
    assert saved == {"display": tmp_path / "p.display.avif", "thumb": tmp_path / "p.thumb.jpg"}
    assert saved["display"].read_bytes() == b"avif"


def test_direct_uploads_carry_the_formats_in_their_body(time_):
    api = FakeApi(time_).on("POST", "/api/v1/uploads", accepted(status="queued"))
    api.client(max_upload_bytes=10).upload(JPEG, formats=("webp",))
    assert json.loads(api.requests[-1][1].content)["formats"] == ["webp"]


# -- multipart: the length each part URL signs; a resume after the file arrived ------------------
def multipart_accepted(size, part_size):
    sizes = [part_size] * (size // part_size) + ([size % part_size] if size % part_size else [])
    parts = [{"part_number": n, "size": s, "stored": False, "url": f"http://storage.test/part/{n}"}
             for n, s in enumerate(sizes, start=1)]
    return accepted("awaiting_upload", upload={"method": "multipart", "part_size": part_size, "parts": parts,
                                               "expires_at": "2026-07-15T10:15:00Z"})


def test_each_part_is_sent_with_the_content_length_its_url_signs_never_chunked(time_):
    data = JPEG * 40
    api = FakeApi(time_).on("POST", UPLOADS, multipart_accepted(len(data), 1000))
    for n in (1, 2, 3):
        api.on("PUT", f"/part/{n}", httpx.Response(200, headers={"ETag": f'"e{n}"'}))
    api.on("POST", JOB_PATH + "/upload", job_answer("queued"))
    api.client(max_upload_bytes=10, multipart_threshold=100).upload(data)
    sent = sorted(api.sent("PUT"), key=lambda r: r.url.path)
    assert [(r.headers.get("Content-Length"), r.headers.get("Transfer-Encoding")) for r in sent] == [
        ("1000", None), ("1000", None), (str(len(data) - 2000), None)]
    assert [len(r.content) for r in sent] == [1000, 1000, len(data) - 2000]


def test_a_resume_whose_upload_had_already_arrived_sends_nothing_and_returns_the_job(time_):
    api = FakeApi(time_).on("GET", JOB_PATH + "/upload", job_answer("awaiting_upload"))
    client = api.client()
    job = client.resume(client.job(JOB_PATH), JPEG * 40)
    assert job.status == "awaiting_upload" and [r.method for r in api.sent()] == ["GET"]


def test_the_upload_limits_old_name_is_still_taken_for_a_release_with_a_warning():
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = Client(direct_threshold=1000)
    assert old.max_upload_bytes == 1000
    assert [w.category for w in caught] == [DeprecationWarning]
    assert image_jobs.DEFAULT_DIRECT_THRESHOLD == image_jobs.DEFAULT_MAX_UPLOAD_BYTES


# -- the service principal: which routes a client takes -------------------------------------------
SERVICE_JOB = "/api/v1/service/image-jobs/j-1"


def service_client(api, **options):
    import time

    from chalicelib.http.auth import SERVICE_SCOPE, mint_token

    token = mint_token("app-backend", "secret", 3600, int(time.time()), scope=SERVICE_SCOPE)
    return Client(API, token, http=httpx.Client(transport=httpx.MockTransport(api.handle)), clock=api.time.clock,
                  sleep=api.time.sleep, waits=False, **options)


def test_a_service_token_reads_and_deletes_jobs_on_the_service_routes(time_):
    api = FakeApi(time_).on("GET", SERVICE_JOB, job_answer("ready", owner="alice"))
    api.on("DELETE", SERVICE_JOB, httpx.Response(204))
    client = service_client(api)
    assert client.service
    assert client.job("j-1").refresh().owner == "alice"
    assert client.job("j-1").wait(deadline=10).ready
    # A Location an owner was given (the app sent it to its backend) is read on the service's route.
    assert client.job(API + JOB_PATH).location == API + SERVICE_JOB
    assert client.job(JOB_PATH).location == API + SERVICE_JOB
    client.job(JOB_PATH).delete()
    assert {r.url.path for r in api.sent()} == {SERVICE_JOB}


def test_a_service_clients_list_names_its_owner_or_says_so(time_):
    api = FakeApi(time_).on("GET", "/api/v1/service/image-jobs", httpx.Response(200, json={"jobs": []}))
    client = service_client(api)
    with pytest.raises(ValueError, match="owner="):
        list(client.jobs())
    assert api.sent() == []
    assert list(client.jobs(owner="alice")) == []


def test_a_client_is_an_owners_unless_its_token_or_its_caller_says_service(time_):
    import time

    from chalicelib.http.auth import mint_token

    api = FakeApi(time_).on("GET", JOB_PATH, job_answer("ready"))
    assert not api.client().service  # "tok": not a JWT at all
    assert not Client(API, mint_token("alice", "s", 60, int(time.time()))).service
    assert Client(API, "opaque", service=True).service
    assert not service_client(api, service=False).service
    service_token = service_client(api)._bearer()
    assert Client(API, token_provider=lambda: service_token).service
