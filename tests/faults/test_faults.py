"""Faults with real processes: every accepted job ends in exactly one terminal status, with
at most one set of renditions, whatever happens."""
from __future__ import annotations

import json
import signal
import time
from datetime import datetime, timezone
from urllib.parse import urlparse

import pytest

from chalicelib.domain.jobs import JobStatus
from tests.faults.conftest import photo
from tests.proxy import TcpProxy

BIG = photo(6000, 6000, fmt="PNG")  # ~0.5 s of work: long enough to be killed in the middle


@pytest.mark.parametrize("backend", ["sqs", "amqp"])
def test_the_same_event_five_times_and_to_two_workers_at_once(world_factory, backend):
    # A lease long enough that no attempt outlives it even on a loaded machine: this test is
    # about duplicates, and a second attempt would only mean a slow first one.
    world = world_factory(backend, LEASE_SECONDS=30)
    world.workers(count=2, concurrency=2)
    jobs = world.upload(6)
    for job_id in jobs:
        world.deliver_again(job_id, 4)
    world.assert_promise(jobs)
    time.sleep(2)  # let the duplicates drain: they must all be no-ops
    world.assert_promise(jobs)
    assert all(world.service.ctx.jobs.get(j).attempt == 1 for j in jobs)
    assert world.dead_letters() == []


def test_a_worker_killed_mid_job_is_replaced_and_nothing_is_lost(world):
    jobs = world.upload(5, data=BIG)
    caught = []
    # On a loaded machine a job can finish between the look and the kill (a CI run saw it):
    # then another worker takes the next job and is killed in its turn.
    for _ in range(4):
        (worker,) = world.workers(count=1, concurrency=1)
        deadline = time.monotonic() + 30
        while not any(s is JobStatus.PROCESSING for s in world.statuses(jobs).values()):
            assert time.monotonic() < deadline, "no job was ever claimed"
            time.sleep(0.02)
        worker.process.send_signal(signal.SIGKILL)
        worker.process.wait()
        caught = [j for j, s in world.statuses(jobs).items() if s is JobStatus.PROCESSING]
        if caught:
            break
    assert caught, "the kill did not land in the middle of a job"
    world.start("worker", WORKER_CONCURRENCY=1)
    world.assert_promise(jobs, timeout=120)  # the killed attempt's lease (26 s) must run out first
    assert all(world.service.ctx.jobs.get(j).attempt == 2 for j in caught)
    assert world.dead_letters() == []


def test_rabbitmq_stopped_and_started_while_jobs_flow(own_broker, world_factory):
    """On a RabbitMQ node of the test's own (tests/faults/broker.py), stopped and started again:
    stopping the machine's would fail every test beside it that uses the broker."""
    world = world_factory("amqp", amqp_url=own_broker.url)
    world.workers(count=1, concurrency=2)
    first = world.upload(5)
    try:
        own_broker.stop()
        during = world.upload(5)  # accepted while the broker is away: events wait in storage's queue
        time.sleep(2)
    finally:
        own_broker.start()
    after = world.upload(5)
    world.assert_promise(first + during + after, timeout=120)
    assert world.dead_letters() == []


@pytest.fixture
def flaky_storage(world_factory, moto_endpoint):
    proxy = TcpProxy(urlparse(moto_endpoint).port)
    world = world_factory("amqp", MAX_ATTEMPTS=4)
    world.start("bridge")
    world.start("worker", WORKER_CONCURRENCY=1, S3_ENDPOINT_URL=f"http://127.0.0.1:{proxy.port}")
    yield world, proxy
    proxy.down()


def test_storage_failing_for_a_while_is_retried_then_done(flaky_storage):
    world, proxy = flaky_storage
    proxy.down()
    jobs = world.upload(3)  # the test writes straight to storage; the worker's path is cut
    # Down until an attempt has failed and given its lease back (the SDK's own retries of one
    # call may outlast any fixed pause), then up again.
    deadline = time.monotonic() + 60
    while not any(_gave_back(world.service.ctx.jobs.get(j)) for j in jobs):
        assert time.monotonic() < deadline, "no attempt ever failed"
        time.sleep(0.2)
    proxy.up()
    world.assert_promise(jobs)
    assert max(world.service.ctx.jobs.get(j).attempt for j in jobs) > 1  # it did fail, and retried


def test_storage_failing_past_the_attempt_limit_ends_processing_failed(flaky_storage):
    world, proxy = flaky_storage
    proxy.down()
    jobs = world.upload(2)
    world.assert_promise(jobs, expected=JobStatus.FAILED, timeout=90)
    for job_id in jobs:
        job = world.service.ctx.jobs.get(job_id)
        assert job.error_code == "processing_failed" and job.attempt == 4
    assert world.dead_letters() == []


def test_poison_messages_are_dead_lettered_never_a_crash_loop(amqp_world):
    world = amqp_world
    (worker,) = world.workers()
    no_job = json.dumps({"Records": [{"eventName": "s3:ObjectCreated:Put", "eventSource": "minio:s3", "s3": {
        "bucket": {"name": world.settings.bucket},
        "object": {"key": "originals/5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0", "size": 1}}}]}).encode()
    garbage, not_an_event = b"\x00\xff garbage \xfe", json.dumps({"hello": "world"}).encode()
    foreign = json.dumps({"Records": [{"eventName": "s3:ObjectCreated:Put", "s3": {
        "bucket": {"name": "somebody-elses"}, "object": {"key": "originals/x", "size": 1}}}]}).encode()
    world.publish_raw(garbage, not_an_event, foreign, no_job)
    jobs = world.upload(2)
    world.assert_promise(jobs)
    assert sorted(world.dead_letters()) == sorted([garbage, not_an_event, foreign])
    assert worker.alive()
    assert "event_ignored" in worker.text() and "no_job" in worker.text()
    assert worker.text().count("poison_message_dead_lettered") == 3


def test_sqs_poison_is_dropped_with_a_log_line(world_factory):
    world = world_factory("sqs")
    (worker,) = world.workers()
    for body in ("garbage", json.dumps({"hello": "world"})):
        world.clients["sqs"].send_message(QueueUrl=world.stack.queue_url, MessageBody=body)
    jobs = world.upload(2)
    world.assert_promise(jobs)
    time.sleep(1)
    assert worker.alive() and worker.text().count("poison_message_dropped") == 2
    assert world.dead_letters() == []


def test_sigterm_lets_the_job_in_hand_finish(world):
    # A stop budget no loaded machine reaches (the default 15 s is the runner's, not this
    # property's): on a slow two-core machine under the whole suite, BIG took longer.
    (worker,) = world.workers(count=1, concurrency=1, STOP_SECONDS=120)
    jobs = world.upload(1, data=BIG)
    deadline = time.monotonic() + 30
    while world.statuses(jobs)[jobs[0]] is not JobStatus.PROCESSING:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    worker.process.send_signal(signal.SIGTERM)
    assert worker.process.wait(150) == 0
    assert world.statuses(jobs)[jobs[0]] is JobStatus.READY, worker.text()[-3000:]
    assert "stop_timed_out" not in worker.text()
    world.assert_promise(jobs)


def _gave_back(job) -> bool:
    """An attempt failed: its lease was ended early (it waits for a retry), or a retry began."""
    now = datetime.now(timezone.utc)
    return job is not None and job.status is JobStatus.PROCESSING and (
        not job.lease_active(now) or job.attempt > 1)
