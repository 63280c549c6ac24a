"""Every consumer of storage notifications ends in the worker's one entry,
Worker.process_storage_message: Lambda's SQS handler, the local SQS worker that runs it, and
the AMQP consumer, each as the local runner wires it (local/__main__.py)."""
from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest

import app as application
from chalicelib.config import Settings
from chalicelib.domain.errors import PoisonMessage
from chalicelib.domain.events import ObjectCreated, aws_event, minio_event
from chalicelib.runtime import deadline
from chalicelib.usecases import UseCases
from local.__main__ import prepare_worker, storage_consumer
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, fake_context
from tests.images import jpeg

BODY = json.dumps({"Records": []})


class Entry:
    """Stands in for the worker: records what reaches its one entry, and the time it had."""

    def __init__(self, error: Exception | None = None):
        self.calls: list[tuple[str | bytes, float | None]] = []
        self.error = error

    def process_storage_message(self, body, seconds=None):
        self.calls.append((body, seconds))
        if self.error is not None:
            raise self.error
        return []


@pytest.fixture
def entry(monkeypatch):
    worker = Entry()
    monkeypatch.setattr(application, "use_cases", lambda: SimpleNamespace(worker=worker))
    return worker


def sqs_message(body: str) -> dict:
    return {"MessageId": "m-1", "ReceiptHandle": "r-1", "Body": body,
            "Attributes": {"ApproximateReceiveCount": "1"}}


class Sqs:
    """The one call the local SQS worker makes after its handler returned."""

    def __init__(self):
        self.deleted = []

    def delete_message(self, QueueUrl, ReceiptHandle):
        self.deleted.append(ReceiptHandle)


class Connection:
    """pika's connection as the AMQP consumer's worker thread uses it: replies go through it."""

    def add_callback_threadsafe(self, callback):
        callback()


class Channel:
    def __init__(self):
        self.replies = []

    def basic_ack(self, tag):
        self.replies.append(("ack", tag))

    def basic_nack(self, tag, requeue):
        self.replies.append(("nack", tag))


def test_lambdas_sqs_handler_gives_each_body_to_the_entry_within_the_functions_time(entry):
    event = {"Records": [{"body": BODY, "receiptHandle": "r", "messageId": "m", "attributes": {},
                          "messageAttributes": {}, "eventSourceARN": "arn", "md5OfBody": "",
                          "eventSource": "aws:sqs", "awsRegion": "us-east-1"}]}
    application.handle_object_created(event, None)
    ((body, seconds),) = entry.calls
    assert body == BODY and seconds == application.settings.worker_timeout_seconds


def test_lambdas_sqs_handler_drops_what_the_entry_calls_poison(entry):
    entry.error = PoisonMessage("not a storage event")
    event = {"Records": [{"body": "garbage", "receiptHandle": "r", "messageId": "m"}]}
    application.handle_object_created(event, None)  # no raise: Lambda deletes it
    assert [body for body, _ in entry.calls] == ["garbage"]


def test_the_local_sqs_worker_runs_lambdas_handler_and_so_the_entry(entry):
    sqs = Sqs()
    stack = SimpleNamespace(queue_url="http://sqs/q", queue_arn="arn:aws:sqs:us-east-1:0:q")
    worker = storage_consumer(replace(application.settings, queue_backend="sqs"), application,
                              sqs, stack, 1)
    try:
        worker._run_one(sqs_message(BODY))
    finally:
        worker._pool.shutdown()
    ((body, seconds),) = entry.calls
    assert body == BODY and 0 < seconds <= application.settings.worker_timeout_seconds
    assert sqs.deleted == ["r-1"]


def test_the_amqp_consumer_gives_each_delivery_to_the_entry_and_acks_after_it(entry):
    worker = storage_consumer(replace(application.settings, queue_backend="amqp"), application,
                              None, None, 1)
    channel = Channel()
    try:
        worker._work(Connection(), channel, 7, SimpleNamespace(headers={}), BODY.encode())
    finally:
        worker._pool.shutdown()
    assert entry.calls == [(BODY.encode(), None)]
    assert channel.replies == [("ack", 7)]


START = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)


@pytest.fixture
def use_cases():
    settings = Settings(bucket="images")
    return UseCases(fake_context(settings=settings, jobs=FakeJobStore(), objects=FakeObjectStore(),
                                 clock=Clock(START)))


@pytest.mark.parametrize("shape", [aws_event, minio_event])
def test_the_entry_handles_each_object_created_event_of_a_message_in_any_shape(use_cases, shape):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    body = json.dumps(shape(ObjectCreated("images", job.original_key, 1)))
    assert use_cases.worker.process_storage_message(body) == ["ready"]
    assert use_cases.worker.process_storage_message(body.encode()) == ["duplicate"]


def test_the_entry_runs_within_the_time_it_is_given(use_cases, monkeypatch):
    seen = []
    monkeypatch.setattr(use_cases.worker, "handle_object_created",
                        lambda event: seen.append(deadline.current().remaining()))
    body = json.dumps(aws_event(ObjectCreated("images", "originals/x", 1)))
    use_cases.worker.process_storage_message(body, seconds=7)
    use_cases.worker.process_storage_message(body)
    assert 0 < seen[0] <= 7 < seen[1] <= use_cases.ctx.settings.worker_timeout_seconds


def test_the_entry_says_poison_for_a_body_no_retry_can_fix(use_cases):
    with pytest.raises(PoisonMessage):
        use_cases.worker.process_storage_message("garbage")
    assert use_cases.worker.process_storage_message(json.dumps({"Event": "s3:TestEvent"})) == []


def test_the_local_runner_builds_its_worker_before_any_event(monkeypatch):
    """As a function's init would: the decoding child started and the SDK's models loaded, so
    that the first job does not wait for them."""
    from chalicelib.imaging import sandbox

    pool = sandbox._Pool()
    monkeypatch.setattr(sandbox, "_pool", pool)
    loaded = []
    use_cases = UseCases(fake_context(settings=Settings(bucket="images", decode_cpu_seconds=2), jobs=FakeJobStore(),
                                      objects=FakeObjectStore(), load_clients=lambda: loaded.append(True)))
    monkeypatch.setattr(application, "use_cases", lambda: use_cases)
    try:
        prepare_worker(application)
        assert loaded == [True]
        assert len(pool._idle) == 1 and pool._idle[0].alive()
    finally:
        for child in list(pool._live):
            pool._end(child, kill=True)
