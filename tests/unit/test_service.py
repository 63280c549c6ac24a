from datetime import datetime, timezone

import pytest

from chalicelib.config import Settings
from chalicelib.events import PoisonMessage
from chalicelib.jobs import JobStatus
from chalicelib.ports import (
    FileTooLarge, ImageTooLarge, InvalidImage, JobExpired, JobNotFound, ObjectCreated,
    StorageUnavailable, TransientError, UnsupportedFormat,
)
from chalicelib.service import JobBusy, Service
from tests.fakes import Clock, FakeJobStore, FakeObjectStore
from tests.images import jpeg, png, size_of

START = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)


@pytest.fixture
def svc():
    settings = Settings(bucket="images", max_upload_bytes=200_000, max_pixels=4_000_000)
    return Service(settings=settings, jobs=FakeJobStore(), objects=FakeObjectStore(), clock=Clock(START))


def created(svc, job):
    return ObjectCreated(bucket="images", key=job.original_key, size=0, etag="e")


def test_upload_creates_a_queued_job_and_stores_the_original_under_its_id(svc):
    data = jpeg()
    job = svc.accept_upload("alice", data).job
    assert job.status is JobStatus.QUEUED and job.owner == "alice"
    assert len(job.job_id) == 36 and job.job_id[14] == "4"  # a random (version 4) UUID
    assert job.original_key == f"originals/{job.job_id}"
    assert svc.objects.objects[job.original_key] == (data, "image/jpeg")
    assert svc.jobs.items[job.job_id] == job


@pytest.mark.parametrize("data,error", [
    (b"\xff\xd8\xff" + b"0" * 300_000, FileTooLarge),
    (b"%PDF-1.7 not an image", UnsupportedFormat),
    (b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, InvalidImage),
    (jpeg(2500, 2000), ImageTooLarge),
])
def test_rejected_uploads_leave_no_job_and_no_object(svc, data, error):
    with pytest.raises(error):
        svc.accept_upload("alice", data)
    assert svc.jobs.items == {} and svc.objects.objects == {}


def test_storage_down_fails_the_job_storage_unavailable_and_says_retry(svc):
    svc.objects.down = True
    with pytest.raises(StorageUnavailable) as raised:
        svc.accept_upload("alice", jpeg())
    assert raised.value.retry_after == svc.settings.retry_after_seconds
    (job,) = svc.jobs.items.values()
    assert job.status is JobStatus.FAILED and job.error_code == "storage_unavailable"


def test_someone_elses_job_looks_like_no_job(svc):
    job = svc.accept_upload("alice", jpeg()).job
    assert svc.get_job("alice", job.job_id) == job
    for owner, job_id in [("bob", job.job_id), ("alice", "0" * 36), ("alice", "../etc")]:
        with pytest.raises(JobNotFound):
            svc.get_job(owner, job_id)


def test_a_job_past_its_expiry_is_gone_even_if_the_table_still_has_it(svc):
    job = svc.accept_upload("alice", jpeg()).job
    svc.clock.advance(svc.settings.retention_seconds)
    with pytest.raises(JobExpired):
        svc.get_job("alice", job.job_id)
    with pytest.raises(JobNotFound):
        svc.get_job("bob", job.job_id)


def test_worker_makes_both_renditions_and_the_job_ready(svc):
    job = svc.accept_upload("alice", jpeg(2000, 1500)).job
    assert svc.handle_object_created(created(svc, job)) == "ready"
    done = svc.jobs.items[job.job_id]
    assert done.status is JobStatus.READY and done.attempt == 1
    assert (done.display.width, done.display.height) == (1280, 960)
    assert (done.thumb.width, done.thumb.height) == (256, 256)
    assert size_of(svc.objects.objects[done.display.key][0]) == (1280, 960)
    assert size_of(svc.objects.objects[done.thumb.key][0]) == (256, 256)
    assert done.display.key == f"renditions/{job.job_id}/display.jpg"
    urls = svc.urls(done)
    assert done.display.key in urls.display and done.thumb.key in urls.thumb


def test_a_duplicate_delivery_of_a_finished_job_changes_nothing(svc):
    job = svc.accept_upload("alice", jpeg()).job
    svc.handle_object_created(created(svc, job))
    before = dict(svc.jobs.items), dict(svc.objects.objects)
    assert svc.handle_object_created(created(svc, job)) == "duplicate"
    assert (dict(svc.jobs.items), dict(svc.objects.objects)) == before


def test_an_undecodable_original_fails_permanently_without_retry(svc):
    job = svc.accept_upload("alice", jpeg()).job
    svc.objects.objects[job.original_key] = (b"\xff\xd8\xff" + b"\x00" * 64, "image/jpeg")
    assert svc.handle_object_created(created(svc, job)) == "failed:invalid_image"
    assert svc.jobs.items[job.job_id].error_code == "invalid_image"
    assert svc.handle_object_created(created(svc, job)) == "duplicate"


def test_transient_storage_failure_raises_and_releases_the_lease_for_a_retry(svc):
    job = svc.accept_upload("alice", jpeg()).job
    svc.objects.down = True
    with pytest.raises(TransientError):
        svc.handle_object_created(created(svc, job))
    held = svc.jobs.items[job.job_id]
    assert held.status is JobStatus.PROCESSING and held.attempt == 1
    assert not held.lease_active(svc.clock())
    svc.objects.down = False
    assert svc.handle_object_created(created(svc, job)) == "ready"
    assert svc.jobs.items[job.job_id].attempt == 2


def test_attempts_are_bounded_then_processing_failed(svc):
    job = svc.accept_upload("alice", jpeg()).job
    svc.objects.down = True
    for _ in range(svc.settings.max_attempts):
        with pytest.raises(TransientError):
            svc.handle_object_created(created(svc, job))
    svc.objects.down = False
    assert svc.handle_object_created(created(svc, job)) == "failed"
    failed = svc.jobs.items[job.job_id]
    assert failed.status is JobStatus.FAILED and failed.error_code == "processing_failed"


def test_a_job_leased_by_another_worker_sends_the_message_back(svc):
    job = svc.accept_upload("alice", jpeg()).job
    svc.jobs.claim(job.job_id, svc.clock(), 120, 3)
    svc.clock.advance(20)
    with pytest.raises(JobBusy) as busy:
        svc.handle_object_created(created(svc, job))
    assert busy.value.retry_in == 100  # until the other worker's lease runs out
    svc.clock.advance(-20)
    svc.clock.advance(121)  # the other worker died: its lease runs out
    assert svc.handle_object_created(created(svc, job)) == "ready"


def test_events_that_are_not_ours_are_ignored(svc):
    job = svc.accept_upload("alice", jpeg()).job
    with pytest.raises(PoisonMessage):
        svc.handle_object_created(ObjectCreated("other-bucket", job.original_key, 1, "e"))
    for event in [
        ObjectCreated("images", f"renditions/{job.job_id}/display.jpg", 1, "e"),
        ObjectCreated("images", "originals/not-a-job-id", 1, "e"),
        ObjectCreated("images", "originals/00000000-0000-4000-8000-000000000000", 1, "e"),
    ]:
        assert svc.handle_object_created(event) == "ignored"
    assert svc.jobs.items[job.job_id].status is JobStatus.QUEUED


def test_a_missing_original_fails_the_job_upload_missing(svc):
    job = svc.accept_upload("alice", jpeg()).job
    del svc.objects.objects[job.original_key]
    assert svc.handle_object_created(created(svc, job)) == "failed:upload_missing"


def test_transparent_png_is_processed(svc):
    job = svc.accept_upload("alice", png()).job
    assert svc.handle_object_created(created(svc, job)) == "ready"


class Gauge:
    def __init__(self, depth):
        self.value, self.reads = depth, 0

    def depth(self):
        self.reads += 1
        return self.value


def test_uploads_are_shed_while_the_backlog_is_over_the_bound(svc):
    from chalicelib.ports import Overloaded

    svc.backlog = Gauge(svc.settings.max_backlog + 1)
    with pytest.raises(Overloaded) as shed:
        svc.accept_upload("alice", jpeg())
    assert shed.value.retry_after >= 2
    with pytest.raises(Overloaded):
        svc.create_direct_upload("alice", "image/jpeg", 10)
    assert svc.jobs.items == {}
    svc.backlog.value = 0
    with pytest.raises(Overloaded):  # still the cached reading
        svc.accept_upload("alice", jpeg())
    assert svc.backlog.reads == 1
    svc.clock.advance(svc.settings.backlog_cache_seconds)
    assert svc.accept_upload("alice", jpeg()).job.status is JobStatus.QUEUED
    assert svc.backlog.reads == 2
