"""One long-polling loop over an SQS queue, shared by the local worker and the AMQP bridge."""
from __future__ import annotations

from chalicelib.runtime.logs import get_logger
from local.loop import Loop

log = get_logger("sqs_poller")


class SqsPoller(Loop):
    """Receives messages from one queue and hands each batch on.

    Subclasses say how many messages they can take now (`_wanted`) and what to do with
    them (`_dispatch`); a message is theirs to delete once its work is done.
    """

    name = "sqs-poller"
    max_pause = 1.0  # a failed receive is tried again a second later, every time

    def __init__(self, sqs, queue_url: str):
        self._sqs = sqs
        self._queue_url = queue_url
        super().__init__()

    def _wanted(self) -> int:
        return 10  # SQS's most per receive

    def _dispatch(self, messages: list[dict], wanted: int) -> None:
        raise NotImplementedError

    def _step(self) -> None:
        wanted = self._wanted()
        if not wanted:
            return
        try:
            messages = self._sqs.receive_message(
                QueueUrl=self._queue_url, MaxNumberOfMessages=wanted, WaitTimeSeconds=1,
                MessageSystemAttributeNames=["ApproximateReceiveCount"],
            ).get("Messages", [])
        except Exception:
            self._dispatch([], wanted)  # gives back what `_wanted` took
            raise
        self._dispatch(messages, wanted)

    def _failed(self, error: BaseException, pause: float) -> None:
        log.exception("sqs_receive_failed", poller=self.name)

    def _delete(self, message: dict) -> None:
        self._sqs.delete_message(QueueUrl=self._queue_url, ReceiptHandle=message["ReceiptHandle"])

    def _show_again_in(self, message: dict, seconds: int) -> None:
        self._sqs.change_message_visibility(
            QueueUrl=self._queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=seconds)
