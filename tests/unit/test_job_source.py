"""A job carries its original's facts (`source`) once the original has been read: from
queued on, and on a failed job whose header was readable; GET's body shows them, and
nothing private. On the in-memory stores (tests/integration and tests/e2e: the real ones)."""
from datetime import datetime, timezone

import pytest

from chalicelib.config import Settings
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.jobs import JobStatus
from chalicelib.domain.source import ColorSpace
from chalicelib.http.views import job_body
from chalicelib.usecases import UseCases
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, FakeQueue, fake_context
from tests.images import PRIVATE_MARKERS, jpeg, photo_as, private_exif

START = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)
FACTS = {"width": 400, "height": 600, "format": "jpeg", "captured_at": "2024-05-01T12:34:56+02:00",
         "color_space": "srgb", "has_alpha": False, "animated": False, "frames": 1, "duration_ms": None}


class Moves(FakeJobStore):
    """Keeps every state a move wrote (the queued state of a direct upload is passed through)."""

    def __init__(self):
        super().__init__()
        self.moved = []

    def move(self, job, from_status):
        super().move(job, from_status)
        self.moved.append(job)


@pytest.fixture
def use_cases():
    clock = Clock(START)
    settings = Settings(bucket="images", max_upload_bytes=200_000, max_direct_upload_bytes=1_000_000,
                        max_pixels=4_000_000)
    queue = FakeQueue(clock)
    return UseCases(fake_context(settings=settings, jobs=Moves(), objects=FakeObjectStore(clock),
                                 publisher=queue, backlog=queue, clock=clock))


def turned_photo() -> bytes:
    return photo_as("JPEG", exif=private_exif(orientation=6).tobytes(), quality=90)


def arrive(use_cases, job, data):
    use_cases.ctx.objects.put(job.original_key, data, "image/jpeg")
    return use_cases.worker.handle_object_created(ObjectCreated("images", job.original_key, 0, "e"))


def facts_of(job) -> dict:
    body = job_body(job, None)
    assert not [m for m in PRIVATE_MARKERS if m in repr(body)]
    return {k: v for k, v in body["source"].items() if k != "bytes"}


def test_an_upload_is_queued_with_its_facts_and_made_ready_with_them(use_cases):
    data = turned_photo()
    job = use_cases.uploads.accept_upload("alice", data).job
    assert job.status is JobStatus.QUEUED
    assert facts_of(use_cases.ctx.jobs.items[job.job_id]) == FACTS
    assert job_body(job, None)["source"]["bytes"] == len(data)
    assert arrive(use_cases, job, data) == "ready"
    ready = use_cases.ctx.jobs.items[job.job_id]
    assert facts_of(ready) == FACTS
    assert job_body(ready, None).get("phash") is None  # shown with the URLs only
    assert len(ready.phash) == 16 and int(ready.phash, 16) >= 0


def test_a_direct_upload_gets_its_facts_when_its_bytes_arrive(use_cases):
    job = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(turned_photo())).job
    assert job.source is None and "source" not in job_body(job, None)
    assert arrive(use_cases, job, turned_photo()) == "ready"
    queued = [j for j in use_cases.ctx.jobs.moved if j.status is JobStatus.QUEUED]
    assert queued and facts_of(queued[0]) == FACTS
    assert facts_of(use_cases.ctx.jobs.items[job.job_id]) == FACTS


def test_a_job_that_fails_on_its_pixels_keeps_the_facts_of_its_header(use_cases):
    data = jpeg(2500, 2000)  # over max_pixels: refused by the worker, header readable
    job = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(data)).job
    assert arrive(use_cases, job, data) == "failed"
    failed = use_cases.ctx.jobs.items[job.job_id]
    assert failed.error_code == "image_too_large"
    assert (failed.source.width, failed.source.height, failed.source.color_space) == (2500, 2000, ColorSpace.SRGB)
    assert job_body(failed, None)["source"]["width"] == 2500


def test_a_job_whose_header_cannot_be_read_has_no_facts(use_cases):
    data = b"\xff\xd8\xff\xe0" + b"\0" * 400
    job = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(data)).job
    assert arrive(use_cases, job, data) == "failed"
    failed = use_cases.ctx.jobs.items[job.job_id]
    assert failed.source is None and "source" not in job_body(failed, None)
