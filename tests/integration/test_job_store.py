"""The JobStore contract, run against the in-memory fake and against DynamoDB on moto's server.

The fake is what the unit tests trust, so it must behave like the real table.
"""
import dataclasses
import threading
from datetime import datetime, timedelta, timezone

import pytest

from chalicelib.adapters.dynamo_jobs import DynamoJobStore
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.domain.errors import ConditionFailed
from chalicelib.domain.jobs import DUE_SHARDS, Job, JobStatus, Rendition, due_shard, sweep_key
from chalicelib.domain.renditions import RenditionName
from chalicelib.domain.vocabulary import ErrorCode
from tests.fakes import FakeJobStore

NOW = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)
WEEK = timedelta(days=7)
QUOTA = 100  # owner quota for tests that are not about it
TINY = {RenditionName.DISPLAY: Rendition("d", 1, 1), RenditionName.THUMB: Rendition("t", 1, 1)}


@pytest.fixture(params=["fake", "dynamo"])
def store(request):
    if request.param == "fake":
        return FakeJobStore()
    settings, _, _ = request.getfixturevalue("stack")
    return DynamoJobStore(DynamoTable(settings.table, settings.region, settings.endpoint_url))


def new_job(job_id="5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0"):
    return Job(job_id=job_id, owner="alice", status=JobStatus.QUEUED, created_at=NOW,
               updated_at=NOW, expires_at=NOW + WEEK, original_key=f"originals/{job_id}")


def test_create_then_get_round_trips_every_field(store):
    job = new_job()
    store.create(job, QUOTA)
    assert store.get(job.job_id) == job
    ready = store.claim(job.job_id, NOW, timedelta(seconds=120), 3).ready(
        NOW + timedelta(seconds=5),
        {RenditionName.DISPLAY: Rendition("r/d.jpg", 1280, 960), RenditionName.THUMB: Rendition("r/t.jpg", 256, 256)},
        WEEK)
    store.finish_attempt(ready, attempt=1)
    assert store.get(job.job_id) == ready
    failed = dataclasses.replace(new_job("6b4f3d2e-1c0a-4f9e-b8d7-c6b5a4f3e2d1"), declared_size=7,
                                 declared_type="image/png", idempotency_scope="s", resends=2)
    store.create(failed, QUOTA)
    failed = failed.failed(NOW, ErrorCode.INVALID_IMAGE, WEEK)
    store.move(failed, JobStatus.QUEUED)
    assert store.get(failed.job_id) == failed and store.get(failed.job_id).error_code is ErrorCode.INVALID_IMAGE


def test_create_is_conditional_on_the_id_being_new(store):
    store.create(new_job(), QUOTA)
    with pytest.raises(ConditionFailed):
        store.create(dataclasses.replace(new_job(), owner="bob"), QUOTA)
    assert store.get(new_job().job_id).owner == "alice"


def test_creating_the_identical_job_again_is_refused_and_takes_no_second_slot(store):
    """Another call, though of an identical job: only a transport's re-send of the same call
    is its own (tests/integration/test_landed_writes.py)."""
    store.create(new_job(), QUOTA)
    with pytest.raises(ConditionFailed):
        store.create(new_job(), QUOTA)
    assert store.active_jobs("alice") == {new_job().job_id}


def test_get_of_unknown_job_is_none(store):
    assert store.get("00000000-0000-4000-8000-000000000000") is None


def test_claim_counts_attempts_and_a_live_lease_blocks_a_second_claim(store):
    job = new_job()
    store.create(job, QUOTA)
    claimed = store.claim(job.job_id, NOW, timedelta(seconds=120), 3)
    assert (claimed.status, claimed.attempt) == (JobStatus.PROCESSING, 1)
    assert claimed.lease_expires_at == NOW + timedelta(seconds=120)
    with pytest.raises(ConditionFailed):
        store.claim(job.job_id, NOW + timedelta(seconds=119), timedelta(seconds=120), 3)
    again = store.claim(job.job_id, NOW + timedelta(seconds=120), timedelta(seconds=120), 3)
    assert again.attempt == 2


def test_claim_stops_at_the_attempt_limit(store):
    store.create(new_job(), QUOTA)
    t = NOW
    for _ in range(3):
        store.claim(new_job().job_id, t, timedelta(seconds=10), 3)
        t += timedelta(seconds=10)
    with pytest.raises(ConditionFailed):
        store.claim(new_job().job_id, t, timedelta(seconds=10), 3)


def test_claim_of_a_missing_or_finished_job_fails(store):
    with pytest.raises(ConditionFailed):
        store.claim(new_job().job_id, NOW, timedelta(seconds=120), 3)
    job = new_job()
    store.create(job, QUOTA)
    store.move(job.failed(NOW, ErrorCode.INVALID_IMAGE, WEEK), JobStatus.QUEUED)
    with pytest.raises(ConditionFailed):
        store.claim(job.job_id, NOW, timedelta(seconds=120), 3)


def test_claim_succeeds_exactly_when_the_claim_rule_holds(store):
    """Job.claimable is the rule; each store's conditional write must agree with it."""
    import uuid

    leases = (None, NOW + timedelta(seconds=1), NOW, NOW - timedelta(seconds=1))
    disagree = []
    for status in JobStatus:
        for lease_expires_at in leases:
            for attempt in (2, 3):
                job = dataclasses.replace(new_job(str(uuid.uuid4())), status=status, attempt=attempt,
                                          lease_expires_at=lease_expires_at)
                store.create(job, QUOTA)
                try:
                    store.claim(job.job_id, NOW, timedelta(seconds=120), 3)
                    claimed = True
                except ConditionFailed:
                    claimed = False
                if claimed is not job.claimable(NOW, 3):
                    disagree.append((status.value, lease_expires_at, attempt, claimed))
    assert disagree == []


def test_a_stale_worker_cannot_overwrite_the_newer_attempts_result(store):
    job = new_job()
    store.create(job, QUOTA)
    stale = store.claim(job.job_id, NOW, timedelta(seconds=10), 3)  # attempt 1, then its lease runs out
    fresh = store.claim(job.job_id, NOW + timedelta(seconds=11), timedelta(seconds=10), 3)  # attempt 2
    done = fresh.ready(NOW + timedelta(seconds=12), TINY, WEEK)
    store.finish_attempt(done, attempt=fresh.attempt)
    with pytest.raises(ConditionFailed):
        store.finish_attempt(stale.failed(NOW + timedelta(seconds=13), ErrorCode.INVALID_IMAGE, WEEK),
                             attempt=stale.attempt)
    assert store.get(job.job_id) == done


def test_a_stale_worker_cannot_finish_while_a_newer_attempt_still_works(store):
    job = new_job()
    store.create(job, QUOTA)
    stale = store.claim(job.job_id, NOW, timedelta(seconds=10), 3)
    store.claim(job.job_id, NOW + timedelta(seconds=11), timedelta(seconds=10), 3)
    with pytest.raises(ConditionFailed):
        store.finish_attempt(stale.ready(NOW, TINY, WEEK),
                             attempt=stale.attempt)
    assert store.get(job.job_id).status is JobStatus.PROCESSING


def test_release_lets_the_next_claim_in_at_once(store):
    job = new_job()
    store.create(job, QUOTA)
    held = store.claim(job.job_id, NOW, timedelta(seconds=120), 3)
    store.release_lease(job.job_id, held.attempt, NOW + timedelta(seconds=1))
    released = store.get(job.job_id)
    assert (released.lease_expires_at, released.sweep_at) == (NOW + timedelta(seconds=1),) * 2
    assert store.claim(job.job_id, NOW + timedelta(seconds=1), timedelta(seconds=120), 3).attempt == 2
    with pytest.raises(ConditionFailed):
        store.release_lease(job.job_id, held.attempt, NOW + timedelta(seconds=2))  # no longer its attempt


def test_finish_attempt_loses_to_a_cancel(store):
    job = new_job()
    store.create(job, QUOTA)
    held = store.claim(job.job_id, NOW, timedelta(seconds=120), 3)
    store.move(held.cancelled(NOW, WEEK), JobStatus.PROCESSING)
    with pytest.raises(ConditionFailed):
        store.finish_attempt(held.ready(NOW, TINY, WEEK),
                             attempt=held.attempt)
    with pytest.raises(ConditionFailed):
        store.release_lease(job.job_id, held.attempt, NOW)
    assert store.get(job.job_id).status is JobStatus.CANCELLED


def test_operations_on_a_missing_job_lose(store):
    job = new_job()
    with pytest.raises(ConditionFailed):
        store.move(job.cancelled(NOW, WEEK), JobStatus.QUEUED)
    with pytest.raises(ConditionFailed):
        store.update_if_unchanged(job.resent(NOW, WEEK), seen=job)
    with pytest.raises(ConditionFailed):
        store.release_lease(job.job_id, 1, NOW)
    assert store.get(job.job_id) is None


def test_two_workers_racing_for_one_job_give_exactly_one_claim(store):
    job = new_job()
    store.create(job, QUOTA)
    barrier = threading.Barrier(8)
    wins, losses = [], []

    def worker():
        barrier.wait()
        try:
            wins.append(store.claim(job.job_id, NOW, timedelta(seconds=120), 3))
        except ConditionFailed:
            losses.append(1)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(losses) == 7
    assert store.get(job.job_id).attempt == 1


def test_move_names_the_status_it_leaves(store):
    job = new_job()
    store.create(job, QUOTA)
    with pytest.raises(ConditionFailed):
        store.move(job.cancelled(NOW, WEEK), JobStatus.PROCESSING)
    store.move(job.cancelled(NOW, WEEK), JobStatus.QUEUED)
    assert store.get(job.job_id).status is JobStatus.CANCELLED


def test_a_move_loses_to_a_re_claim_made_since_it_read(store):
    """Issue 32 item 13: a cancel that read attempt 1 must not land on attempt 2's claim,
    writing the older attempt back (the job's sequence would fall)."""
    job = new_job()
    store.create(job, QUOTA)
    seen = store.claim(job.job_id, NOW, timedelta(seconds=120), 3)
    later = NOW + timedelta(seconds=121)
    store.claim(job.job_id, later, timedelta(seconds=120), 3)
    with pytest.raises(ConditionFailed):
        store.move(seen.cancelled(later, WEEK), JobStatus.PROCESSING)
    assert store.get(job.job_id).attempt == 2 and store.get(job.job_id).status is JobStatus.PROCESSING


def test_delete_many_removes_each_job_and_ignores_missing_ones(store):
    import uuid

    jobs = [new_job(str(uuid.uuid4())) for _ in range(30)]  # more than one BatchWriteItem
    for job in jobs:
        store.create(job, QUOTA)
    kept = new_job()
    store.create(kept, QUOTA)
    store.delete_many([j.job_id for j in jobs] + ["00000000-0000-4000-8000-000000000000"])
    assert all(store.get(j.job_id) is None for j in jobs)
    assert store.get(kept.job_id) == kept


def test_delete_is_idempotent(store):
    job = new_job()
    store.create(job, QUOTA)
    store.delete(job.job_id)
    store.delete(job.job_id)
    assert store.get(job.job_id) is None


def record(job_id, scope="scope-1", fingerprint="fp", expires=NOW + timedelta(hours=24)):
    from chalicelib.domain.idempotency import IdempotencyRecord

    return IdempotencyRecord(scope=scope, fingerprint=fingerprint, job_id=job_id, expires_at=expires)


def test_job_and_key_record_are_written_together(store):
    from chalicelib.domain.errors import IdempotencyKeyTaken

    first = new_job()
    store.create_with_key(first, record(first.job_id), NOW, QUOTA)
    assert store.get_idempotency("scope-1") == record(first.job_id)
    second = new_job("6b4f3d2e-1c0a-4f9e-b8d7-c6b5a4f3e2d1")
    with pytest.raises(IdempotencyKeyTaken):
        store.create_with_key(second, record(second.job_id), NOW, QUOTA)
    assert store.get(second.job_id) is None  # the losing job was not written either


def test_an_expired_key_record_is_taken_over(store):
    first = new_job()
    store.create_with_key(first, record(first.job_id, expires=NOW + timedelta(seconds=10)), NOW, QUOTA)
    second = new_job("6b4f3d2e-1c0a-4f9e-b8d7-c6b5a4f3e2d1")
    store.create_with_key(second, record(second.job_id), NOW + timedelta(seconds=10), QUOTA)
    assert store.get_idempotency("scope-1").job_id == second.job_id


def test_release_only_frees_the_key_of_its_own_job(store):
    first = new_job()
    store.create_with_key(first, record(first.job_id), NOW, QUOTA)
    store.release_idempotency("scope-1", "someone-else")
    assert store.get_idempotency("scope-1") is not None
    store.release_idempotency("scope-1", first.job_id)
    store.release_idempotency("scope-1", first.job_id)
    assert store.get_idempotency("scope-1") is None


def test_twenty_concurrent_creates_with_one_key_make_one_job(store):
    import uuid

    from chalicelib.domain.errors import IdempotencyKeyTaken

    barrier = threading.Barrier(20)
    made, taken = [], []

    def attempt():
        job = new_job(str(uuid.uuid4()))
        barrier.wait()
        try:
            store.create_with_key(job, record(job.job_id), NOW, QUOTA)
            made.append(job.job_id)
        except IdempotencyKeyTaken:
            taken.append(job.job_id)

    threads = [threading.Thread(target=attempt) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and len(taken) == 19
    assert store.get_idempotency("scope-1").job_id == made[0]
    assert all(store.get(j) is None for j in taken)


def test_due_lists_jobs_whose_sweep_time_has_come(store):
    job = dataclasses.replace(new_job(), sweep_at=NOW + timedelta(minutes=10))
    store.create(job, QUOTA)
    shard = due_shard(job.job_id)
    assert store.due(JobStatus.QUEUED, NOW, 10, shard=shard) == []
    assert store.due(JobStatus.QUEUED, NOW + timedelta(minutes=10), 10, shard=shard) == [job]
    assert store.due(JobStatus.PROCESSING, NOW + timedelta(minutes=10), 10, shard=shard) == []
    claimed = store.claim(job.job_id, NOW, timedelta(seconds=120), 3)
    assert store.due(JobStatus.PROCESSING, NOW + timedelta(seconds=120), 10, shard=shard) == [claimed]


FAR = NOW + timedelta(days=30)  # every job written here is due by then


def indexed_as(store, job_id) -> list[JobStatus]:
    """The statuses under which the due index finds the job, in its own shard."""
    return [status for status in JobStatus
            if job_id in {j.job_id for j in store.due(status, FAR, 100, shard=due_shard(job_id))}]


def test_every_write_that_sets_the_status_moves_the_job_to_that_statuss_shard(store):
    job = dataclasses.replace(new_job(), sweep_at=NOW)
    store.create(job, QUOTA)
    assert indexed_as(store, job.job_id) == [JobStatus.QUEUED]
    claimed = store.claim(job.job_id, NOW, timedelta(seconds=120), 3)  # an UpdateItem
    assert indexed_as(store, job.job_id) == [JobStatus.PROCESSING]
    store.release_lease(job.job_id, claimed.attempt, NOW + timedelta(seconds=1))
    assert indexed_as(store, job.job_id) == [JobStatus.PROCESSING]
    claimed = store.claim(job.job_id, NOW + timedelta(seconds=2), timedelta(seconds=120), 3)
    ready = claimed.ready(NOW + timedelta(seconds=3), {RenditionName.DISPLAY: Rendition("r/d.jpg", 1280, 960),
                           RenditionName.THUMB: Rendition("r/t.jpg", 256, 256)}, WEEK)
    store.finish_attempt(ready, claimed.attempt)
    assert indexed_as(store, job.job_id) == [JobStatus.READY]

    keyed = dataclasses.replace(new_job("6b4f3d2e-1c0a-4f9e-b8d7-c6b5a4f3e2d1"), sweep_at=NOW,
                                status=JobStatus.AWAITING_UPLOAD)
    store.create_with_key(keyed, record(keyed.job_id), NOW, QUOTA)
    assert indexed_as(store, keyed.job_id) == [JobStatus.AWAITING_UPLOAD]
    queued = keyed.queued(NOW, timedelta(minutes=10))
    store.move(queued, JobStatus.AWAITING_UPLOAD)
    assert indexed_as(store, keyed.job_id) == [JobStatus.QUEUED]
    resent = queued.resent(NOW + timedelta(minutes=1), timedelta(minutes=10))
    store.update_if_unchanged(resent, seen=queued)
    assert indexed_as(store, keyed.job_id) == [JobStatus.QUEUED]
    store.update_if_unchanged(resent.failed(NOW + timedelta(minutes=2), ErrorCode.PROCESSING_FAILED, WEEK),
                              seen=resent)
    assert indexed_as(store, keyed.job_id) == [JobStatus.FAILED]
    store.delete(keyed.job_id)
    assert indexed_as(store, keyed.job_id) == []


def test_due_finds_jobs_across_every_shard_each_in_its_own_only(store):
    import uuid

    jobs = [dataclasses.replace(new_job(str(uuid.uuid4())), sweep_at=NOW) for _ in range(40)]
    for job in jobs:
        store.create(job, QUOTA)
    found = {shard: {j.job_id for j in store.due(JobStatus.QUEUED, NOW, 100, shard=shard)}
             for shard in range(DUE_SHARDS)}
    assert {job_id: shard for shard, ids in found.items() for job_id in ids} == {
        j.job_id: due_shard(j.job_id) for j in jobs}
    assert len({due_shard(j.job_id) for j in jobs}) > 20  # they did spread


def test_the_table_item_carries_its_sweep_key(stack):
    settings, _, clients = stack
    store = DynamoJobStore(DynamoTable(settings.table, settings.region, settings.endpoint_url))
    job = dataclasses.replace(new_job(), sweep_at=NOW)

    def stored_key():
        item = clients["dynamodb"].get_item(TableName=settings.table, Key={"pk": {"S": f"job#{job.job_id}"}},
                                            ConsistentRead=True)["Item"]
        return item["sweep_key"]["S"], item["status"]["S"]

    store.create(job, QUOTA)
    assert stored_key() == (sweep_key(JobStatus.QUEUED, job.job_id), "queued")
    assert stored_key()[0] == f"queued#{due_shard(job.job_id):02d}"
    store.claim(job.job_id, NOW, timedelta(seconds=120), 3)
    assert stored_key() == (sweep_key(JobStatus.PROCESSING, job.job_id), "processing")


def test_a_write_naming_an_old_updated_at_loses(store):
    job = new_job()
    store.create(job, QUOTA)
    resent = job.resent(NOW + timedelta(minutes=1), timedelta(minutes=10))
    store.update_if_unchanged(resent, seen=job)
    with pytest.raises(ConditionFailed):  # a second sweeper that read the job before
        store.update_if_unchanged(job.resent(NOW + timedelta(minutes=1), timedelta(minutes=10)), seen=job)
    assert store.get(job.job_id).resends == 1


def test_a_sweeper_write_loses_to_a_claim_made_since_it_read(store):
    job = new_job()
    store.create(job, QUOTA)
    store.claim(job.job_id, NOW + timedelta(seconds=1), timedelta(seconds=120), 3)
    with pytest.raises(ConditionFailed):
        store.update_if_unchanged(job.failed(NOW, ErrorCode.PROCESSING_FAILED, WEEK), seen=job)
    assert store.get(job.job_id).status is JobStatus.PROCESSING


def test_create_takes_a_quota_place_and_refuses_past_the_quota(store):
    import uuid

    from chalicelib.domain.errors import QuotaFull

    made = [new_job(str(uuid.uuid4())) for _ in range(3)]
    for job in made:
        store.create(job, 3)
    assert store.active_jobs("alice") == {j.job_id for j in made}
    extra = new_job(str(uuid.uuid4()))
    with pytest.raises(QuotaFull):
        store.create(extra, 3)
    with pytest.raises(QuotaFull):
        store.create_with_key(extra, record(extra.job_id), NOW, 3)
    assert store.get(extra.job_id) is None and store.get_idempotency("scope-1") is None
    other = dataclasses.replace(new_job(str(uuid.uuid4())), owner="bob")
    store.create(other, 3)  # another owner's quota is its own
    store.release_place("alice", made[0].job_id)
    store.release_place("alice", made[0].job_id)  # idempotent
    store.release_place("nobody", made[0].job_id)  # no places at all: fine
    store.create(extra, 3)
    assert store.active_jobs("alice") == {made[1].job_id, made[2].job_id, extra.job_id}


def test_racing_creates_never_exceed_the_quota(store):
    import uuid

    from chalicelib.domain.errors import QuotaFull

    barrier = threading.Barrier(10)
    made, refused = [], []

    def attempt():
        job = new_job(str(uuid.uuid4()))
        barrier.wait()
        try:
            store.create(job, 4)
            made.append(job.job_id)
        except QuotaFull:
            refused.append(job.job_id)

    threads = [threading.Thread(target=attempt) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 4 and len(refused) == 6
    assert store.active_jobs("alice") == set(made)


def test_objects_of_reads_what_each_job_says_of_its_objects_and_skips_unknown_ids(store):
    import uuid

    from chalicelib.domain.jobs import JobObjects

    queued, ready = new_job(), new_job("6b4f3d2e-1c0a-4f9e-b8d7-c6b5a4f3e2d1")
    store.create(queued, QUOTA)
    store.create(ready, QUOTA)
    claimed = store.claim(ready.job_id, NOW, timedelta(seconds=120), 3)
    ready = claimed.ready(NOW + timedelta(seconds=5), {RenditionName.DISPLAY: Rendition("r/d.jpg", 1280, 960),
                           RenditionName.THUMB: Rendition("r/t.jpg", 256, 256)}, WEEK)
    store.finish_attempt(ready, attempt=1)
    # More ids than one BatchGetItem takes (100): the store asks in several calls.
    unknown = [str(uuid.uuid4()) for _ in range(150)]
    found = store.objects_of([queued.job_id, *unknown, ready.job_id])
    assert found == {queued.job_id: JobObjects(queued.job_id, JobStatus.QUEUED, 0, queued.original_key, frozenset()),
                     ready.job_id: JobObjects(ready.job_id, JobStatus.READY, 1, ready.original_key,
                                              frozenset({"r/d.jpg", "r/t.jpg"}))}
    assert found[ready.job_id] == JobObjects.of(store.get(ready.job_id))
    assert store.objects_of([]) == {}


def test_a_scan_point_is_empty_until_saved_then_reads_back(store):
    from chalicelib.domain.storage import ScanPoint

    assert store.scan_points(["originals/0", "renditions/f"]) == {
        "originals/0": ScanPoint(), "renditions/f": ScanPoint()}
    store.save_scan_point("originals/0", ScanPoint(after="originals/0abc", pass_started=NOW))
    store.save_scan_point("renditions/f", ScanPoint(after=None, pass_started=NOW + WEEK))
    assert store.scan_points(["originals/0", "renditions/f", "originals/1"]) == {
        "originals/0": ScanPoint(after="originals/0abc", pass_started=NOW),
        "renditions/f": ScanPoint(after=None, pass_started=NOW + WEEK),
        "originals/1": ScanPoint()}
    store.save_scan_point("originals/0", ScanPoint(after=None, pass_started=NOW))  # the pass ended
    assert store.scan_points(["originals/0"]) == {"originals/0": ScanPoint(after=None, pass_started=NOW)}


# -- the owner index (GET /image-jobs) -------------------------------------------------------
def _owned_jobs(owner, count, start=NOW, step=timedelta(microseconds=1500)):
    import uuid
    return [dataclasses.replace(new_job(str(uuid.uuid4())), owner=owner, created_at=start + i * step)
            for i in range(count)]


def test_metadata_round_trips_in_its_order_and_old_items_have_none(store):
    job = dataclasses.replace(new_job(), metadata={"post": "p-1", "a": "ünï ☃", "z": ""})
    store.create(job, QUOTA)
    got = store.get(job.job_id)
    assert got == job and list(got.metadata) == ["post", "a", "z"]
    plain = new_job("6b4f3d2e-1c0a-4f9e-b8d7-c6b5a4f3e2d1")
    store.create(plain, QUOTA)
    assert store.get(plain.job_id).metadata == {}


def test_source_round_trips_through_create_move_and_finish_and_old_items_have_none(store):
    from chalicelib.domain.source import ColorSpace, Source

    facts = Source(width=3024, height=4032, format="heic", bytes=2_345_678,
                   captured_at="2024-05-01T12:34:56+02:00", color_space=ColorSpace.DISPLAY_P3, has_alpha=False)
    job = dataclasses.replace(new_job(), source=facts)
    store.create(job, QUOTA)
    assert store.get(job.job_id) == job
    local = dataclasses.replace(facts, captured_at=None, color_space=ColorSpace.OTHER, has_alpha=True)
    plain = new_job("6b4f3d2e-1c0a-4f9e-b8d7-c6b5a4f3e2d1")
    store.create(plain, QUOTA)
    assert store.get(plain.job_id).source is None
    failed = dataclasses.replace(plain.failed(NOW, ErrorCode.INVALID_IMAGE, timedelta(days=1)), source=local)
    store.move(failed, JobStatus.QUEUED)
    assert store.get(plain.job_id).source == local


def test_a_claim_stores_the_facts_it_is_given_and_keeps_those_it_is_not(store):
    """A job the multipart completion queued has no facts until the worker reads its bytes:
    the claim stores them, so GET shows them while the job is processed and after a retry."""
    from chalicelib.domain.source import ColorSpace, Source

    facts = Source(width=4032, height=3024, format="jpeg", bytes=3_456_789,
                   captured_at=None, color_space=ColorSpace.SRGB, has_alpha=False)
    job = new_job()
    store.create(job, QUOTA)
    claimed = store.claim(job.job_id, NOW, timedelta(minutes=5), 3, facts)
    assert claimed.source == facts and store.get(job.job_id).source == facts
    store.release_lease(job.job_id, claimed.attempt, NOW)
    again = store.claim(job.job_id, NOW, timedelta(minutes=5), 3)
    assert again.source == facts and store.get(job.job_id).source == facts


def test_the_content_index_is_per_owner_and_a_later_note_replaces_an_earlier(store):
    content = "ab" * 32
    assert store.same_content("alice", content) is None
    store.note_content("alice", content, "job-1", NOW + timedelta(days=1))
    assert store.same_content("alice", content) == "job-1"
    assert store.same_content("bob", content) is None  # never another owner's
    assert store.same_content("alice", "cd" * 32) is None
    store.note_content("alice", content, "job-2", NOW + timedelta(days=2))
    assert store.same_content("alice", content) == "job-2"


def test_duplicate_of_round_trips_and_old_items_have_none(store):
    job = dataclasses.replace(new_job(), duplicate_of="4b0e1c52-8f0a-4d7e-9a3c-2f6b1d9e8a70", phash="bb8320376c0f3637")
    store.create(job, QUOTA)
    assert store.get(job.job_id) == job
    plain = new_job("6b4f3d2e-1c0a-4f9e-b8d7-c6b5a4f3e2d1")
    store.create(plain, QUOTA)
    assert (store.get(plain.job_id).duplicate_of, store.get(plain.job_id).phash) == (None, None)


def test_the_focus_round_trips_through_a_claim_and_old_items_have_none(store):
    from chalicelib.domain.focus import Focus, FocusSource

    job = dataclasses.replace(new_job(), focus=Focus(0.31, 0.0001, FocusSource.CLIENT))
    store.create(job, QUOTA)
    assert store.get(job.job_id) == job
    claimed = store.claim(job.job_id, NOW, timedelta(seconds=60), 3)
    assert claimed.focus == job.focus  # a claim leaves the client's focus for the worker
    found = dataclasses.replace(claimed, focus=Focus(1.0, 0.5, FocusSource.SALIENCY))
    store.finish_attempt(found, claimed.attempt)
    assert store.get(job.job_id).focus == Focus(1.0, 0.5, FocusSource.SALIENCY)
    plain = new_job("6b4f3d2e-1c0a-4f9e-b8d7-c6b5a4f3e2d1")
    store.create(plain, QUOTA)
    assert store.get(plain.job_id).focus is None


def test_owned_pages_newest_first_never_another_owners_and_within_bounds(store):
    alice = _owned_jobs("alice", 7)
    bob = _owned_jobs("bob", 3)
    for job in alice + bob:
        store.create(job, QUOTA)
    first = store.owned("alice", 3)
    assert [j.job_id for j in first.jobs] == [j.job_id for j in alice[::-1][:3]] and first.more
    second = store.owned("alice", 3, first.last)
    third = store.owned("alice", 3, second.last)
    seen = [j.job_id for page in (first, second, third) for j in page.jobs]
    assert seen == [j.job_id for j in alice[::-1]]
    assert second.more and not third.more and len(third.jobs) == 1
    # Exactly at the end: no more, so no empty last page.
    assert not store.owned("alice", 7).more
    within = store.owned("alice", 10, created_after=alice[2].created_at, created_before=alice[4].created_at)
    assert [j.job_id for j in within.jobs] == [alice[4].job_id, alice[3].job_id, alice[2].job_id]
    assert store.owned("carol", 5).jobs == [] and not store.owned("carol", 5).more
