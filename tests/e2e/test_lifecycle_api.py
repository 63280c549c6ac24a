"""Idempotency, direct uploads, cancel and delete through HTTP against the local runner."""
from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import requests

from tests.e2e.test_images_api import assert_problem, headers, poll
from tests.images import jpeg, size_of


def post_image(runner, data, key=None, owner="alice"):
    extra = {"Content-Type": "image/jpeg"}
    if key is not None:
        extra["Idempotency-Key"] = key
    return requests.post(f"{runner.api}/api/v1/images", data=data, headers=headers(owner, **extra), timeout=30)


def post_upload(runner, content_type="image/jpeg", size=10_000, key=None, owner="alice"):
    extra = {"Content-Type": "application/json"}
    if key is not None:
        extra["Idempotency-Key"] = key
    return requests.post(f"{runner.api}/api/v1/uploads", json={"content_type": content_type, "size": size},
                         headers=headers(owner, **extra), timeout=30)


def test_a_replay_gives_the_same_job_and_says_so(runner):
    key = str(uuid.uuid4())
    first = post_image(runner, jpeg(), key)
    again = post_image(runner, jpeg(), key)
    assert first.status_code == again.status_code == 202
    assert "Idempotent-Replayed" not in first.headers
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["job_id"] == first.json()["job_id"]
    assert again.headers["Location"] == first.headers["Location"]


def test_another_file_with_the_same_key_is_409(runner):
    key = str(uuid.uuid4())
    assert post_image(runner, jpeg(), key).status_code == 202
    assert_problem(post_image(runner, jpeg(color=(0, 0, 255)), key), 409, "idempotency_key_reused")


def test_the_same_key_for_another_owner_is_another_job(runner):
    key = str(uuid.uuid4())
    a = post_image(runner, jpeg(), key, owner="alice").json()["job_id"]
    b = post_image(runner, jpeg(), key, owner="bob").json()["job_id"]
    assert a != b


def test_twenty_concurrent_identical_requests_make_one_job(runner):
    # An owner of its own: the session's runner is shared, and on a loaded machine the other
    # tests' unfinished jobs could fill the default owner's 20 active jobs (a fair 429).
    key, data, owner = str(uuid.uuid4()), jpeg(800, 600), f"twenty-{uuid.uuid4().hex[:8]}"
    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(lambda _: post_image(runner, data, key, owner=owner), range(20)))
    assert {r.status_code for r in answers} == {202}, [r.text for r in answers if r.status_code != 202]
    assert len({r.json()["job_id"] for r in answers}) == 1
    assert sum(r.headers.get("Idempotent-Replayed") == "true" for r in answers) == 19


def test_malformed_idempotency_keys_are_400(runner):
    for key in ["x" * 256, "caf\u00e9".encode("utf-8").decode("latin-1")]:
        assert_problem(post_image(runner, jpeg(), key), 400, "invalid_request")


def upload_to_storage(answer, data):
    form = answer["upload"]
    return requests.post(form["url"], data=form["fields"], files={"file": ("x.jpg", data, "image/jpeg")},
                         timeout=30)


def test_direct_upload_becomes_ready(runner):
    data = jpeg(1600, 1200)
    r = post_upload(runner, size=len(data))
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["status"] == "awaiting_upload"
    assert set(body["upload"]) == {"method", "url", "fields", "expires_at"} and body["upload"]["method"] == "POST"
    assert r.headers["Location"] == f"/api/v1/image-jobs/{body['job_id']}"
    assert upload_to_storage(body, data).status_code in (200, 201, 204)
    job = poll(runner, r.headers["Location"]).json()
    assert job["status"] == "ready" and job["renditions"]["display"]["width"] == 1280


def test_a_declared_size_over_the_limit_is_413(runner):
    assert_problem(post_upload(runner, size=50 * 1024 * 1024 + 1), 413, "file_too_large")
    assert_problem(post_upload(runner, content_type="application/pdf"), 415, "unsupported_format")
    r = requests.post(f"{runner.api}/api/v1/uploads", data=b"not json",
                      headers=headers(**{"Content-Type": "application/json"}), timeout=10)
    assert_problem(r, 400, "invalid_request")


def test_an_upload_larger_than_declared(runner):
    """LocalStack and the RADOS Gateway enforce the POST policy as S3 does; moto does not, so
    there the worker's own check (the declared size) ends the job."""
    data = jpeg(1600, 1200)
    r = post_upload(runner, size=100)
    stored = upload_to_storage(r.json(), data)
    if runner.strict:
        assert stored.status_code == 400 and b"<Code>EntityTooLarge</Code>" in stored.content
        time.sleep(1.5)  # nothing was stored, so no event: the job still waits for its file
        assert get_job(runner, r.headers["Location"])["status"] == "awaiting_upload"
    else:
        assert stored.status_code == 204
        job = poll(runner, r.headers["Location"]).json()
        assert job["status"] == "failed" and job["error"]["code"] == "file_too_large"


def test_an_upload_of_another_type_than_declared(runner):
    """The form pins Content-Type: LocalStack and the RADOS Gateway refuse another one (403,
    each in its words) and the same form then still works; moto stores it, and the worker,
    which sniffs the bytes, makes the renditions."""
    data = jpeg(800, 600)
    r = post_upload(runner, size=len(data))
    form = r.json()["upload"]
    other = requests.post(form["url"], data={**form["fields"], "Content-Type": "image/png"},
                          files={"file": ("x.png", data, "image/png")}, timeout=30)
    if runner.strict:
        said = b"Policy Condition failed" if runner.backend == "localstack" else b"Policy check failed"
        assert other.status_code == 403 and said in other.content
        assert get_job(runner, r.headers["Location"])["status"] == "awaiting_upload"
        assert upload_to_storage(r.json(), data).status_code == 204
    else:
        assert other.status_code == 204
    assert poll(runner, r.headers["Location"]).json()["status"] == "ready"


def get_job(runner, location, owner="alice"):
    answer = requests.get(runner.api + location, headers=headers(owner), timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()


def cancel(runner, location, owner="alice"):
    return requests.post(f"{runner.api}{location}/cancel", headers=headers(owner), timeout=10)


def test_cancel_before_upload_then_again(runner):
    r = post_upload(runner)
    location = r.headers["Location"]
    first = cancel(runner, location)
    assert first.status_code == 200 and first.json()["status"] == "cancelled"
    assert "finished_at" in first.json()
    second = cancel(runner, location)
    assert second.status_code == 200 and second.json() == first.json()
    assert_problem(cancel(runner, location, owner="mallory"), 404, "job_not_found")


def test_cancel_of_a_ready_job_is_409(runner):
    r = post_image(runner, jpeg())
    poll(runner, r.headers["Location"])
    assert_problem(cancel(runner, r.headers["Location"]), 409, "job_finished")


def test_delete_then_get_is_404_and_the_urls_no_longer_serve(runner):
    r = post_image(runner, jpeg(1500, 1000))
    location = r.headers["Location"]
    job = poll(runner, location).json()
    assert size_of(requests.get(job["thumb_url"], timeout=10).content) == (256, 256)
    assert requests.delete(runner.api + location, headers=headers("mallory"), timeout=10).status_code == 404
    deleted = requests.delete(runner.api + location, headers=headers(), timeout=10)
    assert deleted.status_code == 204 and deleted.content == b""
    assert_problem(requests.get(runner.api + location, headers=headers(), timeout=10), 404, "job_not_found")
    for url in (job["image_url"], job["thumb_url"]):
        assert requests.get(url, timeout=10).status_code == 404
    assert_problem(requests.delete(runner.api + location, headers=headers(), timeout=10), 404, "job_not_found")
