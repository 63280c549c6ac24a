"""Uploads, reads and the worker over the in-memory fakes: a job from its upload to ready or failed."""
from datetime import datetime, timedelta, timezone

import pytest

from chalicelib.config import Settings
from chalicelib.domain.errors import (
    FileTooLarge,
    ImageTooLarge,
    InvalidImage,
    JobBusy,
    JobExpired,
    JobNotFound,
    PoisonMessage,
    StorageUnavailable,
    TransientError,
    UnsupportedFormat,
)
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.jobs import JobStatus
from chalicelib.domain.renditions import RenditionName
from chalicelib.usecases import UseCases
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, fake_context
from tests.images import jpeg, png, size_of

START = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)


@pytest.fixture
def use_cases():
    settings = Settings(bucket="images", max_upload_bytes=200_000, max_pixels=4_000_000)
    return UseCases(fake_context(settings=settings, jobs=FakeJobStore(), objects=FakeObjectStore(), clock=Clock(START)))


def created(use_cases, job):
    return ObjectCreated(bucket="images", key=job.original_key, size=0, etag="e")


def test_upload_creates_a_queued_job_and_stores_the_original_under_its_id(use_cases):
    data = jpeg()
    job = use_cases.uploads.accept_upload("alice", data).job
    assert job.status is JobStatus.QUEUED and job.owner == "alice"
    assert len(job.job_id) == 36 and job.job_id[14] == "4"  # a random (version 4) UUID
    assert job.original_key == f"originals/{job.job_id}"
    assert use_cases.ctx.objects.objects[job.original_key] == (data, "image/jpeg")
    assert use_cases.ctx.jobs.items[job.job_id] == job


@pytest.mark.parametrize("data,error", [
    (b"\xff\xd8\xff" + b"0" * 300_000, FileTooLarge),
    (b"%PDF-1.7 not an image", UnsupportedFormat),
    (b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, InvalidImage),
    (jpeg(2500, 2000), ImageTooLarge),
])
def test_rejected_uploads_leave_no_job_and_no_object(use_cases, data, error):
    with pytest.raises(error):
        use_cases.uploads.accept_upload("alice", data)
    assert use_cases.ctx.jobs.items == {} and use_cases.ctx.objects.objects == {}


def test_storage_down_fails_the_job_storage_unavailable_and_says_retry(use_cases):
    use_cases.ctx.objects.down = True
    with pytest.raises(StorageUnavailable) as raised:
        use_cases.uploads.accept_upload("alice", jpeg())
    assert raised.value.retry_after == use_cases.ctx.settings.retry_after_seconds
    (job,) = use_cases.ctx.jobs.items.values()
    assert job.status is JobStatus.FAILED and job.error_code == "storage_unavailable"


def test_someone_elses_job_looks_like_no_job(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    assert use_cases.manage.get_job("alice", job.job_id) == job
    for owner, job_id in [("bob", job.job_id), ("alice", "0" * 36), ("alice", "../etc")]:
        with pytest.raises(JobNotFound):
            use_cases.manage.get_job(owner, job_id)


def test_a_job_past_its_expiry_is_gone_even_if_the_table_still_has_it(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    use_cases.ctx.clock.advance(use_cases.ctx.settings.retention_seconds)
    with pytest.raises(JobExpired):
        use_cases.manage.get_job("alice", job.job_id)
    with pytest.raises(JobNotFound):
        use_cases.manage.get_job("bob", job.job_id)


def test_worker_makes_both_renditions_and_the_job_ready(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg(2000, 1500)).job
    assert use_cases.worker.handle_object_created(created(use_cases, job)) == "ready"
    done = use_cases.ctx.jobs.items[job.job_id]
    assert done.status is JobStatus.READY and done.attempt == 1
    display, thumb = done.renditions[RenditionName.DISPLAY], done.renditions[RenditionName.THUMB]
    assert (display.width, display.height) == (1280, 960)
    assert (thumb.width, thumb.height) == (256, 256)
    assert size_of(use_cases.ctx.objects.objects[display.key][0]) == (1280, 960)
    assert size_of(use_cases.ctx.objects.objects[thumb.key][0]) == (256, 256)
    assert display.key == f"renditions/{job.job_id}/1/display.jpg"  # fenced by attempt
    urls = use_cases.manage.urls(done)
    assert display.key in urls.by_name[RenditionName.DISPLAY] and thumb.key in urls.by_name[RenditionName.THUMB]


def test_a_duplicate_delivery_of_a_finished_job_changes_nothing(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    use_cases.worker.handle_object_created(created(use_cases, job))
    before = dict(use_cases.ctx.jobs.items), dict(use_cases.ctx.objects.objects)
    assert use_cases.worker.handle_object_created(created(use_cases, job)) == "duplicate"
    assert (dict(use_cases.ctx.jobs.items), dict(use_cases.ctx.objects.objects)) == before


def test_an_undecodable_original_fails_permanently_without_retry(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    use_cases.ctx.objects.objects[job.original_key] = (b"\xff\xd8\xff" + b"\x00" * 64, "image/jpeg")
    assert use_cases.worker.handle_object_created(created(use_cases, job)) == "failed"
    assert use_cases.ctx.jobs.items[job.job_id].error_code == "invalid_image"
    assert use_cases.worker.handle_object_created(created(use_cases, job)) == "duplicate"


def test_transient_storage_failure_raises_and_releases_the_lease_for_a_retry(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    use_cases.ctx.objects.down = True
    with pytest.raises(TransientError):
        use_cases.worker.handle_object_created(created(use_cases, job))
    held = use_cases.ctx.jobs.items[job.job_id]
    assert held.status is JobStatus.PROCESSING and held.attempt == 1
    assert not held.lease_active(use_cases.ctx.clock())
    use_cases.ctx.objects.down = False
    assert use_cases.worker.handle_object_created(created(use_cases, job)) == "ready"
    assert use_cases.ctx.jobs.items[job.job_id].attempt == 2


def test_attempts_are_bounded_then_processing_failed(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    use_cases.ctx.objects.down = True
    for _ in range(use_cases.ctx.settings.max_attempts):
        with pytest.raises(TransientError):
            use_cases.worker.handle_object_created(created(use_cases, job))
    use_cases.ctx.objects.down = False
    assert use_cases.worker.handle_object_created(created(use_cases, job)) == "failed"
    failed = use_cases.ctx.jobs.items[job.job_id]
    assert failed.status is JobStatus.FAILED and failed.error_code == "processing_failed"


def test_a_job_leased_by_another_worker_sends_the_message_back(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    use_cases.ctx.jobs.claim(job.job_id, use_cases.ctx.clock(), timedelta(seconds=120), 3)
    use_cases.ctx.clock.advance(20)
    with pytest.raises(JobBusy) as busy:
        use_cases.worker.handle_object_created(created(use_cases, job))
    assert busy.value.retry_in == 100  # until the other worker's lease runs out
    use_cases.ctx.clock.advance(-20)
    use_cases.ctx.clock.advance(121)  # the other worker died: its lease runs out
    assert use_cases.worker.handle_object_created(created(use_cases, job)) == "ready"


def test_events_that_are_not_ours_are_ignored(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    with pytest.raises(PoisonMessage):
        use_cases.worker.handle_object_created(ObjectCreated("other-bucket", job.original_key, 1, "e"))
    for event in [
        ObjectCreated("images", f"renditions/{job.job_id}/display.jpg", 1, "e"),
        ObjectCreated("images", "originals/not-a-job-id", 1, "e"),
        ObjectCreated("images", "originals/00000000-0000-4000-8000-000000000000", 1, "e"),
    ]:
        assert use_cases.worker.handle_object_created(event) == "ignored"
    assert use_cases.ctx.jobs.items[job.job_id].status is JobStatus.QUEUED


def test_a_missing_original_fails_the_job_upload_missing(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    del use_cases.ctx.objects.objects[job.original_key]
    assert use_cases.worker.handle_object_created(created(use_cases, job)) == "failed"
    assert use_cases.ctx.jobs.items[job.job_id].error_code == "upload_missing"


def test_transparent_png_is_processed(use_cases):
    job = use_cases.uploads.accept_upload("alice", png()).job
    assert use_cases.worker.handle_object_created(created(use_cases, job)) == "ready"


class Gauge:
    def __init__(self, depth):
        self.value, self.reads = depth, 0

    def depth(self):
        self.reads += 1
        return self.value


def test_uploads_are_shed_while_the_backlog_is_over_the_bound(use_cases):
    from chalicelib.domain.errors import Overloaded

    use_cases.ctx.backlog = Gauge(use_cases.ctx.settings.max_backlog + 1)
    with pytest.raises(Overloaded) as shed:
        use_cases.uploads.accept_upload("alice", jpeg())
    assert shed.value.retry_after >= 2
    with pytest.raises(Overloaded):
        use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 10)
    assert use_cases.ctx.jobs.items == {}
    use_cases.ctx.backlog.value = 0
    with pytest.raises(Overloaded):  # still the cached reading
        use_cases.uploads.accept_upload("alice", jpeg())
    assert use_cases.ctx.backlog.reads == 1
    use_cases.ctx.clock.advance(use_cases.ctx.settings.backlog_cache_seconds)
    assert use_cases.uploads.accept_upload("alice", jpeg()).job.status is JobStatus.QUEUED
    assert use_cases.ctx.backlog.reads == 2
