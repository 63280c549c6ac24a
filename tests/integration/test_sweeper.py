"""The sweeper against moto's server, with every limit shortened."""
import threading
import time
import uuid
from dataclasses import replace
from datetime import timedelta

import pytest

from chalicelib.bootstrap import build_use_cases
from chalicelib.domain.errors import JobExpired
from chalicelib.domain.events import parse_message
from chalicelib.domain.jobs import JobStatus
from chalicelib.domain.renditions import RenditionName
from chalicelib.domain.vocabulary import SweepOutcome
from local.provision import provision
from local.services import aws_client
from tests.images import jpeg


@pytest.fixture
def world(settings_for):
    return make_world(settings_for)


def make_world(settings_for, lease_seconds=1):
    settings = settings_for(lease_seconds=lease_seconds, retention_seconds=2, orphan_grace_seconds=1,
                            queue_timeout_seconds=1, event_delay_seconds=0)
    clients = {n: aws_client(n, settings.region, settings.endpoint_url) for n in ("sqs", "s3", "dynamodb")}
    stack = provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"])
    return build_use_cases(settings), stack, clients


def drain(clients, stack, wait=1.0):
    """Every object-created event waiting in the queue."""
    found, deadline = [], time.monotonic() + wait
    while time.monotonic() < deadline:
        for m in clients["sqs"].receive_message(QueueUrl=stack.queue_url, MaxNumberOfMessages=10,
                                                WaitTimeSeconds=1).get("Messages", []):
            found.extend(parse_message(m["Body"]))
            clients["sqs"].delete_message(QueueUrl=stack.queue_url, ReceiptHandle=m["ReceiptHandle"])
    return found


def keys(clients, use_cases):
    listed = clients["s3"].list_objects_v2(Bucket=use_cases.ctx.settings.bucket).get("Contents", [])
    return sorted(o["Key"] for o in listed)


def test_a_stuck_job_is_reclaimed_through_the_queue_and_finishes(world):
    use_cases, stack, clients = world
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    drain(clients, stack)  # the worker that took this event died mid-way:
    use_cases.ctx.jobs.claim(job.job_id, use_cases.ctx.clock(), timedelta(seconds=1), 3)
    time.sleep(1.1)
    assert use_cases.sweeper.sweep()[SweepOutcome.RESENT] == 1
    (event,) = drain(clients, stack)
    assert event.key == job.original_key
    assert use_cases.worker.handle_object_created(event) == "ready"
    assert use_cases.ctx.jobs.get(job.job_id).attempt == 2


def test_a_job_over_the_attempt_limit_fails_processing_failed(world):
    use_cases, stack, clients = world
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    for _ in range(3):
        use_cases.ctx.jobs.claim(job.job_id, use_cases.ctx.clock(), timedelta(seconds=1), 3)
        time.sleep(1.05)
    assert use_cases.sweeper.sweep()[SweepOutcome.FAILED] == 1
    failed = use_cases.ctx.jobs.get(job.job_id)
    assert (failed.status, failed.error_code) == (JobStatus.FAILED, "processing_failed")


def test_an_expired_job_reads_410_then_is_gone_with_its_objects(world):
    use_cases, stack, clients = world
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    (event,) = drain(clients, stack)
    use_cases.worker.handle_object_created(event)
    assert len(keys(clients, use_cases)) == 4  # the original and the three default renditions
    time.sleep(2.1)
    with pytest.raises(JobExpired):
        use_cases.manage.get_job("alice", job.job_id)
    assert use_cases.sweeper.sweep()[SweepOutcome.EXPIRED_DELETED] == 1
    assert use_cases.ctx.jobs.get(job.job_id) is None and keys(clients, use_cases) == []


def test_an_orphan_original_disappears(world):
    use_cases, stack, clients = world
    orphan = use_cases.ctx.object_keys.original(str(uuid.uuid4()))
    clients["s3"].put_object(Bucket=use_cases.ctx.settings.bucket, Key=orphan, Body=b"x")
    time.sleep(2.1)
    assert use_cases.orphan_scan.run()["orphans_deleted"] == 1
    assert orphan not in keys(clients, use_cases)


def test_two_sweepers_racing_and_a_second_run_leave_the_same_state(settings_for, monkeypatch):
    # Jobs leased for 1 s; the resend then looks again only after 30 s, so that "at once
    # again" stays true on a slow machine.
    use_cases, stack, clients = make_world(settings_for, lease_seconds=30)
    # Both sweepers read the queue as drained before either re-sends: the race is then over
    # the conditional writes alone. (A sweeper that reads the queue after the other's resend
    # finds it busy and rightly waits: on a loaded machine that happened, and a job was left
    # for the next run.)
    both_read = threading.Barrier(2)
    drained_before = use_cases.ctx.backlog.drained_before

    def read_then_wait(now):
        read = drained_before(now)
        both_read.wait(timeout=60)
        return read

    monkeypatch.setattr(use_cases.ctx.backlog, "drained_before", read_then_wait)
    stuck = [use_cases.uploads.accept_upload("alice", jpeg()).job for _ in range(3)]
    drain(clients, stack)
    for job in stuck:
        use_cases.ctx.jobs.claim(job.job_id, use_cases.ctx.clock(), timedelta(seconds=1), 3)
    time.sleep(1.1)
    reports = []
    threads = [threading.Thread(target=lambda: reports.append(use_cases.sweeper.sweep())) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r.get(SweepOutcome.RESENT, 0) for r in reports) == 3  # each job marked by one sweeper
    assert all(use_cases.ctx.jobs.get(j.job_id).resends == 1 for j in stuck)
    state = [use_cases.ctx.jobs.get(j.job_id) for j in stuck]
    monkeypatch.undo()
    # Again: the re-sent events wait in the queue, so nothing is re-sent or failed (at most
    # the sweeper notes when to look next).
    assert set(use_cases.sweeper.sweep()) <= {SweepOutcome.WAITING}
    assert [replace(use_cases.ctx.jobs.get(j.job_id), sweep_at=None) for j in stuck] == [
        replace(j, sweep_at=None) for j in state]
    # Publish first, then mark: a sweeper that loses the race has sent a duplicate event,
    # which the worker treats as one; never a job left without any.
    assert {e.key for e in drain(clients, stack)} == {j.original_key for j in stuck}


def test_orphans_across_pages_go_over_two_budget_limited_runs_and_needed_objects_stay(settings_for, monkeypatch):
    from datetime import datetime, timezone

    from chalicelib.domain.jobs import Job, Rendition
    from chalicelib.usecases import orphans

    monkeypatch.setattr(orphans, "PAGE_KEYS", 5)
    settings = settings_for(orphan_grace_seconds=1, orphan_scan_threads=1, orphan_scan_budget_seconds=10)
    clients = {n: aws_client(n, settings.region, settings.endpoint_url) for n in ("sqs", "s3", "dynamodb")}
    provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"])
    use_cases = build_use_cases(settings)
    ctx, bucket = use_cases.ctx, settings.bucket
    now = datetime.now(timezone.utc)

    def put(key):
        clients["s3"].put_object(Bucket=bucket, Key=key, Body=b"x")
        return key

    def job_id(first):
        return first + str(uuid.uuid4())[1:]

    kept, ghosts = set(), set()
    for first in "aab":
        jid = job_id(first)
        display, thumb = (Rendition(ctx.object_keys.rendition(jid, 1, name), 1, 1) for name in ("display", "thumb"))
        ctx.jobs.create(Job(job_id=jid, owner="alice", status=JobStatus.READY, created_at=now, updated_at=now,
                            expires_at=now + timedelta(days=7), original_key=ctx.object_keys.original(jid), attempt=1,
                            renditions={RenditionName.DISPLAY: display, RenditionName.THUMB: thumb}), 100)
        kept |= {put(ctx.object_keys.original(jid)), put(display.key), put(thumb.key)}
        ghosts.add(put(ctx.object_keys.rendition(jid, 2, "display")))  # a stale attempt's
    for first in "aaaaaaaabbb":
        ghosts.add(put(ctx.object_keys.original(job_id(first))))  # no job at all
    time.sleep(1.1)

    # Each batched read takes 4 s of a fake clock: the 10 s budget stops the run after 3 pages.
    offset = [timedelta(0)]
    ctx.clock = lambda: datetime.now(timezone.utc) + offset[0]
    read = ctx.jobs.objects_of

    def slow_read(job_ids):
        offset[0] += timedelta(seconds=4)
        return read(job_ids)

    ctx.jobs.objects_of = slow_read
    first = use_cases.orphan_scan.run()
    assert first["ranges_left"] >= 1 and 0 < first["orphans_deleted"] < len(ghosts)
    assert kept <= set(keys(clients, use_cases))

    ctx.jobs.objects_of = read
    second = use_cases.orphan_scan.run()
    assert first["orphans_deleted"] + second["orphans_deleted"] == len(ghosts)
    assert set(keys(clients, use_cases)) == kept
    assert use_cases.orphan_scan.run() == {}  # every range made its pass: nothing due today
