"""An Idempotency-Key never replays a job that cannot succeed, and is never released while
its job still may: replays repair a job that has no original, take over the key of a doomed
job, and an ambiguous put keeps the key of a job that went on."""
from datetime import datetime, timezone

import pytest

from chalicelib.config import Settings
from chalicelib.domain.errors import IdempotencyKeyTaken, StorageUnavailable, TransientError
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.jobs import JobStatus
from chalicelib.usecases import UseCases
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, FakeQueue, fake_context
from tests.images import jpeg

START = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)


class Killed(BaseException):
    """Lambda's timeout: nothing after it runs."""


@pytest.fixture
def use_cases():
    clock = Clock(START)
    queue = FakeQueue(clock)

    def notify(key):
        if key.startswith("originals/"):
            queue.publish_object_created(ObjectCreated("images", key, 0))

    return UseCases(fake_context(settings=Settings(bucket="images"), jobs=FakeJobStore(),
                                 objects=FakeObjectStore(clock, on_created=notify),
                                 publisher=queue, backlog=queue, clock=clock))


def deliver(use_cases):
    return [use_cases.worker.handle_object_created(e) for e in use_cases.ctx.backlog.take()]


def test_a_replay_stores_the_original_the_first_request_died_before_storing(use_cases):
    real_put = use_cases.ctx.objects.put

    def killed(*args):
        raise Killed()

    use_cases.ctx.objects.put = killed
    with pytest.raises(Killed):
        use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    use_cases.ctx.objects.put = real_put
    (job,) = use_cases.ctx.jobs.items.values()
    assert use_cases.ctx.objects.objects == {}
    again = use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    assert again.replayed and again.job.job_id == job.job_id
    assert use_cases.ctx.objects.objects[job.original_key][0] == jpeg()
    assert deliver(use_cases) == ["ready"]
    # A further replay stores nothing new.
    objects = dict(use_cases.ctx.objects.objects)
    assert use_cases.uploads.accept_upload("alice", jpeg(), "key-1").job.status is JobStatus.READY
    assert use_cases.ctx.objects.objects == objects


def test_a_replay_whose_repair_fails_answers_503_and_keeps_the_job_waiting(use_cases):
    use_cases.ctx.objects.put = lambda *a: (_ for _ in ()).throw(Killed())
    with pytest.raises(Killed):
        use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    del use_cases.ctx.objects.put
    use_cases.ctx.objects.down = True
    with pytest.raises(StorageUnavailable):
        use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    (job,) = use_cases.ctx.jobs.items.values()
    assert job.status is JobStatus.QUEUED
    use_cases.ctx.objects.down = False
    assert use_cases.uploads.accept_upload("alice", jpeg(), "key-1").replayed
    assert deliver(use_cases) == ["ready"]


def test_a_key_whose_job_failed_for_storage_is_taken_over_by_the_retry(use_cases):
    use_cases.ctx.objects.down = True
    real_release = use_cases.ctx.jobs.release_idempotency

    def table_blinks(*args):
        raise TransientError("job table unavailable")

    use_cases.ctx.jobs.release_idempotency = table_blinks  # the compensation cannot free the key
    with pytest.raises(StorageUnavailable):
        use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    use_cases.ctx.jobs.release_idempotency = real_release
    (first,) = use_cases.ctx.jobs.items.values()
    assert first.error_code == "storage_unavailable" and use_cases.ctx.jobs.idempotency  # a doomed job holds it
    use_cases.ctx.objects.down = False
    retried = use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    assert not retried.replayed and retried.job.job_id != first.job_id
    assert use_cases.ctx.jobs.idempotency[first.idempotency_scope].job_id == retried.job.job_id
    assert deliver(use_cases) == ["ready"]


def test_a_key_whose_job_is_gone_is_taken_over(use_cases):
    first = use_cases.uploads.accept_upload("alice", jpeg(), "key-1").job
    del use_cases.ctx.jobs.items[first.job_id]  # a delete that died after removing the record
    retried = use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    assert not retried.replayed and retried.job.job_id != first.job_id


def test_an_ambiguous_put_keeps_the_key_of_a_job_that_went_on(use_cases):
    """The put timed out, but it landed: the event arrived and a worker took the job before
    the compensation. The job may still succeed, so the key stays and the client gets it."""
    real_put = use_cases.ctx.objects.put

    def put_then_time_out(key, data, content_type, cache_control=None):
        real_put(key, data, content_type, cache_control)
        job_id = use_cases.ctx.object_keys.job_id_of(key)
        use_cases.ctx.jobs.claim(job_id, use_cases.ctx.clock(), use_cases.ctx.lease, 3)  # a fast worker
        raise TransientError("read timeout")

    use_cases.ctx.objects.put = put_then_time_out
    accepted = use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    use_cases.ctx.objects.put = real_put
    assert accepted.job.status is JobStatus.PROCESSING and not accepted.replayed
    assert use_cases.ctx.jobs.idempotency[accepted.job.idempotency_scope].job_id == accepted.job.job_id
    again = use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    assert again.replayed and again.job.job_id == accepted.job.job_id
    assert len(use_cases.ctx.jobs.items) == 1


def test_a_put_that_failed_for_sure_still_fails_the_job_and_frees_the_key(use_cases):
    use_cases.ctx.objects.down = True
    with pytest.raises(StorageUnavailable):
        use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    (job,) = use_cases.ctx.jobs.items.values()
    assert job.status is JobStatus.FAILED and job.error_code == "storage_unavailable"
    assert use_cases.ctx.jobs.idempotency == {}


class ConflictOnce(FakeJobStore):
    """DynamoDB's TransactionConflict: the concurrent identical request's transaction was in
    flight. Its write lands just after ours is cancelled."""

    def __init__(self, winner):
        super().__init__()
        self.winner = winner

    def create_with_key(self, job, record, now, quota):
        if self.winner is not None:
            winner, self.winner = self.winner, None
            super().create_with_key(winner(job), winner_record(record, winner(job)), now, quota)
            raise IdempotencyKeyTaken()
        super().create_with_key(job, record, now, quota)


def winner_record(record, job):
    from dataclasses import replace

    return replace(record, job_id=job.job_id)


def test_a_transaction_conflict_replays_the_concurrent_requests_job(use_cases):
    from dataclasses import replace

    store = ConflictOnce(lambda job: replace(job, job_id="7b0e9c5e-2f4a-4d1b-9c8e-1a2b3c4d5e6f",
                                             original_key="originals/7b0e9c5e-2f4a-4d1b-9c8e-1a2b3c4d5e6f"))
    use_cases.ctx.jobs = store
    accepted = use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    assert accepted.replayed and accepted.job.job_id == "7b0e9c5e-2f4a-4d1b-9c8e-1a2b3c4d5e6f"
    assert len(store.items) == 1


def test_a_keyed_create_that_landed_but_answered_as_taken_is_this_requests_own(use_cases):
    """botocore re-sends the transaction after a timeout; the first attempt had committed, so
    the retry finds the key held by this very job. That is the first request, not a replay:
    the original is stored and the key stays with the job (never freed as "doomed")."""
    jobs = use_cases.ctx.jobs
    real = jobs.create_with_key
    calls = []

    def landed_then_taken(job, record, now, quota):
        calls.append(job.job_id)
        if len(calls) == 1:
            real(job, record, now, quota)
        raise IdempotencyKeyTaken()

    jobs.create_with_key = landed_then_taken
    accepted = use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    assert not accepted.replayed and calls == [accepted.job.job_id]
    assert use_cases.ctx.objects.objects[accepted.job.original_key][0] == jpeg()
    assert jobs.get_idempotency(accepted.job.idempotency_scope).job_id == accepted.job.job_id
    assert deliver(use_cases) == ["ready"]
