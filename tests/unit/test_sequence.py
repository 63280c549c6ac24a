"""A job's sequence (and attempt) never fall, whatever races a write (issue 32 item 13): push
clients drop a message older than one they hold, so a fall hides the job's last state."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from chalicelib.config import Settings
from chalicelib.domain.jobs import JobStatus
from chalicelib.usecases import UseCases
from tests.crash.harness import RecordingJobStore
from tests.fakes import Clock, FakeObjectStore, fake_context
from tests.images import jpeg

START = datetime(2026, 7, 15, 10, 0, 30, 449514, tzinfo=timezone.utc)


def test_a_cancel_racing_a_re_claim_never_moves_the_sequence_back():
    clock = Clock(START)
    jobs = RecordingJobStore()
    use_cases = UseCases(fake_context(settings=Settings(bucket="images", decode_cpu_seconds=0), jobs=jobs,
                                      objects=FakeObjectStore(clock), clock=clock))
    ctx = use_cases.ctx
    job_id = use_cases.uploads.accept_upload("alice", jpeg(64, 48)).job.job_id
    jobs.claim(job_id, clock(), ctx.lease, ctx.settings.max_attempts)
    clock.advance(ctx.lease.total_seconds() + 1.5)  # the first worker died: its lease is over
    raced = []
    read = jobs.get

    def a_worker_re_claims_after_the_cancel_read(wanted):
        seen = read(wanted)
        if not raced:
            raced.append(seen)
            jobs.claim(job_id, clock(), ctx.lease, ctx.settings.max_attempts)
        return seen

    jobs.get = a_worker_re_claims_after_the_cancel_read
    cancelled = use_cases.manage.cancel("alice", job_id)
    assert raced and raced[0].attempt == 1
    assert (cancelled.status, cancelled.attempt) == (JobStatus.CANCELLED, 2)
    steps = [(attempt, sequence) for i, attempt, sequence in jobs.steps if i == job_id]
    assert steps == sorted(steps), steps
    assert read(job_id).sequence == 2 * 4 + 3
