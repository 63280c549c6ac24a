"""Push as a use case (chalicelib/usecases/push.py) over the in-memory fakes: who gets what,
in which order, what a gone or slow connection costs, and the stream's records read as jobs."""
from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from chalicelib.adapters.dynamo_jobs import DynamoJobStore, JobItem, job_model
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.adapters.dynamo_push import DynamoJobChanges
from chalicelib.config import Settings
from chalicelib.domain.errors import PushConnectionsFull, TransientError, Unauthorized
from chalicelib.domain.jobs import TRANSITIONS, Job, JobStatus
from chalicelib.http import auth, prefer, views
from chalicelib.runtime.metrics import Metric
from chalicelib.usecases import UseCases
from chalicelib.usecases.push import OPENING_SECONDS, Fanout, PushingJobStore, Refusal
from tests.fakes import (Clock, FakeJobStore, FakeObjectStore, FakePushConnections, FakePushSender, ListMetrics,
                         fake_context)
from tests.images import jpeg

START = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)


def world(trigger_on_writes=True):
    metrics = ListMetrics()
    ctx = fake_context(settings=Settings(bucket="images", push_url="ws://push"), jobs=FakeJobStore(),
                       objects=FakeObjectStore(), clock=Clock(START), metrics=metrics,
                       push_connections=FakePushConnections(), push_sender=FakePushSender())
    use_cases = UseCases(ctx)
    fanout = Fanout(lambda job: use_cases.push.publish(job), metrics)
    if trigger_on_writes:
        ctx.jobs = PushingJobStore(ctx.jobs, fanout)
    return use_cases, fanout, metrics


def received(use_cases, connection_id):
    return [json.loads(m) for m in use_cases.ctx.push_sender.sent.get(connection_id, [])]


def created_event(job):
    from chalicelib.domain.events import ObjectCreated

    return ObjectCreated(bucket="images", key=job.original_key, size=0, etag="e")


def test_every_status_of_a_job_reaches_its_owner_in_order_as_get_shows_it():
    use_cases, fanout, _ = world()
    use_cases.push.connect("alice", "c1")
    job = use_cases.uploads.accept_upload("alice", jpeg(640, 480)).job
    use_cases.worker.handle_object_created(created_event(job))
    assert fanout.drain()
    messages = received(use_cases, "c1")
    assert [m["job"]["status"] for m in messages] == ["queued", "processing", "ready"]
    sequences = [m["sequence"] for m in messages]
    assert sequences == sorted(sequences) and len(set(sequences)) == 3
    done = use_cases.ctx.jobs.get(job.job_id)
    last = messages[-1]
    assert last["etag"] == prefer.etag(done) and last["type"] == "job"
    # The body GET shows, but for the freshly presigned URLs.
    shown = views.job_body(done, use_cases.manage.urls(done))
    assert set(last["job"]) == set(shown) and last["job"]["job_id"] == job.job_id


def test_another_owners_jobs_never_arrive():
    use_cases, fanout, _ = world()
    use_cases.push.connect("alice", "a1")
    use_cases.push.connect("bob", "b1")
    use_cases.uploads.accept_upload("bob", jpeg(64, 64))
    assert fanout.drain()
    assert received(use_cases, "a1") == [] and len(received(use_cases, "b1")) == 1


def test_every_connection_of_the_owner_gets_each_change():
    use_cases, fanout, _ = world()
    for connection in ("phone", "tablet"):
        use_cases.push.connect("alice", connection)
    use_cases.uploads.accept_upload("alice", jpeg(64, 64))
    assert fanout.drain()
    assert len(received(use_cases, "phone")) == len(received(use_cases, "tablet")) == 1


def test_a_gone_connection_is_forgotten_and_counted_and_the_others_still_get_it():
    use_cases, fanout, metrics = world()
    use_cases.push.connect("alice", "dead")
    use_cases.push.connect("alice", "alive")
    use_cases.ctx.push_sender.gone.add("dead")
    use_cases.ctx.clock.advance(OPENING_SECONDS + 1)  # both have opened
    use_cases.uploads.accept_upload("alice", jpeg(64, 64))
    assert fanout.drain()
    assert use_cases.ctx.push_connections.of_owner("alice") == ["alive"]
    assert len(received(use_cases, "alive")) == 1
    assert metrics.total(Metric.PUSH_GONE) == 1 and metrics.total(Metric.PUSH_MESSAGES) == 1


def test_a_connection_still_opening_is_kept_when_a_send_finds_it_gone():
    """API Gateway answers Gone until $connect has returned: a change in that moment must not
    make the service forget a connection that opens a moment later (it would get nothing)."""
    use_cases, fanout, _ = world()
    use_cases.push.connect("alice", "new")
    sender = use_cases.ctx.push_sender
    sender.gone.add("new")
    use_cases.ctx.clock.advance(OPENING_SECONDS - 1)
    use_cases.uploads.accept_upload("alice", jpeg(64, 64))
    assert fanout.drain()
    assert use_cases.ctx.push_connections.of_owner("alice") == ["new"]
    sender.gone.discard("new")  # open now
    use_cases.uploads.accept_upload("alice", jpeg(64, 64))
    assert fanout.drain()
    assert len(received(use_cases, "new")) == 1
    # Gone once it has had time to open: forgotten.
    sender.gone.add("new")
    use_cases.ctx.clock.advance(2)
    use_cases.uploads.accept_upload("alice", jpeg(64, 64))
    assert fanout.drain()
    assert use_cases.ctx.push_connections.of_owner("alice") == []


def test_opening_lasts_as_long_as_the_connect_function_may_run():
    config = json.loads((Path(__file__).resolve().parents[2] / ".chalice" / "config.json").read_text())
    timeouts = [stage["lambda_functions"]["websocket_connect"]["lambda_timeout"]
                for stage in config["stages"].values() if "websocket_connect" in stage.get("lambda_functions", {})]
    assert timeouts and max(timeouts) <= OPENING_SECONDS


def test_a_disconnect_forgets_the_connection():
    use_cases, _, _ = world()
    use_cases.push.connect("alice", "c1")
    use_cases.push.disconnect("c1")
    use_cases.push.disconnect("c1")  # idempotent
    assert use_cases.ctx.push_connections.of_owner("alice") == []


def test_a_connection_is_kept_past_the_gateways_two_hours():
    use_cases, _, _ = world()
    use_cases.push.connect("alice", "c1")
    _, until = use_cases.ctx.push_connections.connections["c1"]
    assert until - START > timedelta(hours=2)


def test_a_slow_client_never_delays_the_worker():
    use_cases, fanout, _ = world()
    use_cases.push.connect("alice", "slow")
    use_cases.ctx.push_sender.slow["slow"] = 0.5
    started = time.monotonic()
    job = use_cases.uploads.accept_upload("alice", jpeg(64, 64)).job
    assert use_cases.worker.handle_object_created(created_event(job)) == "ready"
    assert time.monotonic() - started < 0.5  # three sends of 0.5 s are on the fan-out's thread
    assert fanout.drain(timeout=5)
    assert len(received(use_cases, "slow")) == 3


def test_a_full_fanout_drops_and_counts_instead_of_blocking_the_write():
    metrics = ListMetrics()
    blocked = Fanout(lambda job: time.sleep(10), metrics, capacity=1)
    job = Job(job_id="j", owner="alice", status=JobStatus.QUEUED, created_at=START, updated_at=START,
              expires_at=START + timedelta(days=1), original_key="o")
    started = time.monotonic()
    for _ in range(5):
        blocked.offer(job)
    assert time.monotonic() - started < 0.5
    assert metrics.total(Metric.PUSH_FAILURES) >= 3


@pytest.mark.parametrize("write", ["create_with_key", "claim"])
def test_a_write_that_landed_but_answered_unavailable_still_reaches_the_fanout(write):
    """Every re-send of a write that committed timed out: the caller sees the table down (the
    upload's client retries, and the replay finds the job), but its status was taken, so the
    fan-out reads the job and sends what is stored, as a table's stream would."""
    use_cases, fanout, _ = world()
    use_cases.push.connect("alice", "c1")
    store = use_cases.ctx.jobs._store
    real = getattr(store, write)

    def landed_then_unavailable(*args, **kwargs):
        real(*args, **kwargs)
        setattr(store, write, real)  # once
        raise TransientError("every answer lost")

    setattr(store, write, landed_then_unavailable)
    if write == "create_with_key":
        with pytest.raises(TransientError):
            use_cases.uploads.accept_upload("alice", jpeg(64, 64), "key-1")
        job = use_cases.uploads.accept_upload("alice", jpeg(64, 64), "key-1").job  # the retry replays it
        assert use_cases.worker.handle_object_created(created_event(job)) == "ready"
        expected = ["queued", "processing", "ready"]
    else:  # the lease it took holds the job until it ends: this much has happened
        job = use_cases.uploads.accept_upload("alice", jpeg(64, 64)).job
        with pytest.raises(TransientError):
            use_cases.worker.handle_object_created(created_event(job))
        expected = ["queued", "processing"]
    assert fanout.drain()
    assert [m["job"]["status"] for m in received(use_cases, "c1")] == expected


@pytest.mark.parametrize("down", ["push_connections", "push_sender"])
def test_push_down_leaves_uploads_workers_and_reads_unaffected(down):
    use_cases, fanout, metrics = world()
    use_cases.push.connect("alice", "c1")
    getattr(use_cases.ctx, down).down = True
    job = use_cases.uploads.accept_upload("alice", jpeg(64, 64)).job
    assert use_cases.worker.handle_object_created(created_event(job)) == "ready"
    assert use_cases.manage.get_job("alice", job.job_id).status is JobStatus.READY
    assert fanout.drain()
    assert received(use_cases, "c1") == [] and metrics.total(Metric.PUSH_FAILURES) >= 1


def test_a_re_drive_is_no_change_to_a_client():
    use_cases, fanout, _ = world()
    job = use_cases.uploads.accept_upload("alice", jpeg(64, 64)).job
    use_cases.push.connect("alice", "c1")
    seen = use_cases.ctx.jobs.get(job.job_id)
    use_cases.ctx.jobs.update_if_unchanged(seen.resent(START, timedelta(minutes=1)), seen=seen)
    assert fanout.drain()
    assert received(use_cases, "c1") == []


def test_sequence_grows_with_every_move_of_the_status_diagram():
    job = Job(job_id="j", owner="o", status=JobStatus.AWAITING_UPLOAD, created_at=START,
              updated_at=START, expires_at=START, original_key="o")
    for attempt in range(3):
        for source, targets in TRANSITIONS.items():
            for target in targets:
                before = job.__class__(**{**job.__dict__, "status": source, "attempt": attempt})
                claimed = target is JobStatus.PROCESSING  # a claim takes the next attempt
                after = before.__class__(**{**before.__dict__, "status": target,
                                            "attempt": attempt + claimed})
                assert after.sequence > before.sequence, (source, target)


def test_the_connect_token_travels_as_a_subprotocol():
    settings = Settings(jwt_secret="s" * 32)
    token = auth.mint_token("alice", settings.jwt_secret, 60, int(time.time()))
    offered = f"{auth.PUSH_PROTOCOL}, {auth.BEARER_PROTOCOL}{token}"
    assert auth.push_owner(offered, settings) == "alice"
    expired = auth.mint_token("alice", settings.jwt_secret, -60, int(time.time()))
    foreign = auth.mint_token("alice", "another-secret-entirely-0123456789", 60, int(time.time()))
    for bad in (None, "", f"{auth.BEARER_PROTOCOL}{token}", auth.PUSH_PROTOCOL,
                f"{auth.PUSH_PROTOCOL}, {auth.BEARER_PROTOCOL}{expired}",
                f"{auth.PUSH_PROTOCOL}, {auth.BEARER_PROTOCOL}{foreign}",
                f"{auth.PUSH_PROTOCOL}, {auth.BEARER_PROTOCOL}{token}, {auth.BEARER_PROTOCOL}{token}"):
        with pytest.raises(Unauthorized):
            auth.push_owner(bad, settings)


def _image(job: Job) -> dict:
    model = job_model(DynamoTable("jobs", "us-east-1", None))
    store = DynamoJobStore.__new__(DynamoJobStore)
    store._model = model
    return store._to_item(job).serialize()


def test_the_streams_records_are_read_as_the_jobs_they_moved():
    queued = Job(job_id="j1", owner="alice", status=JobStatus.QUEUED, created_at=START, updated_at=START,
                 expires_at=START + timedelta(days=1), original_key="originals/j1")
    processing = queued.__class__(**{**queued.__dict__, "status": JobStatus.PROCESSING, "attempt": 1})
    resent = queued.resent(START, timedelta(minutes=1))
    records = [
        {"eventName": "INSERT", "dynamodb": {"NewImage": _image(queued)}},
        {"eventName": "MODIFY", "dynamodb": {"OldImage": _image(queued), "NewImage": _image(resent)}},
        {"eventName": "MODIFY", "dynamodb": {"OldImage": _image(queued), "NewImage": _image(processing)}},
        {"eventName": "MODIFY", "dynamodb": {"NewImage": {"pk": {"S": "wait#alice#0"}}}},
        {"eventName": "REMOVE", "dynamodb": {"OldImage": _image(processing)}},
    ]
    jobs = DynamoJobChanges().changed_jobs(records)
    assert [(j.job_id, j.status, j.owner) for j in jobs] == [
        ("j1", JobStatus.QUEUED, "alice"), ("j1", JobStatus.PROCESSING, "alice")]


def test_stream_records_reach_the_owner_through_publish_changes():
    use_cases, _, _ = world(trigger_on_writes=False)
    use_cases.ctx.job_changes = DynamoJobChanges()
    use_cases.push.connect("alice", "c1")
    queued = Job(job_id="j1", owner="alice", status=JobStatus.QUEUED, created_at=START, updated_at=START,
                 expires_at=START + timedelta(days=1), original_key="originals/j1")
    assert use_cases.push.publish_changes([{"eventName": "INSERT", "dynamodb": {"NewImage": _image(queued)}}]) == 1
    assert use_cases.push.publish_changes([{"eventName": "INSERT", "dynamodb": {"NewImage": {"pk": 5}}}]) == 0


def test_past_the_owners_cap_a_connect_is_refused_counted_and_recorded_nowhere():
    use_cases, _, metrics = world()
    cap = use_cases.ctx.settings.max_push_connections_per_owner
    for n in range(cap):
        use_cases.push.connect("alice", f"a{n}")
    use_cases.push.connect("alice", "a0")  # a retried connect is no new connection
    with pytest.raises(PushConnectionsFull):
        use_cases.push.connect("alice", "one-too-many")
    assert "one-too-many" not in use_cases.ctx.push_connections.of_owner("alice")
    use_cases.push.connect("bob", "b0")  # another owner's cap is its own
    use_cases.push.disconnect("a3")
    use_cases.push.connect("alice", "room-again")
    assert ("PushRefused", {"Reason": "full"}, 1.0) in metrics.points()
    assert metrics.total(Metric.PUSH_CONNECTS) == cap + 3 and metrics.total(Metric.PUSH_DISCONNECTS) == 1


def test_a_connect_that_cannot_be_recorded_is_counted_as_unavailable():
    use_cases, _, metrics = world()
    use_cases.ctx.push_connections.down = True
    with pytest.raises(TransientError):
        use_cases.push.connect("alice", "c1")
    use_cases.push.refused(Refusal.UNAUTHORIZED)  # what app.py counts for a bad token
    refused = [(dims, value) for name, dims, value in metrics.points() if name == "PushRefused"]
    assert refused == [({"Reason": "unavailable"}, 1.0), ({"Reason": "unauthorized"}, 1.0)]


def test_a_fanout_writes_its_messages_gone_and_latency_as_metric_lines():
    use_cases, _, metrics = world(trigger_on_writes=False)
    use_cases.push.connect("alice", "alive")
    use_cases.push.connect("alice", "dead")
    use_cases.ctx.push_sender.gone.add("dead")
    use_cases.ctx.clock.advance(OPENING_SECONDS + 1)  # both have opened
    changed = use_cases.ctx.clock() - timedelta(seconds=0.25)
    job = Job(job_id="j1", owner="alice", status=JobStatus.QUEUED, created_at=changed, updated_at=changed,
              expires_at=START + timedelta(days=1), original_key="originals/j1")
    assert use_cases.push.publish(job) == 1
    (line,) = [json.loads(line) for line in metrics.lines if "PushMessages" in line]
    units = {m["Name"]: m["Unit"] for m in line["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert units == {"PushMessages": "Count", "PushGone": "Count", "PushLatency": "Milliseconds"}
    assert (line["PushMessages"], line["PushGone"], line["PushLatency"]) == ([1.0], [1.0], [250.0])
    assert "PushFailures" not in line  # none failed: no zero written
    assert use_cases.ctx.push_connections.of_owner("alice") == ["alive"]


def test_a_gone_connection_leaves_its_owners_set_even_when_its_own_entry_has_expired():
    """The fan-out knows the owner; a send that finds a connection gone cleans it by that,
    so an expired entry never holds a place under the owner's cap."""
    use_cases, _, _ = world(trigger_on_writes=False)
    registry = use_cases.ctx.push_connections
    calls = []
    remove = registry.remove
    registry.remove = lambda cid, owner=None, opened_before=None: (calls.append((cid, owner)),
                                                                   remove(cid, owner, opened_before))
    use_cases.push.connect("alice", "dead")
    use_cases.ctx.push_sender.gone.add("dead")
    use_cases.ctx.clock.advance(OPENING_SECONDS + 1)
    job = Job(job_id="j1", owner="alice", status=JobStatus.QUEUED, created_at=START, updated_at=START,
              expires_at=START + timedelta(days=1), original_key="originals/j1")
    use_cases.push.publish(job)
    assert calls == [("dead", "alice")]


def test_a_streams_batch_sends_different_jobs_side_by_side_and_each_jobs_changes_in_order():
    """One shard is read by one invocation at a time: its sends one after another would cap
    the shard at 1 / (send time) changes a second."""
    use_cases, _, _ = world(trigger_on_writes=False)
    use_cases.ctx.job_changes = DynamoJobChanges()
    use_cases.push.connect("alice", "slow")
    use_cases.ctx.push_sender.slow["slow"] = 0.2
    records = []
    for n in range(8):
        queued = Job(job_id=f"j{n}", owner="alice", status=JobStatus.QUEUED, created_at=START,
                     updated_at=START, expires_at=START + timedelta(days=1), original_key=f"originals/j{n}")
        processing = queued.__class__(**{**queued.__dict__, "status": JobStatus.PROCESSING, "attempt": 1})
        records += [{"eventName": "INSERT", "dynamodb": {"NewImage": _image(queued)}},
                    {"eventName": "MODIFY", "dynamodb": {"OldImage": _image(queued), "NewImage": _image(processing)}}]
    started = time.monotonic()
    assert use_cases.push.publish_changes(records) == 16
    assert time.monotonic() - started < 16 * 0.2 / 2  # 3.2 s one after another
    for n in range(8):
        statuses = [m["job"]["status"] for m in received(use_cases, "slow") if m["job"]["job_id"] == f"j{n}"]
        assert statuses == ["queued", "processing"]


def test_a_connect_takes_from_the_owners_request_rate_that_rest_requests_take_from_too():
    """One token churning connects (each a function run, table writes and a draw on the
    account's new-connection rate) meets the same per-owner rate, in the shared bucket, as
    its REST requests: 429 at connect past it, and another owner is never refused for it."""
    from chalicelib.domain.errors import RateLimited
    from tests.fakes import FakeRateStore

    metrics = ListMetrics()
    settings = Settings(bucket="images", push_url="ws://push", owner_requests_per_second=1, owner_burst=5)
    ctx = fake_context(settings=settings,
                       jobs=FakeJobStore(), objects=FakeObjectStore(), clock=Clock(START), metrics=metrics,
                       push_connections=FakePushConnections(), push_sender=FakePushSender(), rates=FakeRateStore())
    use_cases = UseCases(ctx)
    # The process's own bucket refills by the monotonic clock: here it stands still with the
    # context's clock, so the count below does not depend on how fast this machine loops.
    use_cases.admission._monotonic = lambda: 0.0
    accepted = refused = 0
    for n in range(2000):  # connect, disconnect, again
        try:
            use_cases.push.connect("churner", f"c{n}")
            use_cases.push.disconnect(f"c{n}")
            accepted += 1
        except RateLimited as limited:
            assert limited.retry_after >= 1
            refused += 1
    assert accepted == 5 and refused == 1995
    assert ctx.push_connections.of_owner("churner") == []
    with pytest.raises(RateLimited):  # the connects spent the REST requests' rate too
        use_cases.admission.check_rate("churner")
    use_cases.push.connect("bob", "b1")
    assert ("PushRefused", {"Reason": "rate"}, 1.0) in metrics.points()
    assert metrics.total(Metric.PUSH_CONNECTS) == 6
    # ...and the REST requests spend the connects' rate.
    for _ in range(4):
        use_cases.admission.check_rate("carol")
    use_cases.push.connect("carol", "c-last")
    with pytest.raises(RateLimited):
        use_cases.push.connect("carol", "c-over")


def test_a_streams_batch_ends_within_its_time_budget_however_slow_the_gateway():
    """A management API at 1 s a send: a batch of 100 changes to an owner with 10 connections
    is 1,000 sends, far past the function's 60 s. Within the invocation's budget the sends it
    has no time for are dropped and counted, never waited for, and nothing raises: a batch
    that failed or timed out would be retried and hold the shard's later changes back."""
    import threading

    from chalicelib.runtime import deadline

    use_cases, _, metrics = world(trigger_on_writes=False)
    use_cases.ctx.job_changes = DynamoJobChanges()
    for n in range(10):
        use_cases.push.connect("alice", f"c{n}")
    use_cases.ctx.clock.advance(OPENING_SECONDS + 1)
    now, lock = [0.0], threading.Lock()
    sender = use_cases.ctx.push_sender
    real_send = sender.send

    def one_second_a_send(connection_id, message):
        with lock:
            now[0] += 1.0
        real_send(connection_id, message)

    sender.send = one_second_a_send
    records = [{"eventName": "INSERT", "dynamodb": {"NewImage": _image(Job(
        job_id=f"j{n}", owner="alice", status=JobStatus.QUEUED, created_at=START, updated_at=START,
        expires_at=START + timedelta(days=1), original_key=f"originals/j{n}"))}} for n in range(100)]
    limits = deadline.SdkLimits.for_settings(use_cases.ctx.settings)
    with deadline.invocation(60, limits, monotonic=lambda: now[0]):
        sent = use_cases.push.publish_changes(records)  # on the send threads, as in Lambda
    assert now[0] < 60 - deadline.SAFETY_SECONDS
    assert 0 < sent < 60
    reached = {m["job"]["job_id"] for n in range(10) for m in received(use_cases, f"c{n}")}
    # Counted: each message not sent to a connection read, each change whose were not read.
    assert metrics.total(Metric.PUSH_FAILURES) >= 100 - len(reached)
