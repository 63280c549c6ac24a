"""app.py's push handlers as a cloud stage declares them (with the table's stream), over the
in-memory fakes: what a connect costs and answers, that no client message has a handler,
and that the stream's batch runs within the invocation's time budget."""
from __future__ import annotations

import importlib.util
import json
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from chalicelib.adapters.dynamo_push import DynamoJobChanges
from chalicelib.domain.jobs import Job, JobStatus
from chalicelib.http.auth import BEARER_PROTOCOL, PUSH_PROTOCOL, mint_token
from chalicelib.runtime import deadline
from chalicelib.usecases import UseCases
from tests.fakes import (Clock, FakeJobStore, FakeObjectStore, FakePushConnections, FakePushSender, FakeRateStore,
                         ListMetrics, fake_context)
from tests.unit.test_push import _image

ROOT = Path(__file__).resolve().parents[2]
STREAM = "arn:aws:dynamodb:us-east-1:123456789012:table/image-jobs-dev/stream/2026-07-15T10:00:00.000"
START = datetime(2026, 7, 15, 10, 0, 0, 123456, tzinfo=timezone.utc)


@pytest.fixture
def stage_app(monkeypatch):
    """A fresh app.py with the stream (the tests' own `app` stays as it was), its use cases
    over fakes with a shared rate store and a rate of 5 at once."""
    monkeypatch.setenv("PUSH_STREAM_ARN", STREAM)
    monkeypatch.setenv("OWNER_BURST", "5")
    monkeypatch.setenv("OWNER_REQUESTS_PER_SECOND", "1")
    spec = importlib.util.spec_from_file_location("app_with_push", ROOT / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    service = UseCases(fake_context(settings=module.settings, jobs=FakeJobStore(), objects=FakeObjectStore(),
                                    clock=Clock(START), metrics=ListMetrics(), rates=FakeRateStore(),
                                    push_connections=FakePushConnections(), push_sender=FakePushSender(),
                                    job_changes=DynamoJobChanges()))
    module.use_cases = lambda: service
    return module, service


class LambdaContext:
    function_name = "image-jobs-dev-push_job_changes"
    aws_request_id = "7d0c9e0e-1f7a-4a44-9c4e-2d3c8c5f0a11"

    def __init__(self, seconds: float):
        self._ends = time.monotonic() + seconds

    def get_remaining_time_in_millis(self) -> int:
        return int((self._ends - time.monotonic()) * 1000)


def connect_event(module, connection_id: str, owner: str) -> dict:
    token = mint_token(owner, module.settings.jwt_secret, 600, int(time.time()))
    return {"requestContext": {"routeKey": "$connect", "eventType": "CONNECT", "connectionId": connection_id,
                               "domainName": "w9x8y7z6v5.execute-api.us-east-1.amazonaws.com", "stage": "api",
                               "apiId": "w9x8y7z6v5"},
            "headers": {"Sec-WebSocket-Protocol": f"{PUSH_PROTOCOL}, {BEARER_PROTOCOL}{token}"},
            "isBase64Encoded": False}


def test_a_connect_past_the_owners_request_rate_is_refused_with_429_before_any_upgrade(stage_app):
    module, service = stage_app
    answers = [module.push_connect(connect_event(module, f"c{n}", "churner"), None) for n in range(8)]
    assert [a["statusCode"] for a in answers] == [200] * 5 + [429] * 3
    assert int(answers[-1]["headers"]["Retry-After"]) >= 1
    assert answers[0]["headers"]["Sec-WebSocket-Protocol"] == PUSH_PROTOCOL
    assert sorted(service.ctx.push_connections.of_owner("churner")) == [f"c{n}" for n in range(5)]
    assert module.push_connect(connect_event(module, "b0", "bob"), None)["statusCode"] == 200


def test_no_client_message_has_a_handler(stage_app):
    module, _ = stage_app
    assert set(module.app.websocket_handlers) == {"$connect", "$disconnect"}
    assert not hasattr(module, "push_message")


def test_the_streams_batch_runs_within_the_invocations_time_budget(stage_app):
    """Every send, on whichever of the send threads, sees the budget of the Lambda context."""
    module, service = stage_app
    seen, lock = [], threading.Lock()
    sender = service.ctx.push_sender
    real_send = sender.send

    def send(connection_id, message):
        budget = deadline.current()
        with lock:
            seen.append(None if budget is None else budget.remaining())
        real_send(connection_id, message)

    sender.send = send
    service.ctx.push_connections.add("alice", "c1", START + timedelta(hours=2), 10, opened_at=START)
    service.ctx.clock.advance(60)
    records = [{"eventID": str(n), "eventName": "INSERT", "eventSource": "aws:dynamodb",
                "eventSourceARN": STREAM, "dynamodb": {"NewImage": _image(Job(
                    job_id=f"j{n}", owner="alice", status=JobStatus.QUEUED, created_at=START, updated_at=START,
                    expires_at=START + timedelta(days=1), original_key=f"originals/j{n}")),
                    "SequenceNumber": str(n), "SizeBytes": 100, "StreamViewType": "NEW_AND_OLD_IMAGES"}}
               for n in range(20)]
    module.push_job_changes({"Records": records}, LambdaContext(40))
    assert len(seen) == 20 and None not in seen
    assert all(0 < left <= 40 - deadline.SAFETY_SECONDS for left in seen)
    assert {json.loads(m)["job"]["job_id"] for m in sender.sent["c1"]} == {f"j{n}" for n in range(20)}
