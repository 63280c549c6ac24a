"""Per-owner fairness on in-memory stores: a quota of unfinished jobs and a request rate."""
import dataclasses
from datetime import datetime, timezone

import pytest

from chalicelib.config import Settings
from chalicelib.domain.errors import RateLimited
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.jobs import JobStatus
from chalicelib.usecases import UseCases
from chalicelib.usecases.admission import Admission
from chalicelib.usecases.context import Context
from tests.fakes import Clock, FakeJobStore, FakeObjectStore
from tests.images import jpeg

START = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)


@pytest.fixture
def use_cases():
    settings = Settings(bucket="images", max_active_jobs=3, decode_cpu_seconds=0)
    clock = Clock(START)
    return UseCases(Context(settings=settings, jobs=FakeJobStore(), objects=FakeObjectStore(clock), clock=clock))


def upload(use_cases, owner="alice", key=None):
    return use_cases.uploads.accept_upload(owner, jpeg(), key).job


def test_an_owner_past_its_quota_gets_rate_limited_and_others_do_not(use_cases):
    jobs = [upload(use_cases) for _ in range(3)]
    with pytest.raises(RateLimited) as caught:
        upload(use_cases)
    assert caught.value.retry_after >= 5
    with pytest.raises(RateLimited):
        use_cases.uploads.create_direct_upload("alice", "image/jpeg", 1000)
    assert len(use_cases.ctx.jobs.items) == 3  # nothing was stored for the refused ones
    upload(use_cases, owner="bob")
    # A finished job gives its slot back at once.
    use_cases.worker.handle_object_created(ObjectCreated("images", jobs[0].original_key, 0))
    assert use_cases.ctx.jobs.items[jobs[0].job_id].status is JobStatus.READY
    upload(use_cases)


def test_cancel_and_delete_give_the_slot_back(use_cases):
    jobs = [upload(use_cases) for _ in range(3)]
    use_cases.manage.cancel("alice", jobs[0].job_id)
    upload(use_cases)
    use_cases.manage.delete("alice", jobs[1].job_id)
    upload(use_cases)
    assert len(use_cases.ctx.jobs.active_jobs("alice")) == 3


def test_a_slot_whose_release_was_lost_is_reconciled_when_the_quota_is_full(use_cases):
    jobs = [upload(use_cases) for _ in range(3)]
    # A worker finished a job and died before giving the slot back.
    done = use_cases.ctx.jobs.items[jobs[0].job_id]
    use_cases.ctx.jobs.items[done.job_id] = dataclasses.replace(done, status=JobStatus.FAILED)
    # A record deleted behind our back (TTL) leaves a slot too.
    del use_cases.ctx.jobs.items[jobs[1].job_id]
    upload(use_cases)
    assert jobs[0].job_id not in use_cases.ctx.jobs.active_jobs("alice")
    upload(use_cases)
    with pytest.raises(RateLimited):
        upload(use_cases)


def test_a_replay_of_an_accepted_upload_needs_no_slot(use_cases):
    first = upload(use_cases, key="k")
    for _ in range(2):
        upload(use_cases)
    assert use_cases.uploads.accept_upload("alice", jpeg(), "k").job.job_id == first.job_id


def test_the_request_rate_is_a_token_bucket_per_owner():
    now = [0.0]
    settings = Settings(owner_requests_per_second=2, owner_burst=4)
    capacity = Admission(Context(settings=settings, jobs=FakeJobStore(), objects=FakeObjectStore()),
                        monotonic=lambda: now[0])
    for _ in range(4):
        capacity.check_rate("alice")
    with pytest.raises(RateLimited) as caught:
        capacity.check_rate("alice")
    assert caught.value.retry_after == 1
    capacity.check_rate("bob")  # its own bucket
    now[0] += 0.5  # one token back
    capacity.check_rate("alice")
    with pytest.raises(RateLimited):
        capacity.check_rate("alice")
