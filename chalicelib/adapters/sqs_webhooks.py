"""WebhookQueue on SQS: one message per event to deliver; retries come back through the
message's visibility timeout, and the queue's redrive policy dead-letters it in the end."""
from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.domain.errors import TransientError
from chalicelib.ports import WebhookEvent

MAX_VISIBILITY_SECONDS = 43200  # SQS's limit: 12 hours


class SqsWebhookQueue:
    def __init__(self, client, events_queue_name: str):
        self._client = client
        self._queue_name = events_queue_name
        self._queue_url = None

    def _url(self) -> str:
        if self._queue_url is None:
            self._queue_url = self._client.get_queue_url(QueueName=self._queue_name)["QueueUrl"]
        return self._queue_url

    def send(self, event: WebhookEvent) -> None:
        try:
            self._client.send_message(QueueUrl=self._url(), MessageBody=event.to_json())
        except (BotoCoreError, ClientError) as error:
            raise TransientError("webhook queue unavailable") from error

    def retry_later(self, receipt: str, seconds: int) -> None:
        try:
            self._client.change_message_visibility(
                QueueUrl=self._url(), ReceiptHandle=receipt,
                VisibilityTimeout=max(0, min(MAX_VISIBILITY_SECONDS, int(seconds))))
        except (BotoCoreError, ClientError) as error:
            raise TransientError("webhook queue unavailable") from error
