"""Idempotency, direct uploads, cancel, delete and the sweeper, on in-memory stores."""
from datetime import datetime, timedelta, timezone

import pytest

from chalicelib.config import Settings
from chalicelib.domain.errors import (
    FileTooLarge,
    IdempotencyKeyReused,
    InvalidRequest,
    JobExpired,
    JobFinished,
    JobNotFound,
    StorageUnavailable,
    UnsupportedFormat,
)
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.jobs import JobStatus
from chalicelib.domain.vocabulary import SweepOutcome
from chalicelib.usecases import UseCases
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, FakeQueue, fake_context
from tests.images import jpeg

START = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)


@pytest.fixture
def use_cases():
    clock = Clock(START)
    settings = Settings(bucket="images", max_upload_bytes=200_000, max_direct_upload_bytes=1_000_000)
    queue = FakeQueue(clock)
    return UseCases(fake_context(settings=settings, jobs=FakeJobStore(), objects=FakeObjectStore(clock),
                   publisher=queue, backlog=queue, clock=clock))


def event(use_cases, job):
    return ObjectCreated(bucket="images", key=job.original_key, size=0, etag="e")


def job_of(use_cases, job_id):
    return use_cases.ctx.jobs.items.get(job_id)


# -- idempotency -------------------------------------------------------------------------------
def test_same_key_same_bytes_replays_the_same_job_and_stores_nothing_new(use_cases):
    first = use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    objects = dict(use_cases.ctx.objects.objects)
    again = use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    assert again.replayed and not first.replayed
    assert again.job.job_id == first.job.job_id
    assert len(use_cases.ctx.jobs.items) == 1 and use_cases.ctx.objects.objects == objects


def test_replay_shows_the_jobs_current_status(use_cases):
    first = use_cases.uploads.accept_upload("alice", jpeg(), "key-1").job
    use_cases.worker.handle_object_created(event(use_cases, first))
    assert use_cases.uploads.accept_upload("alice", jpeg(), "key-1").job.status is JobStatus.READY


def test_same_key_other_bytes_is_refused(use_cases):
    use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    with pytest.raises(IdempotencyKeyReused):
        use_cases.uploads.accept_upload("alice", jpeg(color=(1, 2, 3)), "key-1")


def test_the_key_is_scoped_to_owner_and_operation(use_cases):
    a = use_cases.uploads.accept_upload("alice", jpeg(), "key-1").job
    b = use_cases.uploads.accept_upload("bob", jpeg(), "key-1").job
    c = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 100, "key-1").job
    assert len({a.job_id, b.job_id, c.job_id}) == 3


def test_an_expired_key_may_be_used_again(use_cases):
    first = use_cases.uploads.accept_upload("alice", jpeg(), "key-1").job
    use_cases.ctx.clock.advance(use_cases.ctx.settings.idempotency_ttl_seconds)
    second = use_cases.uploads.accept_upload("alice", jpeg(color=(1, 2, 3)), "key-1")
    assert not second.replayed and second.job.job_id != first.job_id


@pytest.mark.parametrize("key", ["", "x" * 256, "tab\there", "caf\u00e9", "new\nline"])
def test_malformed_keys_are_invalid_requests(use_cases, key):
    with pytest.raises(InvalidRequest):
        use_cases.uploads.accept_upload("alice", jpeg(), key)


def test_a_failed_store_releases_the_key(use_cases):
    use_cases.ctx.objects.down = True
    with pytest.raises(StorageUnavailable):
        use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    use_cases.ctx.objects.down = False
    retried = use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    assert not retried.replayed and retried.job.status is JobStatus.QUEUED


# -- direct uploads ---------------------------------------------------------------------------
def test_direct_upload_gives_a_pinned_form_then_the_upload_makes_it_ready(use_cases):
    accepted = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 50_000)
    job = accepted.job
    assert job.status is JobStatus.AWAITING_UPLOAD
    assert accepted.upload.fields["key"] == job.original_key
    assert accepted.upload.fields["Content-Type"] == "image/jpeg"
    assert accepted.upload.expires_at == job.upload_expires_at
    use_cases.ctx.objects.put(job.original_key, jpeg(), "image/jpeg")
    assert use_cases.worker.handle_object_created(event(use_cases, job)) == "ready"


@pytest.mark.parametrize("ctype,size,error", [
    ("image/jpeg", 1_000_001, FileTooLarge),
    ("application/pdf", 10, UnsupportedFormat),
    ("image/jpeg", 0, InvalidRequest),
    ("image/jpeg", "10", InvalidRequest),
    ("image/jpeg", True, InvalidRequest),
    (None, 10, InvalidRequest),
])
def test_direct_upload_declarations_are_checked(use_cases, ctype, size, error):
    with pytest.raises(error):
        use_cases.direct_uploads.create_direct_upload("alice", ctype, size)
    assert use_cases.ctx.jobs.items == {}


def test_an_upload_larger_than_declared_fails_file_too_large(use_cases):
    job = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 100).job
    use_cases.ctx.objects.put(job.original_key, jpeg(), "image/jpeg")
    assert use_cases.worker.handle_object_created(event(use_cases, job)) == "failed"
    assert job_of(use_cases, job.job_id).error_code == "file_too_large"


def test_an_upload_that_is_not_an_image_fails_unsupported_format(use_cases):
    job = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 1000).job
    use_cases.ctx.objects.put(job.original_key, b"%PDF-1.7" + b"0" * 100, "image/jpeg")
    assert use_cases.worker.handle_object_created(event(use_cases, job)) == "failed"
    assert job_of(use_cases, job.job_id).error_code == "unsupported_format"


# -- cancel ------------------------------------------------------------------------------------
def test_cancel_before_upload_and_cancel_twice(use_cases):
    job = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 1000).job
    cancelled = use_cases.manage.cancel("alice", job.job_id)
    assert cancelled.status is JobStatus.CANCELLED and cancelled.finished_at == START
    assert use_cases.manage.cancel("alice", job.job_id) == cancelled
    use_cases.ctx.objects.put(job.original_key, jpeg(), "image/jpeg")  # the upload still arrives
    assert use_cases.worker.handle_object_created(event(use_cases, job)) == "duplicate"


def test_cancel_of_a_finished_job_is_refused(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    use_cases.worker.handle_object_created(event(use_cases, job))
    with pytest.raises(JobFinished):
        use_cases.manage.cancel("alice", job.job_id)
    with pytest.raises(JobNotFound):
        use_cases.manage.cancel("bob", job.job_id)


class CancelDuring(FakeObjectStore):
    """Cancels the job the moment the worker touches storage at a chosen step."""

    def __init__(self, clock, svc_ref, when):
        super().__init__(clock)
        self.svc_ref, self.when, self.fired = svc_ref, when, False

    def _maybe(self, step):
        if step == self.when and not self.fired:
            self.fired = True
            job = next(iter(self.svc_ref[0].ctx.jobs.items.values()))
            self.svc_ref[0].manage.cancel(job.owner, job.job_id)

    def get(self, key, max_bytes):
        data = super().get(key, max_bytes)
        self._maybe("download")
        return data

    def put(self, key, data, content_type, cache_control=None):
        super().put(key, data, content_type, cache_control)
        if key.endswith("thumb.jpg"):
            self._maybe("renditions_written")


@pytest.mark.parametrize("when", ["download", "renditions_written"])
def test_a_worker_mid_way_stops_and_leaves_no_renditions(when):
    clock, ref = Clock(START), []
    objects = CancelDuring(clock, ref, when)
    use_cases = UseCases(fake_context(settings=Settings(bucket="images"), jobs=FakeJobStore(), objects=objects,
                                      clock=clock))
    ref.append(use_cases)
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    outcome = use_cases.worker.handle_object_created(event(use_cases, job))
    # Cancelled during the download, the claim loses (nothing resized); during the puts,
    # the finishing write loses.
    assert outcome == {"download": "duplicate", "renditions_written": "lost"}[when]
    assert job_of(use_cases, job.job_id).status is JobStatus.CANCELLED
    assert [k for k in objects.objects if k.startswith("renditions/")] == []


# -- delete ------------------------------------------------------------------------------------
def test_delete_removes_record_original_renditions_and_key(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg(), "key-1").job
    use_cases.worker.handle_object_created(event(use_cases, job))
    with pytest.raises(JobNotFound):
        use_cases.manage.delete("bob", job.job_id)
    use_cases.manage.delete("alice", job.job_id)
    assert use_cases.ctx.jobs.items == {} and use_cases.ctx.objects.objects == {}
    assert use_cases.ctx.jobs.idempotency == {}
    with pytest.raises(JobNotFound):
        use_cases.manage.delete("alice", job.job_id)
    with pytest.raises(JobNotFound):
        use_cases.manage.get_job("alice", job.job_id)


def test_delete_of_a_queued_job_stops_its_worker(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    use_cases.manage.delete("alice", job.job_id)
    assert use_cases.worker.handle_object_created(event(use_cases, job)) == "ignored"
    assert use_cases.ctx.objects.objects == {}


# -- sweeper -----------------------------------------------------------------------------------
def test_a_stuck_processing_job_is_resent_and_then_finishes(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    lease = timedelta(seconds=use_cases.ctx.settings.lease_seconds)
    use_cases.ctx.jobs.claim(job.job_id, use_cases.ctx.clock(), lease, 3)  # a worker that died
    assert use_cases.sweeper.sweep() == {}  # lease still live
    use_cases.ctx.clock.advance(use_cases.ctx.settings.lease_seconds)
    assert use_cases.sweeper.sweep()[SweepOutcome.RESENT] == 1
    assert use_cases.ctx.publisher.sent == [ObjectCreated("images", job.original_key, 0)]
    assert use_cases.sweeper.sweep() == {}  # not re-sent while the resend is in flight
    assert use_cases.worker.handle_object_created(event(use_cases, job)) == "ready"


def test_a_job_out_of_attempts_fails_processing_failed(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    for _ in range(use_cases.ctx.settings.max_attempts):
        use_cases.ctx.jobs.claim(job.job_id, use_cases.ctx.clock(),
                                 timedelta(seconds=use_cases.ctx.settings.lease_seconds), 3)
        use_cases.ctx.clock.advance(use_cases.ctx.settings.lease_seconds)
    assert use_cases.sweeper.sweep()[SweepOutcome.FAILED] == 1
    failed = job_of(use_cases, job.job_id)
    assert failed.status is JobStatus.FAILED and failed.error_code == "processing_failed"


def test_a_queued_job_whose_event_is_lost_is_resent(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job  # its notification never came
    use_cases.ctx.clock.advance(use_cases.ctx.settings.queue_timeout_seconds)
    assert use_cases.sweeper.sweep()[SweepOutcome.RESENT] == 1
    assert use_cases.ctx.publisher.sent == [ObjectCreated("images", job.original_key, 0)]
    assert use_cases.worker.handle_object_created(event(use_cases, job)) == "ready"


def test_an_upload_that_never_came_fails_upload_missing(use_cases):
    job = use_cases.direct_uploads.create_direct_upload("alice", "image/png", 1000).job
    use_cases.ctx.clock.advance(use_cases.ctx.settings.upload_url_ttl_seconds + use_cases.ctx.upload_grace.total_seconds())
    assert use_cases.sweeper.sweep()[SweepOutcome.UPLOAD_MISSING] == 1
    assert job_of(use_cases, job.job_id).error_code == "upload_missing"


def test_jobs_past_retention_are_deleted_with_their_objects(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg(), "key-1").job
    use_cases.worker.handle_object_created(event(use_cases, job))
    use_cases.ctx.clock.advance(use_cases.ctx.settings.retention_seconds)
    with pytest.raises(JobExpired):
        use_cases.manage.get_job("alice", job.job_id)  # 410 before the sweep ...
    assert use_cases.sweeper.sweep()[SweepOutcome.EXPIRED_DELETED] == 1
    assert use_cases.ctx.jobs.items == {} and use_cases.ctx.objects.objects == {}  # ... gone after it


def test_orphan_objects_are_deleted_after_the_grace_period(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    orphan = use_cases.ctx.object_keys.original("5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0")
    use_cases.ctx.objects.put(orphan, b"x", "image/jpeg")
    use_cases.ctx.objects.put("renditions/5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0/1/display.jpg", b"x", "image/jpeg")
    assert use_cases.orphan_scan.run() == {}
    # Within the grace period they were kept; the next pass (a day on) finds them old enough.
    settings = use_cases.ctx.settings
    use_cases.ctx.clock.advance(max(settings.orphan_grace_seconds, settings.orphan_pass_seconds) + 1)
    assert use_cases.orphan_scan.run()["orphans_deleted"] == 2
    assert list(use_cases.ctx.objects.objects) == [job.original_key]


def test_sweeping_twice_leaves_the_same_state(use_cases):
    stuck = use_cases.uploads.accept_upload("alice", jpeg()).job
    use_cases.ctx.jobs.claim(stuck.job_id, use_cases.ctx.clock(),
                             timedelta(seconds=use_cases.ctx.settings.lease_seconds), 3)
    use_cases.direct_uploads.create_direct_upload("alice", "image/png", 1000)
    use_cases.ctx.clock.advance(use_cases.ctx.settings.upload_url_ttl_seconds + use_cases.ctx.upload_grace.total_seconds())
    use_cases.sweeper.sweep()
    ctx = use_cases.ctx
    state = (dict(ctx.jobs.items), dict(ctx.objects.objects), list(ctx.publisher.sent))
    assert use_cases.sweeper.sweep() == {}
    assert (dict(ctx.jobs.items), dict(ctx.objects.objects), list(ctx.publisher.sent)) == state
