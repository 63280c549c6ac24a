"""The AMQP resend publisher and backlog gauge against the real RabbitMQ."""
import time
from datetime import timedelta

from chalicelib.domain.events import parse_message
from chalicelib.domain.jobs import JobStatus
from chalicelib.domain.vocabulary import SweepOutcome


def test_the_sweeper_resends_to_the_exchange_in_minios_shape(amqp_world):
    world = amqp_world
    job_id = world.upload(1)[0]  # no bridge and no worker: the event stays in storage's SQS queue
    use_cases = world.service
    use_cases.ctx.jobs.claim(job_id, use_cases.ctx.clock(), timedelta(seconds=1), 3)  # a worker took it and died
    # ... and its message is gone from the (empty) exchange queue: lost, once the lease and the
    # allowance for a late delivery have passed.
    time.sleep(1 + world.settings.event_delay_seconds + 0.2)
    assert use_cases.sweeper.sweep()[SweepOutcome.RESENT] == 1
    with world.amqp() as channel:
        method, _, body = channel.basic_get(world.topology.queue, auto_ack=True)
    assert method is not None, "nothing was published"
    doc = __import__("json").loads(body)
    assert doc["EventName"] == "s3:ObjectCreated:Put" and doc["Records"][0]["eventSource"] == "minio:s3"
    (event,) = parse_message(body)
    assert (event.bucket, event.key) == (world.settings.bucket, use_cases.ctx.object_keys.original(job_id))
    assert use_cases.worker.handle_object_created(event) == "ready"
    assert use_cases.ctx.jobs.get(job_id).status is JobStatus.READY


def test_behind_the_rados_gateway_the_resend_is_in_its_shape_with_the_key_raw(world_factory):
    """AMQP_EVENT_SHAPE=ceph: the event the gateway itself would send, key unencoded."""
    world = world_factory("amqp", AMQP_EVENT_SHAPE="ceph")
    use_cases = world.service
    job_id = world.upload(1)[0]
    use_cases.ctx.jobs.claim(job_id, use_cases.ctx.clock(), timedelta(seconds=1), 3)
    time.sleep(1 + world.settings.event_delay_seconds + 0.2)
    assert use_cases.sweeper.sweep()[SweepOutcome.RESENT] == 1
    with world.amqp() as channel:
        method, _, body = channel.basic_get(world.topology.queue, auto_ack=True)
    assert method is not None, "nothing was published"
    (record,) = __import__("json").loads(body)["Records"]
    key = use_cases.ctx.object_keys.original(job_id)
    assert (record["eventSource"], record["eventName"]) == ("ceph:s3", "ObjectCreated:Put")
    assert record["s3"]["object"]["key"] == key
    (event,) = parse_message(body)
    assert (event.bucket, event.key) == (world.settings.bucket, key)


def test_the_backlog_gauge_reads_the_queue_depth(amqp_world):
    world = amqp_world
    gauge = world.service.ctx.backlog
    assert gauge.depth() == 0
    world.publish_raw(b"1", b"2", b"3")
    deadline = time.monotonic() + 10
    while gauge.depth() != 3:
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_the_dead_letter_queue_is_bounded_and_its_depth_is_read(world_factory):
    world = world_factory("amqp", AMQP_DEAD_LETTER_MAX_LENGTH=5)
    gauge = world.service.ctx.backlog
    with world.amqp() as channel:
        channel.confirm_delivery()
        for i in range(12):
            channel.basic_publish(world.topology.dead_letter_exchange, "", f"poison {i}".encode())
    deadline = time.monotonic() + 10
    while gauge.dead_letter_depth() != 5:
        assert time.monotonic() < deadline, gauge.dead_letter_depth()
        time.sleep(0.1)
    with world.amqp() as channel:
        _, _, oldest = channel.basic_get(world.topology.dead_letter_queue, auto_ack=False)
    assert oldest == b"poison 7"  # the oldest were dropped, the newest kept


def test_an_old_unbounded_dead_letter_queue_is_kept_with_a_warning_not_a_crash(world_factory):
    from chalicelib.adapters.amqp import declare

    world = world_factory("sqs")  # declares nothing on the broker itself
    with world.amqp() as channel:
        channel.queue_declare(world.topology.dead_letter_queue, durable=True,
                              arguments={"x-queue-type": "quorum"})
        declare(channel, world.topology)  # must not close the channel
        assert channel.is_open
        channel.queue_declare(world.topology.queue, passive=True)
