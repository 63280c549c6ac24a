"""DynamoDB's TransactionConflict, which moto never sends: two identical requests whose
transactions on one Idempotency-Key overlap. DynamoDB cancels one with reasons
[TransactionConflict, None]; that request must read the key again and replay, not answer 503.

The cancellation is DynamoDB's own response body, returned at botocore's `before-send`, so
PynamoDB and the adapter parse it exactly as they would from AWS."""
from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timezone

from botocore.awsrequest import AWSResponse

from chalicelib.adapters.dynamo_jobs import DynamoJobStore
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.usecases import UseCases
from tests.fakes import FakeObjectStore, fake_context
from tests.images import jpeg

CANCELLED = {
    "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
    "Message": "Transaction cancelled, please refer cancellation reasons for specific reasons "
               "[TransactionConflict, None]",
    "CancellationReasons": [{"Code": "TransactionConflict",
                             "Message": "Transaction is ongoing for the item"}, {"Code": "None"}],
}


class _Raw:
    def __init__(self, body: bytes):
        self._body = body

    def stream(self, **_):
        yield self._body


def test_a_transaction_conflict_replays_the_concurrent_requests_job(stack):
    settings, _, _ = stack
    conflicts = []
    store = DynamoJobStore(DynamoTable(settings.table, settings.region, settings.endpoint_url,
                                       prepare_client=lambda client: client.meta.events.register_first(
                                           "before-send.dynamodb.TransactWriteItems", concurrent_request_wins)))
    other = DynamoJobStore(DynamoTable(settings.table, settings.region, settings.endpoint_url))
    use_cases = UseCases(fake_context(settings=settings, jobs=store, objects=FakeObjectStore()))

    def concurrent_request_wins(request, **_):
        if conflicts:
            return None
        # The other request's transaction commits, ours is cancelled because of it.
        body = json.loads(request.body)
        key_put, job_put = (item["Put"] for item in body["TransactItems"] if "Put" in item)
        winner_id = "7b0e9c5e-2f4a-4d1b-9c8e-1a2b3c4d5e6f"
        _write_winner(other, key_put, job_put, winner_id)
        conflicts.append(winner_id)
        return AWSResponse(request.url, 400, {"Content-Type": "application/x-amz-json-1.0"},
                           _Raw(json.dumps(CANCELLED).encode()))

    accepted = use_cases.uploads.accept_upload("alice", jpeg(), "key-1")
    assert conflicts, "the conflict was never sent"
    assert accepted.replayed and accepted.job.job_id == conflicts[0]
    assert store.get_idempotency(accepted.job.idempotency_scope).job_id == conflicts[0]


def _write_winner(store: DynamoJobStore, key_put: dict, job_put: dict, winner_id: str) -> None:
    """What the concurrent request's own transaction wrote: the same key, its own job."""
    from chalicelib.domain.jobs import Job, JobStatus
    from chalicelib.domain.idempotency import IdempotencyRecord

    item = job_put["Item"]
    now = datetime.now(timezone.utc)
    scope = key_put["Item"]["pk"]["S"].split("#", 1)[1]
    job = Job(job_id=winner_id, owner=item["owner"]["S"], status=JobStatus.QUEUED, created_at=now,
              updated_at=now, expires_at=now.replace(year=now.year + 1),
              original_key=f"originals/{winner_id}", idempotency_scope=scope, sweep_at=now)
    record = IdempotencyRecord(scope=scope, fingerprint=key_put["Item"]["fingerprint"]["S"],
                               job_id=winner_id, expires_at=now.replace(year=now.year + 1))
    store.create_with_key(dataclasses.replace(job), record, now, 20)
