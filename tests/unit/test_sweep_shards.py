"""The due index's write shards (docs/scale.md 6.1) and the sweeper that asks every one of
them: the spread of the shard function, two sweeps at once acting once per job, and the
time budget that stops a run taking new shards."""
import dataclasses
import hashlib
import threading
import time
import uuid
from collections import Counter
from datetime import datetime, timedelta, timezone

from chalicelib.config import Settings
from chalicelib.domain.jobs import DUE_SHARDS, Job, JobStatus, due_shard, shard_key, sweep_key
from chalicelib.domain.vocabulary import SweepOutcome
from chalicelib.usecases import UseCases
from chalicelib.usecases.sweeper import Sweeper
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, FakeQueue, fake_context

START = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)


def test_the_key_is_the_status_and_a_two_digit_shard_of_a_hash_of_the_id():
    job_id = "5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0"
    expected = int.from_bytes(hashlib.sha256(job_id.encode()).digest()[:4], "big") % 64
    assert DUE_SHARDS == 64
    assert due_shard(job_id) == expected
    assert sweep_key(JobStatus.QUEUED, job_id) == f"queued#{expected:02d}"
    assert shard_key(JobStatus.PROCESSING, 7) == "processing#07"
    # Pinned: changing the function (or the count) re-keys every stored job.
    assert sweep_key(JobStatus.READY, job_id) == "ready#38"


def test_64k_random_ids_fill_every_shard_within_15_percent_of_the_mean():
    counts = Counter(due_shard(str(uuid.uuid4())) for _ in range(64_000))
    mean = 64_000 / DUE_SHARDS
    assert set(counts) == set(range(DUE_SHARDS))
    assert max(abs(n - mean) for n in counts.values()) <= 0.15 * mean, counts


def test_the_shard_depends_on_a_hash_not_on_the_ids_first_characters():
    # Time-ordered ids (uuid7, ULID) share their first characters for a while: they must
    # spread as well as random ones do.
    ids = [f"0190f3a2-7c4e-7{n:03x}-8000-000000000000" for n in range(4096)]
    counts = Counter(due_shard(i) for i in ids)
    assert set(counts) == set(range(DUE_SHARDS))
    assert max(abs(n - 64) for n in counts.values()) <= 0.4 * 64
    # And ids that differ only after a shared prefix of any length land apart.
    assert len({due_shard("same-prefix-" + "0" * 20 + c) for c in "0123456789abcdef"}) > 8


# -- the sweeper over the shards --------------------------------------------------------------


def make_svc(store=None, **settings):
    clock = Clock(START)
    # An empty events queue that counts at once: a stuck job's message is known lost, so the
    # sweeper resends it.
    config = Settings(**{"bucket": "images", "event_delay_seconds": 0, **settings})
    queue = FakeQueue(clock)
    return UseCases(fake_context(settings=config, jobs=store or FakeJobStore(), objects=FakeObjectStore(clock),
                                 publisher=queue, backlog=queue, clock=clock))


def stuck_job(use_cases, job_id=None) -> Job:
    """A job claimed by a worker that died: its lease is over."""
    job_id = job_id or str(uuid.uuid4())
    now = use_cases.ctx.clock()
    job = Job(job_id=job_id, owner="alice", status=JobStatus.QUEUED, created_at=now, updated_at=now,
              expires_at=now + timedelta(days=7), original_key=f"originals/{job_id}",
              sweep_at=now + timedelta(minutes=10))
    use_cases.ctx.jobs.create(job, 10_000)
    use_cases.ctx.jobs.claim(job_id, now, timedelta(seconds=1), 3)
    return job


def ids_in_every_shard(per_shard: int = 4) -> list[str]:
    counts: Counter = Counter()
    ids = []
    while len(ids) < per_shard * DUE_SHARDS:
        job_id = str(uuid.uuid4())
        if counts[due_shard(job_id)] < per_shard:
            counts[due_shard(job_id)] += 1
            ids.append(job_id)
    return ids


def test_one_run_finds_due_jobs_in_every_shard():
    use_cases = make_svc()
    jobs = [stuck_job(use_cases, job_id) for job_id in ids_in_every_shard(per_shard=5)]
    use_cases.ctx.clock.advance(2)
    assert use_cases.sweeper.sweep()[SweepOutcome.RESENT] == 320
    assert len(use_cases.ctx.publisher.sent) == 320


def test_expired_jobs_in_every_shard_are_removed_in_one_run():
    use_cases = make_svc()
    jobs = [stuck_job(use_cases) for _ in range(200)]
    for job in jobs:  # finished a week ago
        current = use_cases.ctx.jobs.get(job.job_id)
        use_cases.ctx.jobs.update_if_unchanged(current.cancelled(use_cases.ctx.clock(), timedelta(days=7)),
                                               seen=current)
    use_cases.ctx.clock.advance(7 * 24 * 3600 + 1)
    assert use_cases.sweeper.sweep()[SweepOutcome.EXPIRED_DELETED] == 200
    assert use_cases.ctx.jobs.items == {}


class _ReadRecorder(FakeJobStore):
    """Records each due() query's shard; each query takes `seconds` of the clock."""

    def __init__(self, clock=None, seconds=0.0):
        super().__init__()
        self.clock, self.seconds = clock, seconds
        self.asked: list = []
        self.pause = 0.0

    def due(self, status, now, limit, *, shard):
        self.asked.append(shard)
        if self.seconds:
            self.clock.advance(self.seconds)
        found = super().due(status, now, limit, shard=shard)
        time.sleep(self.pause)  # the other sweep reads the same jobs before this one acts
        return found


def test_two_sweeps_at_once_act_once_per_job():
    store = _ReadRecorder()
    use_cases = make_svc(store, sweep_threads=4)
    jobs = [stuck_job(use_cases) for _ in range(200)]
    use_cases.ctx.clock.advance(2)
    store.pause = 0.005
    reports = []
    # Two sweepers, as two overlapping scheduled runs: their own pools, the same table.
    sweepers = [Sweeper(use_cases.ctx), Sweeper(use_cases.ctx)]
    sweeps = [threading.Thread(target=lambda s=s: reports.append(s.sweep())) for s in sweepers]
    for t in sweeps:
        t.start()
    for t in sweeps:
        t.join()
    assert sum(r[SweepOutcome.RESENT] for r in reports) == 200  # each job by one sweeper
    # Publish first, then mark: the sweep that loses a job's mark has sent it a duplicate
    # event (the worker takes it for one), never a job without any.
    assert {e.key for e in use_cases.ctx.publisher.sent} == {j.original_key for j in jobs}
    assert all(store.get(j.job_id).resends == 1 for j in jobs)


def test_the_time_budget_stops_taking_new_shards_and_the_next_run_starts_there():
    clock = Clock(START)
    store = _ReadRecorder(clock, seconds=1.0)  # each query a second
    queue = FakeQueue(clock)
    settings = Settings(bucket="images", sweep_threads=1, sweep_budget_seconds=40, event_delay_seconds=0)
    use_cases = UseCases(fake_context(settings=settings, jobs=store, objects=FakeObjectStore(clock),
                                      publisher=queue, backlog=queue, clock=clock))
    jobs = [stuck_job(use_cases) for _ in range(300)]
    clock.advance(2)
    first = use_cases.sweeper.sweep()
    # 6 statuses, a query each, per shard: shards start at 0, 6, ..., 36 s; the 7th is cut
    # short at 40 s (before its 5th status), and no shard is taken after.
    taken = list(dict.fromkeys(store.asked))
    assert len(taken) == 7 and store.asked.count(taken[-1]) == 4
    assert first[SweepOutcome.SHARDS_LEFT] == DUE_SHARDS - 6
    store.asked.clear()
    second = use_cases.sweeper.sweep()
    resumed = list(dict.fromkeys(store.asked))
    assert resumed[0] == taken[-1]  # the first shard the first run did not finish
    assert set(resumed) & set(taken) == {taken[-1]}
    # Every stuck job of a shard that either run finished has been resent, once.
    done = set(taken[:-1]) | set(resumed[:-1])
    assert first[SweepOutcome.RESENT] + second[SweepOutcome.RESENT] == len(use_cases.ctx.publisher.sent)
    sent = {e.key for e in use_cases.ctx.publisher.sent}
    assert sent >= {j.original_key for j in jobs if due_shard(j.job_id) in done}


def test_a_failing_shard_does_not_stop_the_others():
    class Flaky(FakeJobStore):
        def due(self, status, now, limit, *, shard):
            if shard == 0:
                from chalicelib.domain.errors import TransientError
                raise TransientError("throttled")
            return super().due(status, now, limit, shard=shard)

    use_cases = make_svc(Flaky())
    jobs = [stuck_job(use_cases) for _ in range(200)]
    use_cases.ctx.clock.advance(2)
    report = use_cases.sweeper.sweep()
    assert report[SweepOutcome.ERRORS] == 1
    assert report[SweepOutcome.RESENT] == sum(due_shard(j.job_id) != 0 for j in jobs)


def test_a_sweep_asks_every_shard_of_the_sharded_index():
    store = _ReadRecorder()
    use_cases = make_svc(store)
    use_cases.sweeper.sweep()
    assert set(store.asked) == set(range(DUE_SHARDS))


def test_a_batch_of_expired_jobs_frees_their_keys_as_one_removal_does():
    from tests.images import jpeg

    use_cases = make_svc()
    keyed = [use_cases.uploads.accept_upload("alice", jpeg(color=(n, 0, 0)), f"key-{n}").job for n in range(5)]
    plain = [use_cases.uploads.accept_upload("alice", jpeg()).job for _ in range(5)]
    for job in keyed + plain:
        current = use_cases.ctx.jobs.get(job.job_id)
        use_cases.ctx.jobs.move(current.cancelled(use_cases.ctx.clock(), timedelta(days=7)), JobStatus.QUEUED)
    # key-0's record was taken over meanwhile by a newer job: the removal must leave it be.
    newer = dataclasses.replace(use_cases.ctx.jobs.idempotency[keyed[0].idempotency_scope], job_id="newer")
    use_cases.ctx.jobs.idempotency[newer.scope] = newer
    use_cases.ctx.clock.advance(7 * 24 * 3600)
    assert use_cases.sweeper.sweep()[SweepOutcome.EXPIRED_DELETED] == 10
    assert use_cases.ctx.jobs.items == {} and use_cases.ctx.objects.objects == {}
    assert use_cases.ctx.jobs.idempotency == {newer.scope: newer}
    assert use_cases.ctx.jobs.active_jobs("alice") == set()
