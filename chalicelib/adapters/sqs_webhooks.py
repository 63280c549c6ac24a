"""WebhookQueue on SQS: one message per copy of an event to deliver. A retry or a deferral is
a new message carrying the event's attempts, delayed by DelaySeconds up to SQS's limit; one
due later is received early and set to come back through its visibility timeout. The last
attempt's event is sent to the dead-letter queue; the queue's redrive policy still
dead-letters a message whose handler keeps failing."""
from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.domain.errors import TransientError
from chalicelib.domain.webhooks import WebhookEvent

MAX_VISIBILITY_SECONDS = 43200  # SQS's limit: 12 hours
MAX_DELAY_SECONDS = 900         # SQS's limit on DelaySeconds: 15 minutes


class SqsWebhookQueue:
    def __init__(self, client, webhook_queue_name: str, dead_letter_queue_name: str):
        self._client = client
        self._names = {"queue": webhook_queue_name, "dead_letters": dead_letter_queue_name}
        self._urls: dict[str, str] = {}

    def _url(self, which: str = "queue") -> str:
        if which not in self._urls:
            self._urls[which] = self._client.get_queue_url(QueueName=self._names[which])["QueueUrl"]
        return self._urls[which]

    def send(self, event: WebhookEvent, delay_seconds: int = 0) -> None:
        self._send("queue", event, max(0, min(MAX_DELAY_SECONDS, int(delay_seconds))))

    def dead_letter(self, event: WebhookEvent) -> None:
        self._send("dead_letters", event, 0)

    def _send(self, which: str, event: WebhookEvent, delay_seconds: int) -> None:
        try:
            self._client.send_message(QueueUrl=self._url(which), MessageBody=event.to_json(),
                                      DelaySeconds=delay_seconds)
        except (BotoCoreError, ClientError) as error:
            raise TransientError("webhook queue unavailable") from error

    def retry_later(self, receipt: str, seconds: int) -> None:
        try:
            self._client.change_message_visibility(
                QueueUrl=self._url(), ReceiptHandle=receipt,
                VisibilityTimeout=max(0, min(MAX_VISIBILITY_SECONDS, int(seconds))))
        except (BotoCoreError, ClientError) as error:
            raise TransientError("webhook queue unavailable") from error
