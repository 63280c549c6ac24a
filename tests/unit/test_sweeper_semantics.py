"""The sweeper as the contract now says: a job is never failed, nor its event re-sent,
because it waited; a lost event is re-sent (publish first, then mark); a direct upload whose
notification was lost is processed; an original that never arrived ends the job and frees
its key."""
import itertools
from datetime import datetime, timezone

import pytest

from chalicelib.config import Settings
from chalicelib.domain.errors import TransientError
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.jobs import DUE_SHARDS, JobStatus
from chalicelib.domain.vocabulary import SweepOutcome
from chalicelib.usecases import UseCases
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, FakeQueue, fake_context
from tests.images import jpeg

START = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)


def make_svc(**settings):
    clock = Clock(START)
    queue = FakeQueue(clock)

    def notify(key):  # storage notifies the queue of every original, as the bucket does
        if key.startswith("originals/"):
            queue.publish_object_created(ObjectCreated("images", key, 0))

    return UseCases(fake_context(settings=Settings(bucket="images", **settings), jobs=FakeJobStore(),
                                 objects=FakeObjectStore(clock, on_created=notify),
                                 publisher=queue, backlog=queue, clock=clock))


@pytest.fixture
def use_cases():
    return make_svc()


def job_of(use_cases, job_id):
    return use_cases.ctx.jobs.items[job_id]


def deliver(use_cases):
    return [use_cases.worker.handle_object_created(e) for e in use_cases.ctx.backlog.take()]


def test_a_job_behind_a_long_backlog_is_neither_failed_nor_resent(use_cases):
    s = use_cases.ctx.settings
    backlog = use_cases.uploads.accept_upload("bob", jpeg(color=(9, 9, 9))).job  # older, still waiting
    use_cases.ctx.clock.advance(5)
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    for _ in range(10):  # ten queue timeouts: far past the old "twice QUEUE_TIMEOUT" rule
        use_cases.ctx.clock.advance(s.queue_timeout_seconds)
        report = use_cases.sweeper.sweep()
        assert report[SweepOutcome.WAITING] == 2
        assert SweepOutcome.FAILED not in report and SweepOutcome.RESENT not in report
    assert job_of(use_cases, job.job_id).status is JobStatus.QUEUED
    assert len(use_cases.ctx.backlog.sent) == 2  # the two notifications, no duplicates
    assert deliver(use_cases) == ["ready", "ready"]
    assert job_of(use_cases, backlog.job_id).status is JobStatus.READY


def test_a_lost_event_is_resent_once_the_queue_has_moved_past_it(use_cases):
    s = use_cases.ctx.settings
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    use_cases.ctx.backlog.take()  # delivered, but the worker's Lambda never ran it: lost
    use_cases.ctx.clock.advance(s.queue_timeout_seconds)
    assert use_cases.sweeper.sweep()[SweepOutcome.RESENT] == 1
    assert job_of(use_cases, job.job_id).resends == 1
    assert deliver(use_cases) == ["ready"]


def test_an_event_sent_within_the_delivery_delay_is_not_yet_lost():
    use_cases = make_svc(queue_timeout_seconds=30, event_delay_seconds=60)
    use_cases.uploads.accept_upload("alice", jpeg())
    use_cases.ctx.backlog.take()
    use_cases.ctx.clock.advance(30)
    assert use_cases.sweeper.sweep() == {SweepOutcome.WAITING: 1}  # storage may still be about to notify
    use_cases.ctx.clock.advance(31)
    assert use_cases.sweeper.sweep()[SweepOutcome.RESENT] == 1


def test_an_unknown_queue_state_never_fails_or_duplicates(use_cases):
    use_cases.uploads.accept_upload("alice", jpeg())
    use_cases.ctx.backlog.take()
    use_cases.ctx.backlog.unknown = True
    for _ in range(5):
        use_cases.ctx.clock.advance(use_cases.ctx.settings.queue_timeout_seconds)
        assert use_cases.sweeper.sweep() == {SweepOutcome.WAITING: 1}
    use_cases.ctx.backlog.unknown = False  # the queue empties, or the metric arrives
    use_cases.ctx.clock.advance(use_cases.ctx.settings.queue_timeout_seconds)
    assert use_cases.sweeper.sweep()[SweepOutcome.RESENT] == 1


def test_a_resend_publishes_first_so_a_failed_publish_marks_nothing(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    use_cases.ctx.backlog.take()
    use_cases.ctx.clock.advance(use_cases.ctx.settings.queue_timeout_seconds)
    use_cases.ctx.backlog.down = True
    assert use_cases.sweeper.sweep()[SweepOutcome.ERRORS] == 1
    assert job_of(use_cases, job.job_id).resends == 0 and job_of(use_cases, job.job_id).status is JobStatus.QUEUED
    use_cases.ctx.backlog.down = False
    assert use_cases.sweeper.sweep()[SweepOutcome.RESENT] == 1
    assert deliver(use_cases) == ["ready"]


def test_a_job_whose_resent_events_keep_vanishing_ends_processing_failed(use_cases):
    s = use_cases.ctx.settings
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    for _ in range(s.max_attempts + 1):
        use_cases.ctx.backlog.take()  # every event dropped
        use_cases.ctx.clock.advance(s.queue_timeout_seconds)
        use_cases.sweeper.sweep()
    failed = job_of(use_cases, job.job_id)
    assert failed.status is JobStatus.FAILED and failed.error_code == "processing_failed"
    assert failed.resends == s.max_attempts


def test_a_stuck_processing_job_waits_for_its_own_message_to_come_back(use_cases):
    s = use_cases.ctx.settings
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    # A worker took the event and died: SQS shows the message again after the visibility
    # timeout, so it is still in the queue (in flight) while the lease runs out.
    (event,) = use_cases.ctx.backlog.take()
    use_cases.ctx.backlog.waiting.append((use_cases.ctx.clock(), event))
    use_cases.ctx.jobs.claim(job.job_id, use_cases.ctx.clock(), use_cases.ctx.lease, s.max_attempts)
    use_cases.ctx.clock.advance(s.lease_seconds)
    assert use_cases.sweeper.sweep() == {SweepOutcome.WAITING: 1}
    assert deliver(use_cases) == ["ready"]
    assert len(use_cases.ctx.backlog.sent) == 1


class Killed(BaseException):
    """Lambda's timeout: nothing after it runs, not even an `except Exception`."""


def kill_the_put(use_cases):
    def killed(*args):
        raise Killed()
    use_cases.ctx.objects.put, restore = killed, use_cases.ctx.objects.put
    return restore


def test_a_queued_job_whose_original_never_arrived_fails_and_frees_its_key(use_cases):
    restore = kill_the_put(use_cases)
    with pytest.raises(Killed):
        use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    use_cases.ctx.objects.put = restore
    (job,) = use_cases.ctx.jobs.items.values()
    assert job.status is JobStatus.QUEUED and use_cases.ctx.jobs.idempotency  # the kill skipped compensation
    use_cases.ctx.clock.advance(use_cases.ctx.settings.queue_timeout_seconds)
    assert use_cases.sweeper.sweep()[SweepOutcome.NEVER_STORED] == 1
    failed = job_of(use_cases, job.job_id)
    assert failed.status is JobStatus.FAILED and failed.error_code == "storage_unavailable"
    assert use_cases.ctx.jobs.idempotency == {}
    retried = use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    assert not retried.replayed and retried.job.job_id != job.job_id
    assert deliver(use_cases) == ["ready"]


def test_a_direct_upload_whose_notification_was_lost_is_processed(use_cases):
    s = use_cases.ctx.settings
    job = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 100_000).job
    use_cases.ctx.objects.put(job.original_key, jpeg(), "image/jpeg")
    use_cases.ctx.backlog.take()  # the notification was lost
    use_cases.ctx.clock.advance(s.upload_url_ttl_seconds + use_cases.ctx.upload_grace.total_seconds())
    assert use_cases.sweeper.sweep()[SweepOutcome.UPLOAD_FOUND] == 1
    queued = job_of(use_cases, job.job_id)
    assert queued.status is JobStatus.QUEUED and queued.resends == 1  # the event, sent again
    assert deliver(use_cases) == ["ready"]


def test_a_direct_upload_whose_notification_is_waiting_is_queued_without_a_duplicate(use_cases):
    s = use_cases.ctx.settings
    job = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 100_000).job
    use_cases.ctx.clock.advance(s.upload_url_ttl_seconds - 1)
    use_cases.ctx.objects.put(job.original_key, jpeg(), "image/jpeg")  # its event waits in the queue
    use_cases.ctx.clock.advance(1 + use_cases.ctx.upload_grace.total_seconds())
    assert use_cases.sweeper.sweep()[SweepOutcome.UPLOAD_FOUND] == 1
    assert job_of(use_cases, job.job_id).status is JobStatus.QUEUED and job_of(use_cases, job.job_id).resends == 0
    assert deliver(use_cases) == ["ready"] and len(use_cases.ctx.backlog.sent) == 1


def test_a_direct_upload_that_never_came_still_fails_upload_missing(use_cases):
    job = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 100_000, "key-1").job
    use_cases.ctx.clock.advance(use_cases.ctx.settings.upload_url_ttl_seconds + use_cases.ctx.upload_grace.total_seconds())
    assert use_cases.sweeper.sweep()[SweepOutcome.UPLOAD_MISSING] == 1
    assert job_of(use_cases, job.job_id).error_code == "upload_missing"
    # The key no longer points at a job that cannot succeed: a retry gets a new upload.
    again = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 100_000, "key-1")
    assert not again.replayed and again.job.job_id != job.job_id and again.upload is not None


def test_the_sweep_stops_taking_jobs_when_its_invocation_runs_out_of_time(use_cases):
    from chalicelib.runtime import deadline

    for _ in range(3):
        use_cases.uploads.accept_upload("alice", jpeg())
    use_cases.ctx.backlog.take()
    use_cases.ctx.clock.advance(use_cases.ctx.settings.queue_timeout_seconds)
    ticks = itertools.chain([0.0], itertools.repeat(3.0))
    limits = deadline.SdkLimits(connect_timeout=0.5, read_timeout=0.5, max_attempts=1)
    token = deadline._current.set(deadline.Budget(9.0, limits.attempt_seconds, monotonic=lambda: next(ticks)))
    try:
        report = use_cases.sweeper.sweep()
    finally:
        deadline._current.reset(token)
    # 9 s - 1 s safety - 2 s reserve leaves 6 s at t=0; at t=3 only 3 s: too few for 4 calls,
    # so no shard is even queried, and the next run starts where this one stopped.
    assert report == {SweepOutcome.SHARDS_LEFT: DUE_SHARDS}
    assert all(j.resends == 0 for j in use_cases.ctx.jobs.items.values())


def test_publishing_is_never_done_by_a_sweep_that_cannot_reach_the_queue_state(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    use_cases.ctx.backlog.take()
    use_cases.ctx.clock.advance(use_cases.ctx.settings.queue_timeout_seconds)

    def down(now):
        raise TransientError("queue unavailable")

    use_cases.ctx.backlog.drained_before = down
    assert use_cases.sweeper.sweep()[SweepOutcome.ERRORS] == 1
    assert use_cases.ctx.backlog.sent == [ObjectCreated("images", job.original_key, 0)]  # only storage's
    assert job_of(use_cases, job.job_id).status is JobStatus.QUEUED


def test_the_sweep_report_keeps_the_names_its_log_line_has_always_carried():
    # Operators search `sweep_done` by these strings: a member may be renamed, its value not.
    assert {o.name: o.value for o in SweepOutcome} == {
        "SKIPPED": "skipped", "FAILED": "failed", "NEVER_STORED": "never_stored",
        "UPLOAD_MISSING": "upload_missing", "UPLOAD_FOUND": "upload_found", "WAITING": "waiting",
        "RESENT": "redriven", "RESEND_RACED": "redrive_raced", "EXPIRED_DELETED": "expired_deleted",
        "ERRORS": "errors", "SHARDS_LEFT": "shards_left",
    }
