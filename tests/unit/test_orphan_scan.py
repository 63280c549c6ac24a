"""The orphan scan on in-memory stores: batched reads, a point to resume at, a pass a day."""
import dataclasses
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from chalicelib.config import Settings
from chalicelib.domain.errors import TransientError
from chalicelib.domain.jobs import Job, JobStatus, Rendition
from chalicelib.domain.renditions import RenditionName
from chalicelib.domain.storage import ScanPoint
from chalicelib.usecases import orphans
from chalicelib.usecases.orphans import OrphanScan, key_ranges
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, fake_context

START = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)
WEEK = timedelta(days=7)


class CountingJobs(FakeJobStore):
    """Counts the batched reads; each one may take some of the clock's time."""

    def __init__(self, clock: Clock, seconds_per_read: float = 0):
        super().__init__()
        self.clock, self.seconds_per_read = clock, seconds_per_read
        self.reads: list[list[str]] = []

    def objects_of(self, job_ids):
        self.reads.append(list(job_ids))
        self.clock.advance(self.seconds_per_read)
        return super().objects_of(job_ids)


class ListingObjects(FakeObjectStore):
    """Records where each listing started."""

    def __init__(self, clock):
        super().__init__(clock)
        self.listed: list[tuple[str, str]] = []

    def list_keys(self, prefix, older_than, after=None):
        self.listed.append((prefix, after))
        return super().list_keys(prefix, older_than, after)


@pytest.fixture
def world(monkeypatch):
    monkeypatch.setattr(orphans, "PAGE_KEYS", 4)  # pages of 4 keys: a few objects make many pages
    clock = Clock(START)
    settings = Settings(bucket="images", orphan_scan_threads=1, orphan_scan_budget_seconds=10)
    ctx = fake_context(settings=settings, jobs=CountingJobs(clock), objects=ListingObjects(clock), clock=clock)
    return ctx


def job_id(first: str = "a") -> str:
    """A fresh job id in one key range (its first hex digit)."""
    return first + str(uuid.uuid4())[1:]


def put(ctx, key):
    ctx.objects.put(key, b"x", "image/jpeg")
    return key


def add_job(ctx, status=JobStatus.READY, attempt=1, first="a") -> Job:
    jid = job_id(first)
    keys = ctx.object_keys
    job = Job(job_id=jid, owner="alice", status=status, created_at=START, updated_at=START,
              expires_at=START + WEEK, original_key=keys.original(jid), attempt=attempt)
    if status is JobStatus.READY:
        job = dataclasses.replace(job, renditions={name: Rendition(keys.rendition(jid, attempt, name), 1, 1)
                                                   for name in RenditionName})
    ctx.jobs.create(job, 100)
    return job


def later(ctx, seconds=None):
    s = ctx.settings
    ctx.clock.advance(seconds if seconds is not None else max(s.orphan_grace_seconds, s.orphan_pass_seconds) + 1)


def test_the_ranges_hold_every_job_id_key_under_a_prefix_exactly_once(world):
    ranges = key_ranges("originals/")
    assert ranges == [f"originals/{d}" for d in "0123456789abcdef"]
    for _ in range(100):
        jid = str(uuid.uuid4())
        for key in (world.object_keys.original(jid), world.object_keys.rendition(jid, 1, "display")):
            holding = [r for p in ("originals/", "renditions/") for r in key_ranges(p) if key.startswith(r)]
            assert len(holding) == 1, (key, holding)


def test_a_page_keeps_what_its_jobs_need_and_deletes_the_rest(world):
    ctx = world
    ready = add_job(ctx)
    processing = add_job(ctx, JobStatus.PROCESSING, attempt=2)
    queued = add_job(ctx, JobStatus.QUEUED, attempt=0)
    keys = ctx.object_keys
    kept = {put(ctx, ready.original_key), put(ctx, ready.renditions[RenditionName.DISPLAY].key), put(ctx, ready.renditions[RenditionName.THUMB].key),
            put(ctx, processing.original_key), put(ctx, keys.rendition(processing.job_id, 2, "display")),
            put(ctx, queued.original_key)}
    ghost = job_id()
    gone = {put(ctx, keys.rendition(ready.job_id, 3, "display")),  # a stale attempt's, after the result
            put(ctx, keys.rendition(processing.job_id, 1, "thumb")),  # a dead attempt's
            put(ctx, keys.rendition(queued.job_id, 1, "display")),  # a queued job has no renditions
            put(ctx, keys.original(ghost)), put(ctx, keys.rendition(ghost, 1, "display")),  # no job
            put(ctx, "originals/a-not-a-job-id")}
    later(ctx)
    assert ctx.jobs.items and OrphanScan(ctx).run() == {"orphans_deleted": len(gone)}
    assert set(ctx.objects.objects) == kept
    # Every read was a batch, of the ids of one page; never one job at a time per key.
    assert all(len(ids) == len(set(ids)) for ids in ctx.jobs.reads)
    assert ghost in {i for ids in ctx.jobs.reads for i in ids}


def test_objects_younger_than_the_grace_period_are_kept_until_a_pass_finds_them_old(world):
    ctx = world
    ghost = job_id()
    young = put(ctx, ctx.object_keys.original(ghost))
    later(ctx, ctx.settings.orphan_grace_seconds - 1)
    assert OrphanScan(ctx).run() == {}
    assert young in ctx.objects.objects
    later(ctx, ctx.settings.orphan_pass_seconds)  # the next pass: now past its grace
    assert OrphanScan(ctx).run() == {"orphans_deleted": 1}


def test_a_run_out_of_budget_stops_cleanly_and_the_next_resumes_at_its_point(world):
    ctx = world
    ctx.jobs.seconds_per_read = 4  # the budget (10 s) covers three pages of a run
    kept = [add_job(ctx, JobStatus.QUEUED, attempt=0) for _ in range(10)]
    for job in kept:
        put(ctx, job.original_key)
    ghosts = [put(ctx, ctx.object_keys.original(job_id())) for _ in range(14)]  # 24 keys: 6 pages
    later(ctx)

    first = OrphanScan(ctx).run()  # three pages of 4, then the budget is spent
    assert len(ctx.jobs.reads) == 3 and first["ranges_left"] >= 1
    assert 0 < first["orphans_deleted"] < len(ghosts)
    point = ctx.jobs.points["originals/a"]
    assert point.after is not None and point.pass_started is not None
    assert all(key > point.after for key in ghosts if key in ctx.objects.objects)  # done up to it

    ctx.jobs.reads.clear()
    ctx.objects.listed.clear()
    ctx.jobs.seconds_per_read = 0
    second = OrphanScan(ctx).run()
    assert ("originals/a", point.after) in ctx.objects.listed  # it resumed, not started over
    assert first["orphans_deleted"] + second["orphans_deleted"] == len(ghosts)
    assert "ranges_left" not in second
    assert set(ctx.objects.objects) == {job.original_key for job in kept}
    # The pass that spanned two runs keeps the time it began.
    assert ctx.jobs.points["originals/a"] == ScanPoint(after=None, pass_started=point.pass_started)


def test_a_finished_pass_rests_until_the_next_is_due_then_starts_over(world):
    ctx = world
    put(ctx, ctx.object_keys.original(job_id()))
    later(ctx)
    assert OrphanScan(ctx).run() == {"orphans_deleted": 1}
    started = ctx.clock()
    ranges = [r for prefix in ("originals/", "renditions/") for r in key_ranges(prefix)]
    assert ctx.jobs.points == {name: ScanPoint(after=None, pass_started=started) for name in ranges}

    late = put(ctx, ctx.object_keys.original(job_id()))
    later(ctx, ctx.settings.orphan_grace_seconds + 1)
    ctx.objects.listed.clear()
    assert OrphanScan(ctx).run() == {}  # every range made its pass today
    assert ctx.objects.listed == [] and late in ctx.objects.objects

    later(ctx, ctx.settings.orphan_pass_seconds)
    assert OrphanScan(ctx).run() == {"orphans_deleted": 1}
    assert ("originals/a", None) in ctx.objects.listed  # from the range's start


def test_a_range_that_fails_resumes_at_its_last_point_and_the_others_go_on(world):
    ctx = world
    ghosts = [put(ctx, ctx.object_keys.original(job_id("b"))) for _ in range(6)]
    other = put(ctx, ctx.object_keys.original(job_id("c")))
    later(ctx)
    reads, calls = ctx.jobs.objects_of, []

    def second_page_fails(ids):
        calls.append(ids)
        if len(calls) == 2:  # the range's second page
            raise TransientError("table down")
        return reads(ids)

    ctx.jobs.objects_of = second_page_fails
    report = OrphanScan(ctx).run()
    assert report["errors"] == 1 and other not in ctx.objects.objects
    assert sum(key in ctx.objects.objects for key in ghosts) == 2  # the first page's 4 went
    del ctx.jobs.objects_of
    later(ctx, 60)
    assert OrphanScan(ctx).run() == {"orphans_deleted": 2}
    assert not any(key in ctx.objects.objects for key in ghosts)


def test_a_scheduled_run_takes_the_two_ranges_of_its_minutes_hex_digit(world):
    ctx = world
    minute = int(ctx.clock().timestamp() // 60)
    for step in range(16):
        ctx.objects.listed.clear()
        OrphanScan(ctx).run(scheduled=True)
        digit = "0123456789abcdef"[(minute + step) % 16]
        assert sorted(ctx.objects.listed) == [(f"originals/{digit}", None), (f"renditions/{digit}", None)]
        later(ctx, 60)
    # 16 minutes on, the first digit's turn comes again: its pass is done for the day.
    ctx.objects.listed.clear()
    OrphanScan(ctx).run(scheduled=True)
    assert ctx.objects.listed == []
