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
from local.sqs_poller import SqsPoller

log = get_logger("bridge")


class SqsToAmqpBridge(SqsPoller):
    name = "sqs-amqp-bridge"

    def __init__(self, sqs, queue_url: str, publisher):
        super().__init__(sqs, queue_url)
        self._publisher = publisher
        self._pause = 1.0

    def _dispatch(self, messages: list[dict], wanted: int) -> None:
        try:
            for message in messages:
                self._forward(message)
            self._pause = 1.0
        except TransientError:
            log.warning("bridge_publish_failed", retry_in=self._pause)
            self._stopping.wait(self._pause)
            self._pause = min(self._pause * 2, 30.0)
        except Exception:
            log.exception("bridge_failed")
            self._stopping.wait(self._pause)

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
