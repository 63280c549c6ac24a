"""A direct upload at the edges of its life, through HTTP, on moto's server, LocalStack and
the RADOS Gateway: after a multipart upload was completed and before its event moved the job,
and a transfer still in flight when its URL expires.

The runners here run the API alone (no worker, no sweeper): a completed upload's job stays
`awaiting_upload` for as long as a test needs, and the test runs the sweep itself, in this
process, with the runner's settings, when it chooses.

Where the backends differ on a PUT begun before its URL expired and finished after: the RADOS
Gateway (like S3) checks the expiry when the request arrives and stores it; LocalStack reads
the whole body first and then refuses it as expired; moto checks no expiry at all.
"""
from __future__ import annotations

import threading
import time
import uuid

import boto3
import pytest
import requests
from botocore.config import Config

from chalicelib.bootstrap import build_use_cases
from chalicelib.config import MIB, Settings
from chalicelib.domain.vocabulary import SweepOutcome
from tests.e2e.test_images_api import headers
from tests.e2e.test_upload_methods import padded_jpeg
from tests.local_runner import runner_on

# The runners' URLs last this long: a slow PUT is started just before they expire.
URL_TTL = 20
PART = 5 * MIB


@pytest.fixture(scope="module", params=["embedded", "localstack", "rgw"])
def api_only(request):
    settings = {"LOCAL_COMPONENTS": "api", "UPLOAD_URL_TTL_SECONDS": str(URL_TTL),
                "MULTIPART_PART_BYTES": str(PART), "MULTIPART_MIN_BYTES": str(PART + 1)}
    if request.param == "localstack":
        # Names of its own: the session's LocalStack runner must not take these events.
        suffix = uuid.uuid4().hex[:8]
        settings.update(IMAGES_BUCKET=f"deadlines-{suffix}", JOBS_TABLE=f"deadlines-{suffix}",
                        EVENTS_QUEUE=f"deadlines-{suffix}")
    elif request.param == "rgw":
        request.getfixturevalue("rabbitmq")
    with runner_on(request.param, request, **settings) as runner:
        runner.settings = _settings(runner)
        yield runner


def _settings(runner) -> Settings:
    """The runner's settings as its own process has them (local/__main__.py sets these)."""
    env = {**runner.env, "AWS_ENDPOINT_URL": runner.aws}
    if runner.backend == "rgw":
        env.update(S3_ENDPOINT_URL=runner.s3, QUEUE_BACKEND="amqp", AMQP_EVENT_SHAPE="ceph")
    return Settings.from_environ(env)


def storage(runner):
    return boto3.client("s3", endpoint_url=runner.s3, region_name="us-east-1", aws_access_key_id="test",
                        aws_secret_access_key="test", config=Config(signature_version="s3v4"))


def create(runner, size, method, key=None):
    extra = {"Idempotency-Key": key} if key else {}
    r = requests.post(f"{runner.api}/api/v1/uploads", json={"content_type": "image/jpeg", "size": size,
                                                           "method": method},
                      headers=headers(**extra), timeout=30)
    assert r.status_code == 202, r.text
    return r


def send_parts(upload, data):
    for part in upload["parts"]:
        start = (part["part_number"] - 1) * upload["part_size"]
        sent = requests.put(part["url"], data=data[start:start + part["size"]], timeout=60)
        assert sent.status_code == 200, sent.text


# ---------------------------------------------------------------- completed, not yet processed


def test_after_a_completion_the_upload_and_a_replay_answer_the_job_not_500(api_only):
    """Storage lists no parts of a completed upload (S3, LocalStack, moto: NoSuchUpload; the
    gateway: NoSuchKey): GET .../upload and a replay of the POST /uploads answer the job, whose
    upload is over, and which the completion has queued (no worker runs here)."""
    data = padded_jpeg(PART + MIB)
    key = str(uuid.uuid4())
    first = create(api_only, len(data), "multipart", key)
    location = first.headers["Location"]
    send_parts(first.json()["upload"], data)
    done = requests.post(f"{api_only.api}{location}/upload", headers=headers(), timeout=60)
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "queued"  # the completion moved it: the file is there
    upload = requests.get(f"{api_only.api}{location}/upload", headers=headers(), timeout=30)
    assert upload.status_code == 200, upload.text
    assert upload.json()["job_id"] == first.json()["job_id"] and "method" not in upload.json()
    assert upload.json()["status"] == "queued"  # no worker here: the event waits, the job does not
    again = create(api_only, len(data), "multipart", key)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["job_id"] == first.json()["job_id"] and "upload" not in again.json()
    bucket = api_only.settings.bucket
    assert storage(api_only).head_object(Bucket=bucket, Key=f"originals/{first.json()['job_id']}")[
        "ContentLength"] == len(data)
    # Only the first upload exists: the replay's own was aborted.
    listed = storage(api_only).list_multipart_uploads(Bucket=bucket, Prefix="originals/")
    assert [u for u in listed.get("Uploads", []) if u["Key"].endswith(first.json()["job_id"])] == []


def test_an_upload_aborted_before_the_job_ended_says_so(api_only):
    data = padded_jpeg(PART + MIB)
    key = str(uuid.uuid4())
    first = create(api_only, len(data), "multipart", key)
    job_id, location = first.json()["job_id"], first.headers["Location"]
    (upload_id,) = [u["UploadId"] for u in storage(api_only).list_multipart_uploads(
        Bucket=api_only.settings.bucket, Prefix=f"originals/{job_id}").get("Uploads", [])]
    storage(api_only).abort_multipart_upload(Bucket=api_only.settings.bucket, Key=f"originals/{job_id}",
                                             UploadId=upload_id)
    for answer in (requests.get(f"{api_only.api}{location}/upload", headers=headers(), timeout=30),
                   requests.post(f"{api_only.api}/api/v1/uploads", headers=headers(**{"Idempotency-Key": key}),
                                 json={"content_type": "image/jpeg", "size": len(data), "method": "multipart"},
                                 timeout=30)):
        assert answer.status_code == 400, answer.text
        assert answer.json()["code"] == "invalid_request" and "aborted" in answer.json()["detail"]


# ---------------------------------------------------------------- in flight at the deadline


class Throttled:
    """A request body read at `rate` bytes a second: a phone on a slow uplink. requests sends
    it with its Content-Length (len; no tell(), or it takes the length for 0 and sends it
    chunked), in the blocks urllib3 reads."""

    def __init__(self, data: bytes, rate: int):
        self._data, self._rate, self._at = data, rate, 0
        self.started = threading.Event()
        self.finished_at = None

    def __len__(self):
        return len(self._data)

    def read(self, size=-1):
        self.started.set()
        size = min(size if size and size > 0 else 8192, 8192)
        chunk = self._data[self._at:self._at + size]
        self._at += len(chunk)
        if chunk:
            time.sleep(len(chunk) / self._rate)
        elif self.finished_at is None:
            self.finished_at = time.monotonic()
        return chunk


def test_a_put_in_flight_when_its_url_expires_is_not_failed_by_the_sweep(api_only):
    """The PUT starts 3 s before the URL expires and takes about 8 s; a sweep runs 2 s after
    the expiry, mid-transfer. The job must still be waiting when the file lands."""
    data = padded_jpeg(512 * 1024)
    r = create(api_only, len(data), "PUT")
    upload, job_id = r.json()["upload"], r.json()["job_id"]
    created = time.monotonic()
    time.sleep(max(0.0, created + URL_TTL - 3 - time.monotonic()))
    body = Throttled(data, rate=64 * 1024)
    answers = []
    sender = threading.Thread(target=lambda: answers.append(requests.put(
        upload["url"], data=body, headers=upload["headers"], timeout=120)))
    sender.start()
    assert body.started.wait(10)
    time.sleep(max(0.0, created + URL_TTL + 2 - time.monotonic()))
    service = build_use_cases(api_only.settings)
    report = service.sweeper.sweep()
    sender.join(120)
    (answer,) = answers
    assert body.finished_at is not None and body.finished_at > created + URL_TTL  # it spanned the expiry
    assert SweepOutcome.UPLOAD_MISSING not in report, report
    job = service.ctx.jobs.get(job_id)
    stored = service.ctx.objects.head(job.original_key)
    if api_only.backend == "localstack":
        # LocalStack reads the body before it checks the expiry: refused, nothing stored.
        assert answer.status_code == 403 and b"expired" in answer.content
        assert stored is None
    else:
        assert answer.status_code == 200, answer.text
        assert stored is not None and stored.size == len(data)
    assert job.status.value == "awaiting_upload"  # the event (or the next sweep) moves it on
