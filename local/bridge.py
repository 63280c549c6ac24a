"""Stands in for MinIO's AMQP notifications when storage notifies SQS instead.

The embedded stack (moto) and LocalStack send S3 events to SQS; with QUEUE_BACKEND=amqp
this forwards each one to the RabbitMQ exchange in MinIO's envelope, so the AMQP consumer
runs exactly as it would behind MinIO. An SQS message is deleted only after the broker
confirmed the publish: a broker outage delays events, it never drops them.
"""
from __future__ import annotations

from chalicelib.domain.errors import PoisonMessage, TransientError
from chalicelib.domain.events import parse_message
from chalicelib.runtime.logs import get_logger
from local.loop import backoff
from local.sqs_poller import SqsPoller

log = get_logger("bridge")

MAX_PAUSE = 30.0


class SqsToAmqpBridge(SqsPoller):
    name = "sqs-amqp-bridge"

    def __init__(self, sqs, queue_url: str, publisher):
        super().__init__(sqs, queue_url)
        self._publisher = publisher
        self._failures = 0  # publishes failed in a row

    def _dispatch(self, messages: list[dict], wanted: int) -> None:
        pause = backoff(self._failures, MAX_PAUSE)
        try:
            for message in messages:
                self._forward(message)
            self._failures = 0
        except TransientError:
            log.warning("bridge_publish_failed", retry_in=pause)
            self._stopping.wait(pause)
            self._failures += 1
        except Exception:
            log.exception("bridge_failed")
            self._stopping.wait(pause)

    def _forward(self, message: dict) -> None:
        try:
            events = parse_message(message["Body"])
        except PoisonMessage as error:
            log.error("bridge_dropped_poison", reason=str(error))
            events = []
        try:
            for event in events:
                self._publisher.publish_object_created(event)
        except TransientError:
            # Make it visible again soon rather than after the whole visibility timeout.
            self._show_again_in(message, 2)
            raise
        self._delete(message)
