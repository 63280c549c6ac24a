"""Metrics as EMF lines (chalicelib/runtime/metrics.py): their shape, their low-cardinality dimensions,
and the lines of a known run through the use cases and the API, parsed back and checked."""
import json
import time
from datetime import datetime, timedelta, timezone

import pytest
from chalice.test import Client

import app as application
from chalicelib.config import Settings
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.vocabulary import ErrorCode
from chalicelib.http.auth import mint_token
from chalicelib.runtime.metrics import Dimension, EmfMetrics, Metric, QueueName, Route, emf_line
from chalicelib.usecases import UseCases
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, FakeQueue, ListMetrics, fake_context
from tests.images import jpeg

T0 = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)


def test_an_emf_line_names_namespace_units_and_both_dimension_sets():
    record = json.loads(emf_line("image-jobs-dev", {Metric.JOBS_FAILED: 1, Metric.ATTEMPTS: 3},
                                 {Dimension.CODE: ErrorCode.INVALID_IMAGE}))
    (directive,) = record["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "ImageJobs"
    # In all (the alarms' series) and per code.
    assert directive["Dimensions"] == [["service"], ["service", "Code"]]
    assert {m["Name"]: m["Unit"] for m in directive["Metrics"]} == {"JobsFailed": "Count", "Attempts": "Count"}
    assert record["service"] == "image-jobs-dev" and record["Code"] == "invalid_image"
    assert record["JobsFailed"] == [1.0] and record["Attempts"] == [3.0]
    assert isinstance(record["_aws"]["Timestamp"], int)
    timing = json.loads(emf_line("s", {Metric.END_TO_END: 1234.5}))
    assert timing["_aws"]["CloudWatchMetrics"][0]["Metrics"] == [{"Name": "EndToEnd", "Unit": "Milliseconds"}]


@pytest.mark.parametrize("dimensions", [
    {Dimension.CODE: "5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0"},   # a job id
    {Dimension.ROUTE: "alice"},                                  # an owner
    {"Owner": Route.IMAGES},                                     # a name that is no Dimension
])
def test_free_text_can_never_become_a_dimension(dimensions):
    with pytest.raises(TypeError):
        emf_line("s", {Metric.JOBS_ACCEPTED: 1}, dimensions)
    lines = []
    EmfMetrics("s", write=lines.append).emit({Metric.JOBS_ACCEPTED: 1}, dimensions)  # in service: a log line, no crash
    assert lines == []


def known_run():
    """Four uploads and a replay, two ready after 5 s, one invalid, one cancelled, one left
    queued until the sweeper resends it."""
    clock = Clock(T0)
    metrics = ListMetrics()
    objects = FakeObjectStore(clock)
    # An empty queue: the left job's storage event is known lost, so the sweeper resends it.
    queue = FakeQueue(clock)
    uc = UseCases(fake_context(settings=Settings(), jobs=FakeJobStore(), objects=objects, clock=clock,
                               metrics=metrics, publisher=queue, backlog=queue))
    bucket = uc.ctx.settings.bucket
    first = uc.uploads.accept_upload("alice", jpeg(), "key-1").job
    uc.uploads.accept_upload("alice", jpeg(), "key-1")  # a replay: no new job
    second = uc.uploads.accept_upload("bob", jpeg(640, 480)).job
    broken = uc.uploads.accept_upload("bob", jpeg()).job
    direct = uc.direct_uploads.create_direct_upload("carol", "image/png", 1000).job
    left = uc.uploads.accept_upload("dave", jpeg()).job
    clock.advance(5)
    for job in (first, second):
        uc.worker.handle_object_created(ObjectCreated(bucket, job.original_key, 1))
    objects.objects[broken.original_key] = (b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "image/png")
    uc.worker.handle_object_created(ObjectCreated(bucket, broken.original_key, 1))
    uc.manage.cancel("carol", direct.job_id)
    clock.advance(uc.ctx.settings.queue_timeout_seconds)
    uc.sweeper.sweep()
    return metrics, [first, second, broken, direct, left]


def test_the_metric_lines_of_a_known_run():
    metrics, jobs = known_run()
    assert metrics.total("JobsAccepted", Route="images") == 4
    assert metrics.total("JobsAccepted", Route="uploads") == 1
    assert metrics.total("JobsReady") == 2
    assert metrics.total("JobsFailed") == 1 and metrics.total("JobsFailed", Code="invalid_image") == 1
    assert metrics.total("JobsCancelled") == 1
    assert metrics.total("Redrives") == 1
    # Created at T0, claimed and ready 5 s later on the fake clock.
    end_to_end = [v for name, _, v in metrics.points() if name == "EndToEnd"]
    assert end_to_end == [5000.0, 5000.0]
    waits = [v for name, _, v in metrics.points() if name == "QueueWait"]
    assert waits == [5000.0, 5000.0, 5000.0]
    assert len([v for name, _, v in metrics.points() if name == "ProcessingTime"]) == 3
    assert [v for name, _, v in metrics.points() if name == "Attempts"] == [1.0, 1.0, 1.0]
    # No id and no owner anywhere in a dimension.
    secrets = {j.job_id for j in jobs} | {"alice", "bob", "carol", "dave"}
    for line in metrics.lines:
        record = json.loads(line)
        dims = {n for d in record["_aws"]["CloudWatchMetrics"][0]["Dimensions"] for n in d}
        assert not {str(record[n]) for n in dims} & secrets


def test_the_sweeper_reports_queue_and_dead_letter_depths():
    class Gauge:
        def __init__(self, depth):
            self.value = depth

        def depth(self):
            return self.value

    metrics = ListMetrics()
    ctx = fake_context(settings=Settings(), jobs=FakeJobStore(), objects=FakeObjectStore(), metrics=metrics,
                       gauges={(Metric.DEAD_LETTERS, QueueName.WEBHOOKS): Gauge(3),
                          (Metric.QUEUE_DEPTH, QueueName.EVENTS): Gauge(12)})
    UseCases(ctx).sweeper.sweep()
    assert metrics.points() == [("DeadLetters", {"Queue": "webhooks"}, 3.0),
                                ("QueueDepth", {"Queue": "events"}, 12.0)]


# -- the API -------------------------------------------------------------------------------

@pytest.fixture
def api(monkeypatch):
    class Backlog:
        depth_now = 0

        def depth(self):
            return self.depth_now

    backlog = Backlog()
    uc = UseCases(fake_context(settings=application.settings, jobs=FakeJobStore(), objects=FakeObjectStore(),
                               backlog=backlog, metrics=ListMetrics(), clock=Clock(datetime.now(timezone.utc))))
    metrics = ListMetrics()
    monkeypatch.setattr(application, "use_cases", lambda: uc)
    monkeypatch.setattr(application, "api_metrics", metrics)
    with Client(application.app) as client:
        yield client, metrics, backlog


def test_every_request_is_counted_and_shed_load_is_told_apart_from_faults(api):
    client, metrics, backlog = api
    token = mint_token("alice", application.settings.jwt_secret, 300, int(time.time()))
    auth = {"Authorization": f"Bearer {token}"}
    client.http.get("/api/v1/image-jobs/00000000-0000-4000-8000-000000000000", headers=auth)  # 404
    client.http.get("/api/v1/webhook", headers={})  # 401
    assert client.http.post("/api/v1/images", headers={**auth, "Content-Type": "image/jpeg"},
                            body=jpeg()).status_code == 202
    backlog.depth_now = application.settings.max_backlog + 1
    application.use_cases().ctx.clock.advance(application.settings.backlog_cache_seconds)
    assert client.http.post("/api/v1/images", headers={**auth, "Content-Type": "image/jpeg"},
                            body=jpeg()).status_code == 503
    assert metrics.total("ApiRequests") == 4
    assert len([v for name, _, v in metrics.points() if name == "ApiLatency"]) == 4
    assert metrics.total("ApiProblems") == 3
    assert metrics.total("ApiProblems", Code="job_not_found") == 1
    assert metrics.total("ApiProblems", Code="unauthorized") == 1
    assert metrics.total("RequestsShed", Code="overloaded") == 1
    assert metrics.total("ApiServerErrors") == 0  # a 503 overloaded is shedding, not a fault


def test_a_fault_counts_as_a_server_error_and_its_instance_is_the_logged_correlation_id(api, monkeypatch, capsys):
    client, metrics, _ = api
    from chalicelib.domain.errors import TransientError

    def down(*_):
        raise TransientError("table unavailable")

    monkeypatch.setattr(application.use_cases().manage, "get_job", down)
    token = mint_token("alice", application.settings.jwt_secret, 300, int(time.time()))
    response = client.http.get("/api/v1/image-jobs/00000000-0000-4000-8000-000000000000",
                               headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 503
    assert metrics.total("ApiServerErrors") == 1 and metrics.total("ApiServerErrors", Code="storage_unavailable") == 1
    instance = json.loads(response.body)["instance"]
    request_id = response.headers["X-Request-Id"]
    assert instance == f"urn:uuid:{request_id}"
    logged = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    events = {r["event"] for r in logged if r.get("correlation_id") == request_id}
    assert {"backend_unavailable", "http_request"} <= events


class _Lines:
    def __init__(self):
        self.lines = []

    def info(self, event, **fields):
        self.lines.append({"event": event, **fields})


@pytest.mark.parametrize("log_every_request,expected", [(False, [404]), (True, [202, 404])])
def test_the_access_line_is_written_for_errors_and_for_every_request_only_when_asked(
        api, monkeypatch, log_every_request, expected):
    """The cloud's default writes no line for a success, so a cold GET never loads structlog;
    the local runner sets LOG_EVERY_REQUEST. Every request is counted either way."""
    client, metrics, _ = api
    lines = _Lines()
    monkeypatch.setattr(application, "access_log", lines)
    monkeypatch.setattr(application, "settings",
                        Settings.from_environ({"LOG_EVERY_REQUEST": "1" if log_every_request else "0",
                                               "LOCAL_RUNNER": "1"}))
    token = mint_token("alice", application.settings.jwt_secret, 300, int(time.time()))
    auth = {"Authorization": f"Bearer {token}"}
    assert client.http.post("/api/v1/images", headers={**auth, "Content-Type": "image/jpeg"},
                            body=jpeg()).status_code == 202
    client.http.get("/api/v1/image-jobs/00000000-0000-4000-8000-000000000000", headers=auth)  # 404
    assert [line["status"] for line in lines.lines] == expected
    assert all(line["event"] == "http_request" for line in lines.lines)
    assert metrics.total("ApiRequests") == 2


def test_direct_uploads_are_counted_by_method_and_each_resume_by_its_method():
    clock = Clock(T0)
    metrics = ListMetrics()
    part = 5 * 1024 * 1024
    uc = UseCases(fake_context(settings=Settings(multipart_min_bytes=2 * part, multipart_part_bytes=part),
                               jobs=FakeJobStore(), objects=FakeObjectStore(clock), clock=clock,
                               metrics=metrics, publisher=FakeQueue(clock), backlog=FakeQueue(clock)))
    create = uc.direct_uploads.create_direct_upload
    create("alice", "image/jpeg", 1000)  # the form, the default method
    create("alice", "image/jpeg", 6 * part, method="PUT", idempotency_key="k")
    create("alice", "image/jpeg", 6 * part, method="PUT", idempotency_key="k")  # a replay: not counted
    parts = create("alice", "image/jpeg", 3 * part, method="multipart").job
    uc.direct_uploads.current_upload("alice", parts.job_id)
    uc.direct_uploads.current_upload("alice", parts.job_id)
    assert [metrics.total("UploadsCreated", Method=m) for m in ("POST", "PUT", "multipart")] == [1, 1, 1]
    assert metrics.total("UploadsCreated") == 3 and metrics.total("JobsAccepted", Route="uploads") == 3
    assert metrics.total("UploadsResumed", Method="multipart") == 2 and metrics.total("UploadsResumed") == 2
    created = [json.loads(line) for line in metrics.lines if "UploadsCreated" in json.loads(line)]
    assert [r["Method"] for r in created] == ["POST", "PUT", "multipart"]
    assert created[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["service"], ["service", "Method"]]
