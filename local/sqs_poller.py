"""One long-polling loop over an SQS queue, shared by the local worker and the AMQP bridge."""
from __future__ import annotations

import threading

from chalicelib.runtime.logs import get_logger

log = get_logger("sqs_poller")


class SqsPoller:
    """A thread that receives messages from one queue and hands each batch on.

    Subclasses say how many messages they can take now (`_wanted`) and what to do with
    them (`_dispatch`); a message is theirs to delete once its work is done.
    """

    name = "sqs-poller"

    def __init__(self, sqs, queue_url: str):
        self._sqs = sqs
        self._queue_url = queue_url
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Take no more messages."""
        self._stopping.set()
        self._thread.join(timeout=30)

    def _wanted(self) -> int:
        return 10  # SQS's most per receive

    def _dispatch(self, messages: list[dict], wanted: int) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stopping.is_set():
            wanted = self._wanted()
            if not wanted:
                continue
            try:
                messages = self._sqs.receive_message(
                    QueueUrl=self._queue_url, MaxNumberOfMessages=wanted, WaitTimeSeconds=1,
                    MessageSystemAttributeNames=["ApproximateReceiveCount"],
                ).get("Messages", [])
            except Exception:
                log.exception("sqs_receive_failed", poller=self.name)
                messages = []
                self._stopping.wait(1)
            self._dispatch(messages, wanted)

    def _delete(self, message: dict) -> None:
        self._sqs.delete_message(QueueUrl=self._queue_url, ReceiptHandle=message["ReceiptHandle"])

    def _show_again_in(self, message: dict, seconds: int) -> None:
        self._sqs.change_message_visibility(
            QueueUrl=self._queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=seconds)
