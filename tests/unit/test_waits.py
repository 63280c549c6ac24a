"""Prefer: wait as a use case (chalicelib/usecases/waits.py) and its headers
(chalicelib/http/prefer.py), over the in-memory stores with a clock that sleeping advances."""
from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone

import pytest

from chalicelib.config import Settings
from chalicelib.domain.errors import JobNotFound
from chalicelib.domain.jobs import Job, JobStatus
from chalicelib.http import prefer
from chalicelib.runtime import deadline
from chalicelib.runtime.metrics import Metric
from chalicelib.usecases import UseCases
from chalicelib.usecases.waits import Waits, step_after
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, FakeWaitSlots, ListMetrics, fake_context

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)


class Timeline:
    """monotonic() and sleep() of one thread: sleeping moves time on, and runs what was
    scheduled for that moment (a worker's write, say)."""

    def __init__(self):
        self.now = 0.0
        self.at: list[tuple[float, callable]] = []
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        for when, action in [a for a in self.at if a[0] <= self.now]:
            self.at.remove((when, action))
            action()


def world(settings=None):
    metrics = ListMetrics()
    ctx = fake_context(settings=settings or Settings(), jobs=FakeJobStore(), objects=FakeObjectStore(),
                       clock=Clock(NOW), metrics=metrics, wait_slots=FakeWaitSlots())
    time = Timeline()
    use_cases = UseCases(ctx)
    waits = Waits(ctx, use_cases.admission, sleep=time.sleep, monotonic=time.monotonic)
    return ctx, waits, time, metrics


def queued_job(ctx, owner="alice") -> Job:
    job = Job(job_id="6f1c1d7e-9a55-4e1b-8f55-1b2f6cf0e111", owner=owner, status=JobStatus.QUEUED,
              created_at=NOW, updated_at=NOW, expires_at=NOW + timedelta(days=1), original_key="o")
    ctx.jobs.items[job.job_id] = job
    return job


def move(ctx, job_id, status, attempt=None):
    def action():
        job = ctx.jobs.items[job_id]
        ctx.jobs.items[job_id] = dataclasses.replace(job, status=status,
                                                     attempt=job.attempt if attempt is None else attempt)
    return action


def test_a_held_read_returns_on_the_status_change_not_at_the_deadline():
    ctx, waits, time, metrics = world()
    job = queued_job(ctx)
    time.at.append((0.3, move(ctx, job.job_id, JobStatus.PROCESSING, 1)))
    held = waits.hold_until_changed(job, 20)
    assert held.job.status is JobStatus.PROCESSING and held.applied == 20
    assert 0.3 <= time.now < 0.3 + step_after(JobStatus.QUEUED, 0.3) + 1e-9  # the next read after the change
    assert sum(v for n, d, v in metrics.points() if n == Metric.WAITS_HELD and not d) == 1
    assert ctx.wait_slots.held["alice"] == {}  # the slot is given back


def test_with_no_change_the_wait_ends_at_its_cap_with_the_same_status():
    ctx, waits, time, _ = world(Settings(max_wait_seconds=5))
    job = queued_job(ctx)
    held = waits.hold_until_changed(job, 60)
    assert held.job.status is JobStatus.QUEUED and held.applied == 5
    assert time.now == pytest.approx(5)


def test_reads_are_fast_at_first_then_back_off():
    ctx, waits, time, _ = world()
    job = queued_job(ctx)
    waits.hold_until_changed(job, 20)
    first_two_seconds = [s for s, t in zip(time.sleeps, _elapsed(time.sleeps)) if t < 2]
    assert max(first_two_seconds) <= 0.05
    assert time.sleeps[-2] == 1.0  # the slowest step, near the end of a long wait
    last_ten_seconds = [s for s, t in zip(time.sleeps, _elapsed(time.sleeps)) if t >= 10]
    assert len(last_ten_seconds) <= 12  # not one read per 40 ms throughout


def test_a_processing_job_is_read_fastest_so_its_result_is_known_soonest():
    ctx, waits, time, _ = world()
    job = queued_job(ctx)
    time.at.append((0.15, move(ctx, job.job_id, JobStatus.PROCESSING, 1)))
    time.at.append((0.41, move(ctx, job.job_id, JobStatus.READY)))
    held = waits.hold_until_finished(job, 10)
    assert held.job.status is JobStatus.READY and 0.41 <= time.now <= 0.41 + step_after(JobStatus.PROCESSING, 0.3)
    assert step_after(JobStatus.PROCESSING, 0.3) < step_after(JobStatus.QUEUED, 0.3)


def test_the_schedule_counts_from_when_the_job_took_its_status_not_from_the_wait():
    ctx, waits, time, _ = world()
    # Processing for 5 s already (its record says so): a slow job, read at the slower step.
    job = dataclasses.replace(queued_job(ctx), status=JobStatus.PROCESSING, attempt=1,
                              updated_at=NOW - timedelta(seconds=5))
    ctx.jobs.items[job.job_id] = job
    time.at.append((3.0, move(ctx, job.job_id, JobStatus.READY)))
    waits.hold_until_changed(job, 20)
    assert time.sleeps[0] == step_after(JobStatus.PROCESSING, 5.0) > step_after(JobStatus.PROCESSING, 0)
    # Queued for 3 s, then claimed (the claim writes the record): fast reads again.
    job = dataclasses.replace(job, status=JobStatus.QUEUED, attempt=0, updated_at=NOW - timedelta(seconds=3))
    ctx.jobs.items[job.job_id] = job
    started = time.now
    time.at.append((started + 1.0, claim(ctx, job.job_id)))
    time.at.append((started + 1.5, move(ctx, job.job_id, JobStatus.READY)))
    time.sleeps.clear()
    assert waits.hold_until_finished(job, 20).job.status is JobStatus.READY
    assert time.sleeps[0] == step_after(JobStatus.QUEUED, 3.0) > step_after(JobStatus.PROCESSING, 0)
    assert time.sleeps[-1] == step_after(JobStatus.PROCESSING, 0)
    assert time.now - started <= 1.5 + step_after(JobStatus.PROCESSING, 0)


def claim(ctx, job_id):
    def action():
        job = ctx.jobs.items[job_id]
        ctx.jobs.items[job_id] = dataclasses.replace(job, status=JobStatus.PROCESSING, attempt=1,
                                                     updated_at=ctx.clock())
    return action


def test_the_capacity_model_counts_the_reads_a_held_request_makes():
    from infra import capacity as cap

    ctx, waits, time, _ = world()
    job = queued_job(ctx)
    queued, processing = cap.NOTIFY_SECONDS, cap.mean_worker_seconds()
    time.at.append((queued, claim(ctx, job.job_id)))
    time.at.append((queued + processing, move(ctx, job.job_id, JobStatus.READY)))
    reads = []
    get = ctx.jobs.get
    ctx.jobs.get = lambda job_id: reads.append(job_id) or get(job_id)
    assert waits.hold_until_finished(job, 20).job.status is JobStatus.READY
    assert abs(len(reads) - cap.reads_per_held_image()) <= 2  # a step's rounding at each status


def _elapsed(sleeps):
    total, out = 0.0, []
    for s in sleeps:
        out.append(total)
        total += s
    return out


def test_if_none_match_names_the_version_to_wait_on():
    ctx, waits, time, _ = world()
    job = queued_job(ctx)
    # The client already saw `processing`: a queued job is news, answered at once.
    processing = dataclasses.replace(job, status=JobStatus.PROCESSING, attempt=1)
    held = waits.hold_until_changed(job, 20, frozenset({processing.version}))
    assert held.applied is None and time.now == 0
    # The client saw this very state: held until it changes, a re-claim included.
    ctx.jobs.items[job.job_id] = processing
    time.at.append((1.0, move(ctx, job.job_id, JobStatus.PROCESSING, 2)))
    held = waits.hold_until_changed(processing, 20, frozenset({processing.version}))
    assert held.job.attempt == 2 and held.job.version != processing.version and time.now < 1.1


def test_a_post_is_held_until_the_job_is_terminal_not_only_changed():
    ctx, waits, time, _ = world()
    job = queued_job(ctx)
    time.at.append((0.1, move(ctx, job.job_id, JobStatus.PROCESSING, 1)))
    time.at.append((0.5, move(ctx, job.job_id, JobStatus.READY)))
    held = waits.hold_until_finished(job, 10)
    assert held.job.status is JobStatus.READY and 0.5 <= time.now < 0.6


def test_a_terminal_job_or_a_zero_wait_is_answered_at_once():
    ctx, waits, time, _ = world()
    job = queued_job(ctx)
    ready = dataclasses.replace(job, status=JobStatus.READY)
    assert waits.hold_until_changed(ready, 20).applied is None
    assert waits.hold_until_changed(job, 0).applied is None
    assert time.now == 0 and time.sleeps == []


def test_an_owner_holds_at_most_its_share_and_the_rest_are_answered_at_once():
    ctx, waits, time, metrics = world(Settings(max_waits_per_owner=2))
    job = queued_job(ctx)
    ctx.wait_slots.take("alice", "other-1", NOW + timedelta(seconds=30), NOW, 2)
    ctx.wait_slots.take("alice", "other-2", NOW + timedelta(seconds=30), NOW, 2)
    held = waits.hold_until_changed(job, 20)
    assert held.applied is None and time.sleeps == []
    assert sum(v for n, d, v in metrics.points() if n == Metric.WAITS_REFUSED and not d) == 1
    # Another owner is not held back by alice's waits.
    bob = dataclasses.replace(queued_job(ctx, owner="bob"), job_id="7f1c1d7e-9a55-4e1b-8f55-1b2f6cf0e111")
    ctx.jobs.items[bob.job_id] = bob
    assert waits.hold_until_changed(bob, 1).applied == 1


def test_a_slot_whose_holder_died_frees_itself_when_its_time_is_over():
    slots = FakeWaitSlots()
    assert slots.take("alice", "dead", NOW + timedelta(seconds=10), NOW, 1) == 0
    assert slots.take("alice", "next", NOW + timedelta(seconds=10), NOW + timedelta(seconds=5), 1) is None
    assert slots.take("alice", "next", NOW + timedelta(seconds=30), NOW + timedelta(seconds=11), 1) == 0
    slots.give_back("alice", 0, "dead")  # too late: not its slot any more
    assert slots.held["alice"][0][0] == "next"


def test_a_store_outage_means_no_wait_never_an_error():
    ctx, waits, time, _ = world()
    job = queued_job(ctx)
    ctx.wait_slots.down = True
    assert waits.hold_until_changed(job, 20).applied is None


def test_a_held_read_ends_before_the_invocations_budget_runs_out():
    ctx, waits, time, _ = world()
    job = queued_job(ctx)
    with deadline.invocation(10, deadline.SdkLimits.for_settings(ctx.settings)):
        held = waits.hold_until_changed(job, 20)
    assert held.applied is not None and held.applied <= 7  # 10 s less the margin to answer
    assert time.now <= 7.01


def test_a_job_deleted_meanwhile_ends_the_wait_as_not_found_and_a_cancel_at_once():
    ctx, waits, time, _ = world()
    job = queued_job(ctx)
    time.at.append((0.2, lambda: ctx.jobs.items.pop(job.job_id)))
    with pytest.raises(JobNotFound):
        waits.hold_until_changed(job, 20)
    assert time.now < 0.3 and ctx.wait_slots.held["alice"] == {}
    job = queued_job(ctx)
    time.at.append((time.now + 0.2, move(ctx, job.job_id, JobStatus.CANCELLED)))
    started = time.now
    assert waits.hold_until_finished(job, 20).job.status is JobStatus.CANCELLED
    assert time.now - started < 1  # a cancel is answered within the settle reads
    # A DELETE cancels first, then removes: the wait says 404, not the cancelled it passed.
    job = queued_job(ctx)
    time.at.append((time.now + 0.2, move(ctx, job.job_id, JobStatus.CANCELLED)))
    time.at.append((time.now + 0.45, lambda: ctx.jobs.items.pop(job.job_id)))
    with pytest.raises(JobNotFound):
        waits.hold_until_changed(job, 20)


def test_the_service_under_load_answers_at_once():
    ctx, waits, time, _ = world(Settings(max_backlog=10))

    class Full:
        def depth(self):
            return 11

    ctx.backlog = Full()
    assert waits.hold_until_changed(queued_job(ctx), 20).applied is None


@pytest.mark.parametrize("header, seconds", [
    ("wait=5", 5), ("WAIT=5", 5), ("respond-async, wait=7", 7), ('wait="9"', 9),
    ("handling=lenient; x=1, wait=3;foo", 3), ("wait=", None), ("wait=-1", None), ("wait=1.5", None),
    ("wait=abc", None), ("return=minimal", None), ("", None), (None, None), ('x="a,wait=4", wait=2', 2),
    ("wait=99999999", None), ("wait=٣", None),
])
def test_prefer_is_read_as_rfc_7240_says(header, seconds):
    assert prefer.requested_wait(header, 20) == seconds
    assert prefer.requested_wait(header, 0) is None  # waits off: the header is ignored


def test_etags_are_weak_name_the_state_and_if_none_match_reads_them_back():
    job = Job(job_id="6f1c1d7e-9a55-4e1b-8f55-1b2f6cf0e111", owner="a", status=JobStatus.QUEUED,
              created_at=NOW, updated_at=NOW, expires_at=NOW, original_key="o")
    tag = prefer.etag(job)
    assert tag.startswith('W/"') and job.job_id not in tag
    assert prefer.known_versions(tag) == {job.version}
    assert prefer.known_versions(f'"x", {tag}') == {"x", job.version}
    assert prefer.known_versions("*") is None and prefer.known_versions(None) is None
    later = dataclasses.replace(job, updated_at=NOW + timedelta(seconds=5), resends=1)
    assert later.version == job.version  # only the status and the attempt name a state
    assert dataclasses.replace(job, status=JobStatus.PROCESSING, attempt=1).version != job.version


def test_max_wait_seconds_must_stay_under_the_gateway_and_the_function():
    with pytest.raises(ValueError, match="MAX_WAIT_SECONDS"):
        Settings(local_runner=True, max_wait_seconds=29, api_timeout_seconds=60)._check()
    with pytest.raises(ValueError, match="MAX_WAIT_SECONDS"):
        Settings(local_runner=True, max_wait_seconds=20, api_timeout_seconds=20)._check()
    Settings(local_runner=True, max_wait_seconds=0)._check()
    Settings(local_runner=True)._check()  # the defaults: 20 s within a 25 s function
