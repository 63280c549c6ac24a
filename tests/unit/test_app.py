"""app.py's wiring and error mapping, through Chalice's test client with in-memory stores."""
import json
import re
import sys
import time
from datetime import datetime, timezone

import pytest
from chalice.test import Client

import app as application
from chalicelib.http import responses
from chalicelib.http.auth import mint_token
from chalicelib.usecases import UseCases
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, fake_context
from tests.images import jpeg

FORBIDDEN_IN_ERRORS = ("Traceback", "originals/", "renditions/", application.settings.bucket,
                       application.settings.table, "Error", "boto", "pynamodb", "PIL")


@pytest.fixture
def use_cases(monkeypatch):
    service = UseCases(fake_context(settings=application.settings, jobs=FakeJobStore(), objects=FakeObjectStore(),
                      clock=Clock(datetime.now(timezone.utc))))
    monkeypatch.setattr(application, "use_cases", lambda: service)
    return service


@pytest.fixture
def client(use_cases):
    with Client(application.app) as c:
        yield c


def auth(owner="alice"):
    token = mint_token(owner, application.settings.jwt_secret, 300, int(time.time()))
    return {"Authorization": f"Bearer {token}"}


def assert_problem(response, status, code):
    assert response.status_code == status
    assert response.headers["Content-Type"] == "application/problem+json"
    body = json.loads(response.body)
    assert set(body) == {"type", "title", "status", "detail", "code", "instance"}
    assert body["code"] == code and body["status"] == status
    # The request's correlation id, as the X-Request-Id header and the log lines carry it.
    assert body["instance"] == f"urn:uuid:{response.headers['X-Request-Id']}"
    text = body["title"] + body["detail"]
    for word in FORBIDDEN_IN_ERRORS:
        assert word not in text
    return body


def test_raw_upload_answers_202_with_location_and_retry_after(client):
    r = client.http.post("/api/v1/images", headers={**auth(), "Content-Type": "image/jpeg"}, body=jpeg())
    assert r.status_code == 202
    body = json.loads(r.body)
    assert set(body) == {"job_id", "status", "created_at"} and body["status"] == "queued"
    assert r.headers["Location"] == f"/api/v1/image-jobs/{body['job_id']}"
    assert r.headers["Retry-After"] == "2"
    assert body["created_at"].endswith("Z")


def test_no_token_is_401_before_anything_else(client):
    r = client.http.post("/api/v1/images", headers={"Content-Type": "text/plain"}, body=b"x" * 10)
    assert_problem(r, 401, "unauthorized")
    assert r.headers["WWW-Authenticate"].startswith("Bearer")


def test_storage_down_is_503_storage_unavailable_with_retry_after(client, use_cases):
    use_cases.ctx.objects.down = True
    r = client.http.post("/api/v1/images", headers={**auth(), "Content-Type": "image/jpeg"}, body=jpeg())
    assert_problem(r, 503, "storage_unavailable")
    assert r.headers["Retry-After"] == "2"


def test_table_down_is_503_and_leaks_nothing(client, use_cases):
    use_cases.ctx.jobs.down = True
    r = client.http.get("/api/v1/image-jobs/5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0", headers=auth())
    assert_problem(r, 503, "storage_unavailable")


def test_text_body_is_415(client):
    r = client.http.post("/api/v1/images", headers={**auth(), "Content-Type": "text/plain"}, body=b"hello")
    assert_problem(r, 415, "unsupported_format")


def test_status_resource_is_not_cached_and_says_when_to_come_back(client):
    r = client.http.post("/api/v1/images", headers={**auth(), "Content-Type": "image/jpeg"}, body=jpeg())
    location = r.headers["Location"]
    got = client.http.get(location, headers=auth())
    assert got.status_code == 200
    assert got.headers["Cache-Control"] == "no-store" and got.headers["Retry-After"] == "2"
    assert set(json.loads(got.body)) == {"job_id", "status", "source", "created_at", "expires_at"}
    assert_problem(client.http.get(location, headers=auth("bob")), 404, "job_not_found")


def test_sqs_handler_processes_the_event_and_drops_poison(client, use_cases):
    r = client.http.post("/api/v1/images", headers={**auth(), "Content-Type": "image/jpeg"}, body=jpeg())
    job_id = json.loads(r.body)["job_id"]
    body = json.dumps({"Records": [{"eventName": "ObjectCreated:Put", "s3": {
        "bucket": {"name": application.settings.bucket},
        "object": {"key": f"originals/{job_id}", "size": 1, "eTag": "e"}}}]})
    for message in ("garbage", body):
        event = {"Records": [{"body": message, "receiptHandle": "r", "messageId": "m",
                              "attributes": {}, "messageAttributes": {}, "eventSourceARN": "arn",
                              "md5OfBody": "", "eventSource": "aws:sqs", "awsRegion": "us-east-1"}]}
        application.handle_object_created(event, None)
    got = json.loads(client.http.get(f"/api/v1/image-jobs/{job_id}", headers=auth()).body)
    assert got["status"] == "ready"
    assert set(got) == {"job_id", "status", "image_url", "thumb_url", "renditions", "urls_expire_at",
                        "placeholder", "phash", "source", "focus", "created_at", "finished_at", "expires_at"}
    assert set(got["renditions"]["thumb"]) == {"url", "cache_key", "width", "height", "content_type", "variants"}


class LogRecorder:
    """Stands in for the views' logger (chalicelib/http/responses.py): structlog may write to a
    stdout pytest no longer reads."""

    def __init__(self):
        self.lines = []

    def exception(self, event, **fields):
        self.lines.append({"event": event, "error": repr(sys.exc_info()[1]), **fields})


def test_our_own_fault_is_500_internal_error_with_an_id_that_is_also_in_the_log(client, use_cases, monkeypatch):
    def boom(*_):
        raise RuntimeError("pynamodb.exceptions: table image-jobs key originals/x")

    monkeypatch.setattr(use_cases.manage, "get_job", boom)
    log = LogRecorder()
    monkeypatch.setattr(responses, "log", log)
    r = client.http.get("/api/v1/image-jobs/5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0", headers=auth())
    assert r.status_code == 500 and r.headers["Content-Type"] == "application/problem+json"
    body = json.loads(r.body)
    assert set(body) == {"type", "title", "status", "detail", "code", "instance"}
    assert body["code"] == "internal_error" and "Retry-After" not in r.headers
    assert re.fullmatch(r"urn:uuid:[0-9a-f-]{36}", body["instance"])
    assert "pynamodb" not in r.body.decode() and "originals/x" not in r.body.decode()
    (line,) = log.lines
    assert line["event"] == "internal_error" and line["instance"] == body["instance"]
    assert "pynamodb.exceptions" in line["error"]  # the details stay in the log
    again = json.loads(client.http.get("/api/v1/image-jobs/5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0",
                                       headers=auth()).body)
    assert again["instance"] != body["instance"]


def test_a_dependency_that_is_down_is_still_503_not_500(client, use_cases):
    use_cases.ctx.jobs.down = True
    r = client.http.delete("/api/v1/image-jobs/5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0", headers=auth())
    assert_problem(r, 503, "storage_unavailable")


@pytest.mark.parametrize("method,path,allow", [
    ("PUT", "/api/v1/images", "POST"),
    ("GET", "/api/v1/uploads", "POST"),
    ("PATCH", "/api/v1/image-jobs/5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0", "DELETE, GET"),
    ("GET", "/api/v1/image-jobs/5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0/cancel", "POST"),
])
def test_a_method_the_route_lacks_is_405_with_allow_even_without_a_token(client, method, path, allow):
    r = client.http.request(method, path, headers={"Content-Type": "text/x-anything"})
    assert_problem(r, 405, "method_not_allowed")
    assert r.headers["Allow"] == allow


def test_routes_without_a_body_ignore_the_content_type(client):
    r = client.http.get("/api/v1/image-jobs/5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0",
                        headers={**auth(), "Content-Type": "text/x-evil<script>"})
    body = assert_problem(r, 404, "job_not_found")
    assert "evil" not in r.body.decode() and body["detail"]


def direct(client, body: bytes, content_type="application/json"):
    return client.http.post("/api/v1/uploads", headers={**auth(), "Content-Type": content_type}, body=body)


def test_direct_upload_takes_an_integral_size_written_with_a_fraction(client):
    r = direct(client, b'{"content_type": "image/png", "size": 1472.0}')
    assert r.status_code == 202 and json.loads(r.body)["upload"]["method"] == "POST"


@pytest.mark.parametrize("body,content_type", [
    (b"[" * 50_000 + b"]" * 50_000, "application/json"),
    (b'{"content_type": "image/png", "size": 1, "pad": "' + b"x" * 8000 + b'"}', "application/json"),
    (b'{"content_type": "image/png", "size": 1}', "text/plain"),
    (b'{"content_type": "image/png", "size": 1, "name": "a.png"}', "application/json"),
])
def test_direct_upload_bodies_that_are_not_the_json_object_are_400(client, body, content_type):
    assert_problem(direct(client, body, content_type), 400, "invalid_request")


def test_idempotency_key_with_a_space_at_an_end_is_400(client):
    r = client.http.post("/api/v1/images", body=jpeg(),
                         headers={**auth(), "Content-Type": "image/jpeg", "Idempotency-Key": "key "})
    assert_problem(r, 400, "invalid_request")


def test_every_label_the_upload_route_takes_is_a_binary_type_for_api_gateway():
    from chalicelib.domain import sniff
    from chalicelib.http import request_body

    binary = set(application.app.api.binary_types)
    assert set(request_body.BINARY_TYPES) <= binary
    assert sniff.ALLOWED_TYPES | {"image/pjpeg", "image/x-png"} <= binary


def test_a_webhook_delivery_runs_within_its_functions_time_budget(client, monkeypatch):
    """Every invocation has its deadline (chalicelib/runtime/deadline.py), deliveries too: the SDK's
    attempts are then checked against the time the function has left."""
    from types import SimpleNamespace

    from chalicelib.runtime import deadline

    budgets = []

    class Webhooks:
        def deliver(self, body, receipt_handle):
            budgets.append(deadline.current())

    monkeypatch.setattr(application, "use_cases", lambda: SimpleNamespace(webhooks=Webhooks()))
    event = client.events.generate_sqs_event(message_bodies=['{"event_id": "x"}'],
                                             queue_name=application.settings.webhook_queue_name)
    client.lambda_.invoke("deliver_webhook", event)
    (budget,) = budgets
    assert budget is not None
    assert 0 < budget.remaining() <= application.settings.webhook_function_timeout_seconds


def test_a_response_never_carries_another_requests_id(client):
    """Responses built from a shared headers dict once kept the X-Request-Id of the request
    that first went through the middleware with it (a DELETE's 204, a webhook's 200)."""
    first = client.http.delete("/api/v1/webhook", headers=auth())
    second = client.http.delete("/api/v1/webhook", headers=auth())
    assert first.headers["X-Request-Id"] != second.headers["X-Request-Id"]
    from chalicelib.http.responses import NO_STORE

    assert NO_STORE == {"Cache-Control": "no-store"}
