"""The AMQP consumer (pika) for MinIO deployments: RabbitMQ delivers MinIO's events, each
body to `process` (the worker's one entry, Worker.process_storage_message).

- prefetch = concurrency: the broker never hands this process more than it can run;
- the image work runs on worker threads, never on the connection's thread (that would
  starve heartbeats); acks go back through add_callback_threadsafe, and only after the
  job's outcome is written;
- transient failures are nacked for redelivery after a pause; poison is dead-lettered;
- the connection is re-made with a growing delay (capped) when the broker goes away;
- stop() takes no more work, lets what is in hand finish and ack, then closes.
"""
from __future__ import annotations

import functools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import pika
import pika.exceptions

from chalicelib.adapters.amqp import Topology, connection_parameters, declare
from chalicelib.domain.errors import PoisonMessage, TransientError
from chalicelib.runtime import correlation
from chalicelib.runtime.logs import get_logger
from local.loop import Loop, backoff

log = get_logger("amqp_worker")

DEAD_LETTER_REPORT_SECONDS = 60.0
MAX_RECONNECT_DELAY = 30.0
MAX_RETRY_PAUSE = 30.0


class AmqpWorker(Loop):
    name = "amqp-consumer"
    # A lost connection is made again after the one back-off's pause.
    retried = (pika.exceptions.AMQPError, OSError)
    max_pause = MAX_RECONNECT_DELAY

    def __init__(self, url: str, topology: Topology, process: Callable[[bytes], object],
                 concurrency: int):
        super().__init__()
        self._url = url
        self._topology = topology
        self._process = process
        self._concurrency = concurrency
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="job")
        self._in_flight = 0
        self._lock = threading.Lock()
        self.connected = threading.Event()

    def stop(self, timeout: float = 60) -> None:
        super().stop(timeout)
        self._pool.shutdown(wait=True)

    # -- the connection thread ---------------------------------------------------------------
    def _failed(self, error: BaseException, pause: float) -> None:
        self.connected.clear()
        log.warning("amqp_connection_lost", error=type(error).__name__, retry_in=pause)

    def _step(self) -> None:
        """One connection, consumed until a stop (which returns) or its loss (which raises)."""
        connection = pika.BlockingConnection(connection_parameters(self._url))
        try:
            channel = connection.channel()
            declare(channel, self._topology)
            channel.basic_qos(prefetch_count=self._concurrency)
            tag = channel.basic_consume(
                self._topology.queue,
                functools.partial(self._on_message, connection),
            )
            self.connected.set()
            log.info("amqp_consuming", queue=self._topology.queue, prefetch=self._concurrency)
            next_report = 0.0
            while not self._stopping.is_set():
                connection.process_data_events(time_limit=0.5)
                if time.monotonic() >= next_report:
                    self._report_dead_letters(channel)
                    next_report = time.monotonic() + DEAD_LETTER_REPORT_SECONDS
            # Graceful stop: no new deliveries; let the jobs in hand finish and ack.
            channel.basic_cancel(tag)
            while self._busy():
                connection.process_data_events(time_limit=0.2)
            connection.process_data_events(time_limit=0)
        finally:
            self.connected.clear()
            if connection.is_open:
                try:
                    connection.close()
                except Exception:
                    pass

    def _report_dead_letters(self, channel) -> None:
        """The dead-letter queue's depth in the log, a warning while it holds anything
        (the cloud's SQS DLQ has an alarm instead)."""
        depth = channel.queue_declare(self._topology.dead_letter_queue, passive=True).method.message_count
        (log.warning if depth else log.info)("dead_letter_depth", queue=self._topology.dead_letter_queue,
                                             depth=depth)

    def _busy(self) -> bool:
        with self._lock:
            return self._in_flight > 0

    def _on_message(self, connection, channel, method, properties, body) -> None:
        with self._lock:
            self._in_flight += 1
        self._pool.submit(self._work, connection, channel, method.delivery_tag, properties, body)

    # -- worker threads ------------------------------------------------------------------------
    def _work(self, connection, channel, tag: int, properties, body: bytes) -> None:
        correlation.begin()  # one id per message, as Lambda's request id is in the cloud
        try:
            self._process(body)
        except PoisonMessage as error:
            log.error("poison_message_dead_lettered", reason=str(error))
            self._reply(connection, channel.basic_nack, tag, requeue=False)
        except Exception as error:
            pause = self._retry_pause(error, properties)
            if not isinstance(error, TransientError):
                log.exception("handler_failed")
            log.warning("message_retry", pause=pause, error=type(error).__name__)
            self._stopping.wait(pause)  # a stop cuts the pause short; the message goes back
            self._reply(connection, channel.basic_nack, tag, requeue=True)
        else:
            self._reply(connection, channel.basic_ack, tag)
        finally:
            with self._lock:
                self._in_flight -= 1

    @staticmethod
    def _retry_pause(error: Exception, properties) -> float:
        asked = error.retry_in if isinstance(error, TransientError) else None  # e.g. a lease's end
        deliveries = int((properties.headers or {}).get("x-delivery-count", 0))
        return backoff(deliveries, MAX_RETRY_PAUSE, asked)

    @staticmethod
    def _reply(connection, method, tag: int, **kwargs) -> None:
        try:
            connection.add_callback_threadsafe(functools.partial(method, tag, **kwargs))
        except Exception:
            # The connection is gone: the broker redelivers the message, and the handler
            # is idempotent, so nothing is lost and nothing is done twice.
            log.warning("amqp_reply_lost", delivery_tag=tag)
