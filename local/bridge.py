"""Stands in for MinIO's AMQP notifications when storage notifies SQS instead.

The embedded stack (moto) and LocalStack send S3 events to SQS; with QUEUE_BACKEND=amqp
this forwards each one to the RabbitMQ exchange in MinIO's envelope, so the AMQP consumer
runs exactly as it would behind MinIO. An SQS message is deleted only after the broker
confirmed the publish: a broker outage delays events, it never drops them.
"""
from __future__ import annotations

import threading

from chalicelib.events import PoisonMessage, parse_message
from chalicelib.logs import get_logger
from chalicelib.ports import TransientError

log = get_logger("bridge")


class SqsToAmqpBridge:
    def __init__(self, sqs, queue_url: str, publisher):
        self._sqs = sqs
        self._queue_url = queue_url
        self._publisher = publisher
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sqs-amqp-bridge", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        pause = 1.0
        while not self._stopping.is_set():
            try:
                messages = self._sqs.receive_message(
                    QueueUrl=self._queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                ).get("Messages", [])
                for message in messages:
                    self._forward(message)
                pause = 1.0
            except TransientError:
                log.warning("bridge_publish_failed", retry_in=pause)
                self._stopping.wait(pause)
                pause = min(pause * 2, 30.0)
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
                self._publisher.publish_object_created(event.bucket, event.key, event.size)
        except TransientError:
            # Make it visible again soon rather than after the whole visibility timeout.
            self._sqs.change_message_visibility(
                QueueUrl=self._queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=2)
            raise
        self._sqs.delete_message(QueueUrl=self._queue_url, ReceiptHandle=message["ReceiptHandle"])
