"""The events queue on SQS: re-drives send the event S3 itself would send; its depth is the backlog."""
from __future__ import annotations

import json

from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.errors import TransientError
from chalicelib.events import ObjectCreated, aws_event


class SqsQueue:
    """EventPublisher (the sweeper's re-drive) and BacklogGauge on the events queue."""

    def __init__(self, client, queue_name: str):
        self._client = client
        self._queue_name = queue_name
        self._queue_url = None

    def _url(self) -> str:
        if self._queue_url is None:
            self._queue_url = self._client.get_queue_url(QueueName=self._queue_name)["QueueUrl"]
        return self._queue_url

    def publish_object_created(self, created: ObjectCreated) -> None:
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
