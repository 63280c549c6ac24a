"""Renditions are fenced per attempt (renditions/<job>/<attempt>/...): a stale attempt can only
write or delete its own, and every attempt's leftovers are cleaned up."""
import threading
from datetime import datetime, timezone

import pytest

from chalicelib.config import Settings
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.jobs import JobStatus
from chalicelib.usecases import UseCases
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, fake_context
from tests.images import jpeg

START = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)


class Interleave(FakeObjectStore):
    """Runs `hook` once, just before the next rendition write."""

    def __init__(self, clock):
        super().__init__(clock)
        self.hook = None

    def put(self, key, data, content_type, cache_control=None):
        if self.hook is not None and key.startswith("renditions/"):
            hook, self.hook = self.hook, None
            hook()
        super().put(key, data, content_type, cache_control)


@pytest.fixture
def use_cases():
    clock = Clock(START)
    return UseCases(fake_context(settings=Settings(bucket="images"), jobs=FakeJobStore(),
                                 objects=Interleave(clock), clock=clock))


def event(job):
    return ObjectCreated("images", job.original_key, 0)


def renditions(use_cases, job_id):
    return sorted(k for k in use_cases.ctx.objects.objects if k.startswith(f"renditions/{job_id}/"))


class Pause:
    """Stops a thread at a call until the test lets it go on."""

    def __init__(self):
        self.reached, self.go = threading.Event(), threading.Event()

    def __call__(self):
        self.reached.set()
        assert self.go.wait(10)


def test_a_stale_attempt_that_loses_never_deletes_the_live_attempts_renditions(use_cases):
    """The issue's interleaving: attempt 2 has written its renditions and is about to finish
    when the stale attempt 1 writes, loses its finish, and cleans up after itself."""
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    one_writes, two_finishes = Pause(), Pause()
    jobs = use_cases.ctx.jobs
    finish = jobs.finish_attempt

    def finish_attempt(done, attempt):
        if attempt == 2:
            two_finishes()
        return finish(done, attempt)

    jobs.finish_attempt = finish_attempt
    use_cases.ctx.objects.hook = one_writes
    outcomes = {}
    first = threading.Thread(target=lambda: outcomes.setdefault(1, use_cases.worker.handle_object_created(event(job))))
    first.start()
    assert one_writes.reached.wait(10)  # attempt 1 has the bytes, and outlives its lease
    use_cases.ctx.clock.advance(use_cases.ctx.settings.lease_seconds)
    second = threading.Thread(target=lambda: outcomes.setdefault(2, use_cases.worker.handle_object_created(event(job))))
    second.start()
    assert two_finishes.reached.wait(10)  # attempt 2 wrote its renditions
    one_writes.go.set()
    first.join(10)
    assert outcomes[1] == "lost"
    two_finishes.go.set()
    second.join(10)
    assert outcomes[2] == "ready"
    done = use_cases.ctx.jobs.items[job.job_id]
    assert done.status is JobStatus.READY and done.attempt == 2
    # Ready points at objects that exist, and nothing else of this job is left.
    assert renditions(use_cases, job.job_id) == sorted(r.key for r in done.renditions.values())


def test_the_finishing_attempt_removes_what_earlier_attempts_left(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    leftover = use_cases.ctx.object_keys.rendition(job.job_id, 1, "display")
    use_cases.ctx.jobs.claim(job.job_id, use_cases.ctx.clock(), use_cases.ctx.lease, 3)
    use_cases.ctx.objects.put(leftover, b"half", "image/jpeg")  # attempt 1 died after one write
    use_cases.ctx.clock.advance(use_cases.ctx.settings.lease_seconds)
    assert use_cases.worker.handle_object_created(event(job)) == "ready"
    done = use_cases.ctx.jobs.items[job.job_id]
    assert renditions(use_cases, job.job_id) == sorted(r.key for r in done.renditions.values())


def test_delete_removes_every_attempts_renditions(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    for attempt in (1, 2, 3):  # three workers claimed it and each died after a put
        use_cases.ctx.clock.advance(use_cases.ctx.lease.total_seconds() + 1)
        claimed = use_cases.ctx.jobs.claim(job.job_id, use_cases.ctx.clock(), use_cases.ctx.lease, 3)
        assert claimed.attempt == attempt
        use_cases.ctx.objects.put(use_cases.ctx.object_keys.rendition(job.job_id, attempt, "thumb"), b"x", "image/jpeg")
    use_cases.manage.delete("alice", job.job_id)
    assert use_cases.ctx.objects.objects == {}


def test_cancel_removes_every_attempts_renditions(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    use_cases.ctx.jobs.claim(job.job_id, use_cases.ctx.clock(), use_cases.ctx.lease, 3)
    use_cases.ctx.objects.put(use_cases.ctx.object_keys.rendition(job.job_id, 1, "display"), b"x", "image/jpeg")
    use_cases.manage.cancel("alice", job.job_id)
    assert renditions(use_cases, job.job_id) == []


def test_the_orphan_scan_removes_a_dead_attempts_renditions_but_keeps_the_result(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    assert use_cases.worker.handle_object_created(event(job)) == "ready"
    done = use_cases.ctx.jobs.items[job.job_id]
    # A stale attempt 7 wrote after the result and died before cleaning up.
    stray = use_cases.ctx.object_keys.rendition(job.job_id, 7, "display")
    use_cases.ctx.objects.put(stray, b"x", "image/jpeg")
    use_cases.ctx.clock.advance(use_cases.ctx.settings.orphan_grace_seconds + 1)
    assert use_cases.orphan_scan.run() == {"orphans_deleted": 1}
    assert renditions(use_cases, job.job_id) == sorted(r.key for r in done.renditions.values())
    assert job.original_key in use_cases.ctx.objects.objects


def test_the_orphan_scan_keeps_the_live_attempts_renditions(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    claimed = use_cases.ctx.jobs.claim(job.job_id, use_cases.ctx.clock(), use_cases.ctx.lease, 3)
    live = use_cases.ctx.object_keys.rendition(job.job_id, claimed.attempt, "display")
    dead = use_cases.ctx.object_keys.rendition(job.job_id, claimed.attempt - 1 or 9, "display")
    use_cases.ctx.objects.put(live, b"x", "image/jpeg")
    use_cases.ctx.objects.put(dead, b"x", "image/jpeg")
    use_cases.ctx.clock.advance(use_cases.ctx.settings.orphan_grace_seconds + 1)
    use_cases.orphan_scan.run()
    assert renditions(use_cases, job.job_id) == [live]


def test_rendition_keys_name_their_attempt(use_cases):
    keys = use_cases.ctx.object_keys
    key = keys.rendition("5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0", 2, "thumb")
    assert key == "renditions/5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0/2/thumb.jpg"
    assert keys.attempt_of(key) == 2 and keys.job_id_of(key) == "5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0"
    assert keys.attempt_of("renditions/5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0/display.jpg") is None
    assert keys.attempt_of("originals/5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0") is None


def test_a_finish_that_landed_but_was_retried_keeps_its_renditions(use_cases):
    """The SDK resent the finishing write after a lost answer; the retry failed on the write
    itself. The job is ready with this attempt's renditions: nothing may be deleted."""
    from chalicelib.domain.errors import ConditionFailed

    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    finish = use_cases.ctx.jobs.finish_attempt

    def landed_then_condition_failed(done, attempt):
        finish(done, attempt)
        raise ConditionFailed()

    use_cases.ctx.jobs.finish_attempt = landed_then_condition_failed
    assert use_cases.worker.handle_object_created(event(job)) == "ready"
    done = use_cases.ctx.jobs.items[job.job_id]
    assert done.status is JobStatus.READY
    assert renditions(use_cases, job.job_id) == sorted(r.key for r in done.renditions.values())
