"""RabbitMQ (AMQP 0-9-1, pika) behind MinIO or Ceph's RADOS Gateway: topology, resend
publisher, backlog.

pika is imported lazily: the Lambda package does not carry it and never takes this path.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass

from chalicelib.config import Settings
from chalicelib.domain.errors import TransientError
from chalicelib.domain.events import AMQP_EVENT_BUILDERS, ObjectCreated
from chalicelib.runtime.logs import get_logger

log = get_logger("amqp")


@dataclass(frozen=True)
class Topology:
    """Built only from Settings (from_settings), so it has no defaults of its own."""

    exchange: str
    routing_key: str
    queue: str
    delivery_limit: int
    dead_letter_max_length: int
    dead_letter_ttl_seconds: int

    @property
    def dead_letter_exchange(self) -> str:
        return f"{self.exchange}.dlx"

    @property
    def dead_letter_queue(self) -> str:
        return f"{self.queue}.dlq"

    @classmethod
    def from_settings(cls, settings: Settings) -> "Topology":
        return cls(settings.amqp_exchange, settings.amqp_routing_key, settings.amqp_queue,
                   settings.amqp_delivery_limit, settings.amqp_dead_letter_max_length,
                   settings.amqp_dead_letter_ttl_seconds)


def declare(channel, topology: Topology) -> None:
    """Idempotent, durable: MinIO's exchange, a quorum queue with a delivery limit, and a
    dead-letter exchange + queue for poison and exhausted messages."""
    channel.exchange_declare(topology.exchange, exchange_type="direct", durable=True)
    channel.exchange_declare(topology.dead_letter_exchange, exchange_type="fanout", durable=True)
    _declare_dead_letter_queue(channel, topology)
    channel.queue_bind(topology.dead_letter_queue, topology.dead_letter_exchange)
    channel.queue_declare(topology.queue, durable=True, arguments={
        "x-queue-type": "quorum",
        "x-delivery-limit": topology.delivery_limit,
        "x-dead-letter-exchange": topology.dead_letter_exchange,
    })
    channel.queue_bind(topology.queue, topology.exchange, routing_key=topology.routing_key)


def _declare_dead_letter_queue(channel, topology: Topology) -> None:
    """Bounded in length (the oldest dropped first) and in age, so that poison cannot fill
    the broker. A DLQ declared unbounded by an older version keeps its arguments (RabbitMQ
    refuses to change them): say so, and go on with it."""
    import pika.exceptions

    arguments = {"x-queue-type": "quorum", "x-max-length": topology.dead_letter_max_length,
                 "x-overflow": "drop-head", "x-message-ttl": topology.dead_letter_ttl_seconds * 1000}
    probe = channel.connection.channel()  # a refusal closes the channel it came on
    try:
        probe.queue_declare(topology.dead_letter_queue, durable=True, arguments=arguments)
    except pika.exceptions.ChannelClosedByBroker as error:
        if error.reply_code != 406:  # PRECONDITION_FAILED: declared with other arguments
            raise
        log.warning("dead_letter_queue_unbounded", queue=topology.dead_letter_queue,
                    hint="delete it once it is empty; it is re-created bounded")
    finally:
        if probe.is_open:
            probe.close()


def connection_parameters(url: str):
    import pika

    params = pika.URLParameters(url)
    params.heartbeat = 30
    params.blocked_connection_timeout = 30
    params.connection_attempts = 1
    params.socket_timeout = 5
    return params


class AmqpChannel:
    """One lazily opened, self-healing channel for short calls from one process."""

    def __init__(self, url: str, topology: Topology):
        self._url = url
        self._topology = topology
        self._lock = threading.Lock()
        self._connection = None
        self._channel = None

    def _open(self):
        import pika

        if self._channel is None or not self._channel.is_open:
            self.close()
            self._connection = pika.BlockingConnection(connection_parameters(self._url))
            self._channel = self._connection.channel()
            self._channel.confirm_delivery()
            declare(self._channel, self._topology)
        return self._channel

    def call(self, fn):
        import pika.exceptions

        with self._lock:
            try:
                return fn(self._open())
            except (pika.exceptions.AMQPError, OSError) as error:
                self.close()
                raise TransientError("broker unavailable") from error

    def close(self) -> None:
        try:
            if self._connection is not None and self._connection.is_open:
                self._connection.close()
        except Exception:
            pass
        self._connection = self._channel = None


class AmqpPublisher:
    """The sweeper's resend: publishes what the storage (`shape`: MinIO or the RADOS Gateway)
    would, with publisher confirms."""

    def __init__(self, channel: AmqpChannel, topology: Topology, shape: str = "minio"):
        self._channel = channel
        self._topology = topology
        self._build = AMQP_EVENT_BUILDERS[shape]

    def publish_object_created(self, created: ObjectCreated) -> None:
        import pika

        body = json.dumps(self._build(created)).encode()
        props = pika.BasicProperties(content_type="application/json", delivery_mode=2)
        # With confirms on, basic_publish raises unless the broker took it (and routed it).
        self._channel.call(lambda ch: ch.basic_publish(
            self._topology.exchange, self._topology.routing_key, body, props, mandatory=True))


class AmqpBacklog:
    def __init__(self, channel: AmqpChannel, topology: Topology):
        self._channel = channel
        self._topology = topology

    def depth(self) -> int:
        return self._count(self._topology.queue)

    def dead_letter_depth(self) -> int:
        return self._count(self._topology.dead_letter_queue)

    def _count(self, queue: str) -> int:
        return self._channel.call(lambda ch: ch.queue_declare(queue, passive=True).method.message_count)

    def drained_before(self, now):
        """Only an empty queue tells: RabbitMQ gives no message's age. Messages in a worker's
        hands are not counted, but a worker claims its job before anything slow."""
        return now if self.depth() == 0 else None
