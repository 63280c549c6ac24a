"""BacklogGauge for any SQS queue: the sweeper reports the dead-letter queues' depths."""
from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.domain.errors import TransientError


class SqsDepth:
    def __init__(self, client, events_queue_name: str):
        self._client = client
        self._queue_name = events_queue_name
        self._queue_url = None

    def depth(self) -> int:
        try:
            if self._queue_url is None:
                self._queue_url = self._client.get_queue_url(QueueName=self._queue_name)["QueueUrl"]
            attributes = self._client.get_queue_attributes(
                QueueUrl=self._queue_url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
            return int(attributes["ApproximateNumberOfMessages"])
        except (BotoCoreError, ClientError) as error:
            raise TransientError("queue unavailable") from error
