"""Faults behind Ceph's RADOS Gateway (local/rgw.py), which notifies RabbitMQ itself: the broker
out of its reach while uploads go on, the gateway restarted, a notification lost for good.

The gateway's topic is not persistent (a persistent one crashes Ceph 16.2.15's gateway:
local/__main__.py), so it drops the events it cannot send; the sweeper resends them in the
gateway's own shape. Each test has a gateway of its own: one gateway publishes to one
exchange per broker address, and each test has its own exchange.
"""
from __future__ import annotations

import json
import time

import pytest

from chalicelib.domain.events import parse_message
from local.rgw import RgwCluster, free_port, installed
from tests.proxy import TcpProxy

# The sweeper looks at a queued job again this soon, and runs this often: a dropped event is
# resent within seconds rather than the production's ten minutes.
QUICK_SWEEP = {"QUEUE_TIMEOUT_SECONDS": 3, "SWEEP_INTERVAL_SECONDS": 1}


@pytest.fixture
def gateway():
    if not installed():
        pytest.fail("Ceph's RADOS Gateway is not installed: `make rgw-install` installs it")
    cluster = RgwCluster(free_port(), "test", "test").start()
    yield cluster
    cluster.stop()


@pytest.fixture
def broker_link():
    """The gateway's way to RabbitMQ, which a test can cut; the worker's own is never cut."""
    proxy = TcpProxy(5672)
    yield proxy
    proxy.down()


@pytest.fixture
def rgw_world(world_factory, gateway, broker_link):
    world = world_factory("amqp", rgw=gateway, **QUICK_SWEEP,
                          rgw_amqp_url=f"amqp://127.0.0.1:{broker_link.port}/%2F")
    world.start("worker,sweeper", WORKER_CONCURRENCY=2)
    return world


def assert_each_done_once(world, jobs, first_attempt=True):
    """Ready with exactly one set of renditions (assert_promise), and, unless storage itself
    went away under a worker, at the first attempt."""
    world.assert_promise(jobs, timeout=120)
    if first_attempt:
        assert all(world.service.ctx.jobs.get(j).attempt == 1 for j in jobs)
    assert world.dead_letters() == []
    assert gateway_alive(world)


def gateway_alive(world) -> bool:
    return world.rgw.exited() is None


def test_the_gateway_notifies_and_every_job_becomes_ready(rgw_world):
    jobs = rgw_world.upload(5)
    assert_each_done_once(rgw_world, jobs)
    # The gateway's events did it, not the sweeper.
    assert all(rgw_world.service.ctx.jobs.get(j).resends == 0 for j in jobs)


def test_the_broker_out_of_reach_while_uploads_go_on(rgw_world, broker_link):
    """The gateway drops what it cannot send (the upload still succeeds); the sweeper resends
    those once they are known lost. Every job ends ready, none twice."""
    first = rgw_world.upload(5)
    broker_link.down()
    during = rgw_world.upload(5)
    time.sleep(3)
    broker_link.up()
    after = rgw_world.upload(5)
    assert_each_done_once(rgw_world, first + during + after)
    resent = [j for j in during if rgw_world.service.ctx.jobs.get(j).resends]
    assert resent, "no event was dropped: the outage did not reach the gateway"


def test_the_gateway_restarted_between_uploads(rgw_world):
    """The gateway's notifications come back with it: the jobs uploaded after a restart are
    made as those before were, each once. The restart comes once the jobs before are done: a
    worker that reads an original while the gateway is down spends an attempt each try (1, 2,
    4 s apart), by design, so a restart a loaded machine stretched to 11 s failed a job
    processing_failed (tests/faults/test_faults.py covers storage failing under a worker)."""
    before = rgw_world.upload(5)
    rgw_world.assert_promise(before, timeout=120)
    rgw_world.rgw.restart_gateway()
    after = rgw_world.upload(5)
    assert_each_done_once(rgw_world, before + after)


def test_a_notification_lost_for_good_is_resent_in_the_gateways_shape(rgw_world, broker_link):
    """The gateway never reaches the broker again: the sweeper's resend, published straight
    to the exchange, is what the gateway would have sent (key raw), and the job ends ready."""
    world = rgw_world
    with world.amqp() as channel:  # a copy of every message the worker gets
        copy = channel.queue_declare("", exclusive=False, auto_delete=False).method.queue
        channel.queue_bind(copy, world.topology.exchange, routing_key=world.topology.routing_key)
    try:
        broker_link.down()
        jobs = world.upload(2)
        assert_each_done_once(world, jobs)
        with world.amqp() as channel:
            bodies = []
            while (got := channel.basic_get(copy, auto_ack=True))[0] is not None:
                bodies.append(got[2])
    finally:
        with world.amqp() as channel:
            channel.queue_delete(copy)
    keys = {world.service.ctx.object_keys.original(j) for j in jobs}
    assert {e.key for body in bodies for e in parse_message(body)} == keys
    for body in bodies:
        (record,) = json.loads(body)["Records"]
        assert (record["eventSource"], record["s3"]["object"]["key"] in keys) == ("ceph:s3", True)
    # The sweeper resent each: it publishes, then counts the resend on the job, a write that
    # loses (job_redrive_raced) when the worker has already taken the job from that message.
    raced = {line["job_id"] for line in logged(world) if line.get("event") == "job_redrive_raced"}
    assert all(world.service.ctx.jobs.get(j).resends >= 1 or j in raced for j in jobs)


def logged(world) -> list[dict]:
    """The JSON lines the world's processes wrote (their stderr shares the pipe: a library's
    write there can land inside a line, which is skipped)."""
    found = []
    for line in "".join(p.text() for p in world.procs).splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            pass
    return [entry for entry in found if isinstance(entry, dict)]


def test_the_orphan_scan_lists_and_deletes_on_the_gateway(world_factory, gateway, broker_link):
    """An original with no job goes, a job's stays: the scan's listing (StartAfter pages) and
    batch delete against the gateway."""
    world = world_factory("amqp", rgw=gateway, ORPHAN_GRACE_SECONDS=1,
                          rgw_amqp_url=f"amqp://127.0.0.1:{broker_link.port}/%2F")
    world.start("worker", WORKER_CONCURRENCY=1)
    (kept,) = world.upload(1)
    world.assert_promise([kept])
    keys = world.service.ctx.object_keys
    orphan = keys.original("5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0")
    world.clients["s3"].put_object(Bucket=world.settings.bucket, Key=orphan, Body=b"x")
    time.sleep(2.1)
    assert world.service.orphan_scan.run()["orphans_deleted"] == 1
    listed = world.clients["s3"].list_objects_v2(Bucket=world.settings.bucket, Prefix="originals/")
    assert [o["Key"] for o in listed.get("Contents", [])] == [keys.original(kept)]
