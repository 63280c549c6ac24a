"""A conditional write that committed, whose answer was lost, and whose re-send by botocore
then failed its own condition: on DynamoDB (moto's server, behind tests/dynamo_stub.py,
which lets the write commit and then drops or delays its answer), every conditional write of
the job store is this call's own, and the use cases go on as if the answer had arrived.

Clocks have microseconds, as real requests' do (`expires_at` is stored in whole seconds)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from chalicelib.adapters.dynamo_jobs import DynamoJobStore
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.domain.errors import ConditionFailed
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.jobs import Job, JobStatus
from chalicelib.domain.vocabulary import ErrorCode, Outcome
from chalicelib.domain.idempotency import IdempotencyRecord
from chalicelib.usecases import UseCases
from tests.dynamo_stub import DynamoStub
from tests.fakes import FakeObjectStore, ListMetrics, fake_context
from tests.images import jpeg

NOW = datetime(2026, 7, 15, 10, 0, 30, 449514, tzinfo=timezone.utc)
WEEK = timedelta(days=7)
LEASE = timedelta(seconds=120)
# Short enough for a delayed answer to time out quickly; retries as production's.
FAST = {"connect_timeout_seconds": 2, "read_timeout_seconds": 1, "max_retry_attempts": 2}
JOB_ID = "5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0"


class Clock:
    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds, microseconds=123457)


@pytest.fixture
def stub(stack):
    settings, _, _ = stack
    stub = DynamoStub(settings.endpoint_url)
    stub.delay_seconds = 1.6
    yield stub
    stub.close()


@pytest.fixture
def store(stack, stub):
    settings, _, _ = stack
    return DynamoJobStore(DynamoTable(settings.table, settings.region, stub.url, connection=FAST))


def job_key(job_id: str = JOB_ID):
    return lambda request: f"job#{job_id}" in str(request.get("Key") or request.get("Item") or request)


def new_job(job_id: str = JOB_ID, now: datetime = NOW) -> Job:
    return Job(job_id=job_id, owner="alice", status=JobStatus.QUEUED, created_at=now, updated_at=now,
               expires_at=now + WEEK, original_key=f"originals/{job_id}", sweep_at=now)


# -- the store: each conditional write, its answer lost after it committed -------------------
@pytest.mark.parametrize("how", ["drop", "delay"])
def test_a_create_whose_answer_was_lost_is_this_calls_own(store, stub, how):
    stub.lose_answer("TransactWriteItems", how=how)
    store.create(new_job(), 20)
    assert stub.lost == 1
    assert stub.operations["GetItem"] == 0, "the refusal carries the job: no read needed"
    assert store.get(JOB_ID).created_at == NOW and store.active_jobs("alice") == {JOB_ID}


def test_a_second_create_of_the_same_id_is_refused(store):
    """Not a re-send: another call, though of an identical job."""
    store.create(new_job(), 20)
    with pytest.raises(ConditionFailed):
        store.create(new_job(), 20)


def test_a_keyed_create_whose_answer_was_lost_is_this_calls_own(store, stub):
    """The re-send finds the key held by this very call's job: answered as the create it is
    (so what follows a create, such as the push fan-out's first message, follows it too)."""
    record = IdempotencyRecord("scope-1", "fp", JOB_ID, NOW + timedelta(hours=24))
    stub.lose_answer("TransactWriteItems")
    store.create_with_key(new_job(), record, NOW, 20)
    assert stub.lost == 1
    assert stub.operations["GetItem"] == 0, "the refusal carries the job: no read needed"
    assert store.get_idempotency("scope-1").job_id == JOB_ID
    assert store.get(JOB_ID).created_at == NOW and store.active_jobs("alice") == {JOB_ID}


def test_a_keyed_create_of_another_call_finds_the_key_taken(store, stub):
    """Not a re-send: another request with the key, its own new job, reads the key again."""
    from chalicelib.domain.errors import IdempotencyKeyTaken

    record = IdempotencyRecord("scope-1", "fp", JOB_ID, NOW + timedelta(hours=24))
    store.create_with_key(new_job(), record, NOW, 20)
    other = "6b4f3d2e-1c0a-4f9e-b8d7-c6b5a4f3e2d1"
    with pytest.raises(IdempotencyKeyTaken):
        store.create_with_key(new_job(other), IdempotencyRecord("scope-1", "fp", other, record.expires_at), NOW, 20)
    assert stub.operations["GetItem"] == 0, "the refusal says the new job was not there: no read"
    assert store.get(other) is None and store.get_idempotency("scope-1").job_id == JOB_ID


def test_a_claim_whose_answer_was_lost_is_this_workers_claim(store, stub):
    store.create(new_job(), 20)
    stub.lose_answer("UpdateItem", job_key())
    claimed = store.claim(JOB_ID, NOW, LEASE, 3)
    assert (claimed.status, claimed.attempt, claimed.lease_expires_at) == (JobStatus.PROCESSING, 1, NOW + LEASE)


@pytest.mark.parametrize("write", ["move", "finish_attempt", "update_if_unchanged", "release_lease"])
def test_each_write_whose_answer_was_lost_is_this_calls_own(store, stub, write):
    store.create(new_job(), 20)
    later = NOW + timedelta(seconds=3, microseconds=7)
    if write == "move":
        call = lambda: store.move(new_job().cancelled(later, WEEK), JobStatus.QUEUED)  # noqa: E731
        expected = JobStatus.CANCELLED
    else:
        claimed = store.claim(JOB_ID, NOW, LEASE, 3)
        expected = {"finish_attempt": JobStatus.FAILED, "update_if_unchanged": JobStatus.FAILED,
                    "release_lease": JobStatus.PROCESSING}[write]
        failed = claimed.failed(later, ErrorCode.INVALID_IMAGE, WEEK)
        call = {"finish_attempt": lambda: store.finish_attempt(failed, 1),
                "update_if_unchanged": lambda: store.update_if_unchanged(failed, seen=claimed),
                "release_lease": lambda: store.release_lease(JOB_ID, 1, later)}[write]
    operation = "UpdateItem" if write == "release_lease" else "PutItem"
    stub.lose_answer(operation, job_key())
    call()
    assert stub.lost == 1
    assert store.get(JOB_ID).status is expected


def test_a_write_that_lost_to_another_still_fails_its_condition(store):
    """The write id tells: a claim that never landed is not taken for this call's own."""
    store.create(new_job(), 20)
    store.claim(JOB_ID, NOW, LEASE, 3)
    with pytest.raises(ConditionFailed):
        store.claim(JOB_ID, NOW, LEASE, 3)


# -- the use cases over it: claim, fail, cancel, upload ----------------------------------------
@pytest.fixture
def use_cases(stack, store):
    settings, _, _ = stack
    objects = FakeObjectStore()
    return UseCases(fake_context(settings=settings, jobs=store, objects=objects, clock=Clock(NOW)))


def test_an_upload_whose_create_answer_was_lost_is_accepted(use_cases, stub):
    """Issue 32 item 9: the job read back differs from the one in hand (expires_at whole
    seconds; the worker may have claimed it): it was 500."""
    stub.lose_answer("TransactWriteItems")
    accepted = use_cases.uploads.accept_upload("alice", jpeg(64, 48))
    assert stub.lost == 1 and not accepted.replayed
    assert use_cases.ctx.jobs.get(accepted.job.job_id).status is JobStatus.QUEUED


def _uploaded(use_cases, data: bytes) -> str:
    job_id = use_cases.uploads.accept_upload("alice", data).job.job_id
    return job_id


def _event(use_cases, job_id: str) -> ObjectCreated:
    ctx = use_cases.ctx
    key = ctx.object_keys.original(job_id)
    return ObjectCreated(bucket=ctx.settings.bucket, key=key, size=len(ctx.objects.objects[key][0]))


def test_a_claim_whose_answer_was_lost_processes_the_job_at_once(use_cases, stub):
    """Issue 32 item 12: the worker took its own live lease for another's (JobBusy)."""
    job_id = _uploaded(use_cases, jpeg(64, 48))
    stub.lose_answer("UpdateItem", job_key(job_id))
    assert use_cases.worker.handle_object_created(_event(use_cases, job_id)) is Outcome.READY
    job = use_cases.ctx.jobs.get(job_id)
    assert (job.status, job.attempt) == (JobStatus.READY, 1)
    assert use_cases.ctx.jobs.active_jobs("alice") == set()


def test_a_failing_write_whose_answer_was_lost_concludes_the_job(use_cases, stub):
    """lifecycle.fail: the job failed, so its slot is given back (and its owner told)."""
    job_id = _uploaded(use_cases, jpeg(64, 48))
    ctx = use_cases.ctx
    ctx.objects.objects[ctx.object_keys.original(job_id)] = (b"not an image at all", "image/jpeg")
    stub.lose_answer("PutItem", job_key(job_id))
    assert use_cases.worker.handle_object_created(_event(use_cases, job_id)) is Outcome.FAILED
    assert ctx.jobs.get(job_id).status is JobStatus.FAILED
    assert ctx.jobs.active_jobs("alice") == set()


def test_a_cancel_whose_answer_was_lost_concludes_the_job(use_cases, stub):
    """Cancel: the slot is given back and the multipart upload aborted."""
    accepted = use_cases.direct_uploads.create_direct_upload(
        "alice", "image/jpeg", 20 * 1024 * 1024, method="multipart")
    job_id = accepted.job.job_id
    objects = use_cases.ctx.objects
    assert objects.uploads
    stub.lose_answer("PutItem", job_key(job_id))
    assert use_cases.manage.cancel("alice", job_id).status is JobStatus.CANCELLED
    assert stub.lost == 1
    assert use_cases.ctx.jobs.active_jobs("alice") == set()
    assert objects.uploads == {}, "the multipart upload was not aborted"


def test_a_job_stored_before_write_ids_is_written_as_before(stack, store):
    """Items written by the release before carry no write_id: every write still works on
    them, and a refused one is never taken for this call's own."""
    settings, _, clients = stack
    store.create(new_job(), 20)
    clients["dynamodb"].update_item(TableName=settings.table, Key={"pk": {"S": f"job#{JOB_ID}"}},
                                    UpdateExpression="REMOVE write_id")
    assert store.get(JOB_ID).created_at == NOW  # reads as before
    claimed = store.claim(JOB_ID, NOW, LEASE, 3)
    clients["dynamodb"].update_item(TableName=settings.table, Key={"pk": {"S": f"job#{JOB_ID}"}},
                                    UpdateExpression="REMOVE write_id")
    with pytest.raises(ConditionFailed):
        store.claim(JOB_ID, NOW, LEASE, 3)
    store.move(claimed.cancelled(NOW + timedelta(seconds=1), WEEK), JobStatus.PROCESSING)
    assert store.get(JOB_ID).status is JobStatus.CANCELLED


def test_every_status_of_a_keyed_upload_whose_answers_were_lost_reaches_the_push_fanout(use_cases, stub):
    """Where the table has no stream (the local runner) the fan-out hears of a status only
    from the write that made it: each write that landed on a re-send is offered like any."""
    from chalicelib.usecases.push import Fanout, PushingJobStore

    published: list[tuple[str, JobStatus]] = []
    fanout = Fanout(lambda job: published.append((job.job_id, job.status)) or 1, ListMetrics())
    ctx = use_cases.ctx
    ctx.jobs = PushingJobStore(ctx.jobs, fanout)
    stub.lose_answer("TransactWriteItems")
    job_id = use_cases.uploads.accept_upload("alice", jpeg(64, 48), "key-1").job.job_id
    stub.lose_answer("UpdateItem", job_key(job_id))
    assert use_cases.worker.handle_object_created(_event(use_cases, job_id)) is Outcome.READY
    assert stub.lost == 2 and fanout.drain()
    assert published == [(job_id, JobStatus.QUEUED), (job_id, JobStatus.PROCESSING), (job_id, JobStatus.READY)]
