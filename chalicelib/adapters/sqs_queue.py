"""The events queue on SQS: re-drives send the event S3 itself would send; its depth is the backlog."""
from __future__ import annotations

import json
from urllib.parse import quote_plus

from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.ports import TransientError


def object_created_event(bucket: str, key: str, size: int) -> dict:
    return {"Records": [{
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "eventName": "ObjectCreated:Put",
        "s3": {"s3SchemaVersion": "1.0", "configurationId": "sweeper-redrive",
               "bucket": {"name": bucket},
               "object": {"key": quote_plus(key), "size": size}},
    }]}


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

    def publish_object_created(self, bucket: str, key: str, size: int) -> None:
        try:
            self._client.send_message(QueueUrl=self._url(),
                                      MessageBody=json.dumps(object_created_event(bucket, key, size)))
        except (BotoCoreError, ClientError) as error:
            raise TransientError("queue unavailable") from error

    def depth(self) -> int:
        try:
            attributes = self._client.get_queue_attributes(
                QueueUrl=self._url(), AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
            return int(attributes["ApproximateNumberOfMessages"])
        except (BotoCoreError, ClientError) as error:
            raise TransientError("queue unavailable") from error
