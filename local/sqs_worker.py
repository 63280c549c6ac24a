"""The SQS worker loop: receives messages and calls the very handler Lambda runs.

A message is deleted only after the handler returned; a handler that raised leaves it to
come back after a back-off (the queue's redrive policy dead-letters it in the end).
"""
from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from chalicelib.domain.errors import TransientError
from chalicelib.runtime.logs import get_logger
from local.loop import backoff
from local.sqs_poller import SqsPoller

log = get_logger("sqs_worker")


class LambdaContext:
    """The few attributes of Lambda's context object that handlers may read."""

    function_name = "image-jobs-local-worker"

    def __init__(self, timeout_ms: int):
        self.aws_request_id = str(uuid.uuid4())
        self._deadline = time.monotonic() + timeout_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def lambda_event(message: dict[str, Any], queue_arn: str, region: str) -> dict:
    """The event Lambda's SQS event source would pass for this one message."""
    return {"Records": [{
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": message.get("MessageAttributes", {}),
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }]}


class SqsWorker(SqsPoller):
    name = "sqs-worker"

    def __init__(self, sqs, queue_url: str, queue_arn: str, region: str,
                 handler: Callable[[dict, Any], Any], concurrency: int,
                 timeout_ms: int = 60_000, max_backoff: int = 300, name: str = "sqs-worker"):
        self.name = name
        super().__init__(sqs, queue_url)
        self._queue_arn = queue_arn
        self._region = region
        self._handler = handler
        self._concurrency = concurrency
        self._timeout_ms = timeout_ms
        self._max_backoff = max_backoff
        self._slots = threading.Semaphore(concurrency)
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix=name)

    def stop(self) -> None:
        """Take no more messages; let the ones in hand finish."""
        super().stop()
        self._pool.shutdown(wait=True)

    def _wanted(self) -> int:
        # Take every free slot (up to SQS's 10): never hold more messages than can run.
        if not self._slots.acquire(timeout=1):
            return 0
        taken = 1
        while taken < min(self._concurrency, 10) and self._slots.acquire(blocking=False):
            taken += 1
        return taken

    def _dispatch(self, messages: list[dict], wanted: int) -> None:
        for _ in range(wanted - len(messages)):
            self._slots.release()
        for message in messages:
            self._pool.submit(self._run_one, message)

    def _run_one(self, message: dict) -> None:
        try:
            event = lambda_event(message, self._queue_arn, self._region)
            self._handler(event, LambdaContext(self._timeout_ms))
        except Exception as error:
            if not isinstance(error, TransientError):
                log.exception("handler_failed", message_id=message["MessageId"])
            self._back_off(message, getattr(error, "retry_in", None))
        else:
            try:
                self._delete(message)
            except Exception:
                # The work is done and recorded: a redelivery is a no-op for the handler.
                log.exception("sqs_delete_failed", message_id=message["MessageId"])
        finally:
            self._slots.release()

    def _back_off(self, message: dict, retry_in) -> None:
        count = int(message.get("Attributes", {}).get("ApproximateReceiveCount", "1"))
        # A busy job says when its lease ends; otherwise back off by how often it came.
        delay = backoff(count, self._max_backoff, retry_in, floor=1)
        try:
            self._show_again_in(message, int(delay + 0.5))
        except Exception:
            log.exception("sqs_backoff_failed", message_id=message["MessageId"])
