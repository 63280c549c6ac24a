"""The events queue on SQS: a resend sends the event S3 itself would send; its depth is the backlog."""
from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Optional

from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.domain.errors import TransientError

if TYPE_CHECKING:
    from chalicelib.domain.events import ObjectCreated


class SqsEventsQueue:
    """EventPublisher (the sweeper's resend) and BacklogGauge on the events queue."""

    # Waiting, in workers' hands, and delayed: a queue with none of them holds no message.
    _COUNTS = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
               "ApproximateNumberOfMessagesDelayed")

    def __init__(self, client, events_queue_name: str, oldest_message=None):
        self._client = client
        self._queue_name = events_queue_name
        self._queue_url = None
        # Where the age of the oldest message comes from when the queue is not empty
        # (CloudWatch in AWS and on the host's LocalStack, local/localstack_boot.py; moto has none).
        self._oldest_message = oldest_message

    def _url(self) -> str:
        if self._queue_url is None:
            self._queue_url = self._client.get_queue_url(QueueName=self._queue_name)["QueueUrl"]
        return self._queue_url

    def publish_object_created(self, created: ObjectCreated) -> None:
        from chalicelib.domain.events import aws_event  # the sweeper's resend only: not on a GET's path

        try:
            self._client.send_message(QueueUrl=self._url(), MessageBody=json.dumps(aws_event(created)))
        except (BotoCoreError, ClientError) as error:
            raise TransientError("queue unavailable") from error

    def depth(self) -> int:
        try:
            attributes = self._client.get_queue_attributes(
                QueueUrl=self._url(), AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
            return int(attributes["ApproximateNumberOfMessages"])
        except (BotoCoreError, ClientError) as error:
            raise TransientError("queue unavailable") from error

    def drained_before(self, now: datetime) -> Optional[datetime]:
        try:
            attributes = self._client.get_queue_attributes(
                QueueUrl=self._url(), AttributeNames=list(self._COUNTS))["Attributes"]
        except (BotoCoreError, ClientError) as error:
            raise TransientError("queue unavailable") from error
        if all(int(attributes.get(name, "0")) == 0 for name in self._COUNTS):
            return now
        if self._oldest_message is None:
            return None
        return self._oldest_message.sent_after(now)
