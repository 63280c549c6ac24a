"""The time budget through the real SDK clients: an attempt the invocation cannot afford is
never started, so the upload's compensation runs before Lambda's deadline even when storage
hangs. Storage here is a port that accepts connections and never answers."""
from __future__ import annotations

import socket
import threading
import time

import pytest

from chalicelib.bootstrap import build_use_cases
from chalicelib.domain.errors import StorageUnavailable, TransientError
from chalicelib.domain.jobs import JobStatus
from chalicelib.runtime import deadline
from chalicelib.runtime.deadline import SdkLimits
from local.provision import provision
from local.services import aws_client
from tests.images import jpeg


class Blackhole:
    """Accepts TCP connections, reads what comes, answers nothing: a hung dependency."""

    def __init__(self):
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.port = self.server.getsockname()[1]
        self.accepted = 0
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.accepted += 1
            self.held.append(conn)
            threading.Thread(target=self._drain, args=(conn,), daemon=True).start()

    @staticmethod
    def _drain(conn):
        try:
            while conn.recv(65536):
                pass
        except OSError:
            pass

    def close(self):
        self.server.close()
        for conn in self.held:
            conn.close()


@pytest.fixture(scope="module")
def hung_storage(moto_endpoint):
    """One stack for the module (each test uses its own keys)."""
    import uuid

    from chalicelib.config import Settings

    hole = Blackhole()
    suffix = uuid.uuid4().hex[:10]
    # A 6 s API function keeps the test short; the arithmetic is the same at 25 s.
    settings = Settings(endpoint_url=moto_endpoint, bucket=f"budget-{suffix}", table=f"budget-{suffix}",
                        events_queue_name=f"budget-{suffix}", api_timeout_seconds=6,
                        s3_endpoint_url=f"http://127.0.0.1:{hole.port}")
    clients = {n: aws_client(n, settings.region, settings.endpoint_url) for n in ("sqs", "dynamodb")}
    s3 = aws_client("s3", settings.region, settings.endpoint_url)  # provision the bucket on moto
    provision(settings, clients["sqs"], s3, clients["dynamodb"])
    yield build_use_cases(settings), hole
    hole.close()


def test_a_hanging_store_gives_up_in_time_for_the_compensation(hung_storage):
    use_cases, hole = hung_storage
    settings = use_cases.ctx.settings
    limits = SdkLimits.for_settings(settings)
    started = time.monotonic()
    with deadline.invocation(settings.api_timeout_seconds, limits):
        with pytest.raises(StorageUnavailable):
            use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    elapsed = time.monotonic() - started
    # Done before Lambda would have killed the function, compensation included.
    assert elapsed < settings.api_timeout_seconds - 0.5, elapsed
    assert hole.accepted >= 1  # storage was really tried, and hung
    (job_id,) = [k for k in _job_ids(use_cases)]
    job = use_cases.ctx.jobs.get(job_id)
    assert job.status is JobStatus.FAILED and job.error_code == "storage_unavailable"
    assert use_cases.ctx.jobs.get_idempotency(job.idempotency_scope) is None  # the key is free


def test_an_attempt_the_budget_cannot_afford_is_never_sent(hung_storage):
    use_cases, hole = hung_storage
    limits = SdkLimits.for_settings(use_cases.ctx.settings)
    before = hole.accepted
    started = time.monotonic()
    # 1 s of safety and the 2-attempt reserve leave nothing of a 3 s invocation.
    with deadline.invocation(3, limits):
        with pytest.raises(TransientError):
            use_cases.ctx.objects.put("originals/x", b"x", "image/jpeg")
        with pytest.raises(TransientError):
            use_cases.ctx.jobs.get("5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0")
        # ... but compensation may spend the reserve.
        with deadline.compensating():
            assert use_cases.ctx.jobs.get("5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0") is None
    assert time.monotonic() - started < 1.0
    assert hole.accepted == before


def test_the_limits_fit_every_function_of_the_stages():
    """One attempt of one call is a sixth of the shortest function at most, and the worst
    case of one call (all attempts, botocore's backoff) leaves the compensation room."""
    for shortest in (6, 25, 50, 60):
        limits = SdkLimits.within(shortest)
        assert limits.attempt_seconds <= shortest / 6 + 0.01
        worst_backoff = sum(min(20, 2 ** n) for n in range(limits.max_attempts - 1))
        worst_call = limits.max_attempts * limits.attempt_seconds + worst_backoff
        reserve = deadline.RESERVED_ATTEMPTS * limits.attempt_seconds
        assert worst_call <= shortest - deadline.SAFETY_SECONDS - reserve, (shortest, limits)
    assert SdkLimits.within(25).max_attempts == 3  # the API: all of botocore's default


def _job_ids(use_cases):
    from chalicelib.domain.jobs import DUE_SHARDS, TERMINAL

    ids = set()
    for status in (JobStatus.QUEUED, *TERMINAL):
        for shard in range(DUE_SHARDS):
            later = use_cases.ctx.clock() + use_cases.ctx.retention * 2
            ids |= {j.job_id for j in use_cases.ctx.jobs.due(status, later, 10, shard=shard)}
    return ids
