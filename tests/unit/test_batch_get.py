"""DynamoJobStore's BatchGetItem: keys DynamoDB leaves unprocessed are asked again, with
backoff, until read or the retries run out (moto never leaves any, so a stub answers here)."""
import pytest

from chalicelib.adapters import dynamo_jobs
from chalicelib.adapters.dynamo_jobs import DynamoJobStore
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.domain.errors import TransientError
from chalicelib.domain.jobs import JobStatus

TABLE = "jobs"
IDS = ["5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0", "6b4f3d2e-1c0a-4f9e-b8d7-c6b5a4f3e2d1"]


def raw(job_id):
    return {"pk": {"S": f"job#{job_id}"}, "status": {"S": "queued"}, "attempt": {"N": "0"},
            "original_key": {"S": f"originals/{job_id}"}}


def unprocessed(*job_ids):
    return {TABLE: {"Keys": [{"pk": {"S": f"job#{i}"}} for i in job_ids]}}


@pytest.fixture
def store(monkeypatch):
    pauses = []
    monkeypatch.setattr(dynamo_jobs, "_sleep", pauses.append)
    store = DynamoJobStore(DynamoTable(TABLE, "us-east-1", "http://127.0.0.1:9"))  # never reached
    store.pauses = pauses
    return store


def answering(store, answers):
    asked = []

    def batch_get_item(table, keys, consistent_read=None, attributes_to_get=None):
        asked.append(([k["pk"] for k in keys], consistent_read, attributes_to_get))
        return answers.pop(0)

    store._connection.batch_get_item = batch_get_item
    return asked


def test_unprocessed_keys_are_asked_again_after_a_pause(store):
    asked = answering(store, [
        {"Responses": {TABLE: [raw(IDS[0])]}, "UnprocessedKeys": unprocessed(IDS[1])},
        {"Responses": {TABLE: []}, "UnprocessedKeys": unprocessed(IDS[1])},
        {"Responses": {TABLE: [raw(IDS[1])]}, "UnprocessedKeys": {}},
    ])
    found = store.objects_of(IDS)
    assert set(found) == set(IDS) and found[IDS[1]].status is JobStatus.QUEUED
    assert [keys for keys, _, _ in asked] == [[f"job#{i}" for i in IDS], [f"job#{IDS[1]}"], [f"job#{IDS[1]}"]]
    assert store.pauses == [0.1, 0.2]  # growing
    # Strongly consistent, as get(), and only the fields the orphan scan uses.
    assert all(consistent for _, consistent, _ in asked)
    # (display and thumb: where items of stored shapes 1 and 2 name their renditions)
    assert asked[0][2] == ["pk", "status", "attempt", "original_key", "renditions", "display", "thumb"]


def test_keys_still_unread_after_the_retries_are_an_outage(store):
    answering(store, [{"Responses": {TABLE: []}, "UnprocessedKeys": unprocessed(IDS[0])}]
              * (dynamo_jobs.UNPROCESSED_RETRIES + 1))
    with pytest.raises(TransientError):
        store.objects_of(IDS[:1])
    assert len(store.pauses) == dynamo_jobs.UNPROCESSED_RETRIES


def test_a_hundred_keys_a_call(store):
    ids = [f"{n:08x}-0000-4000-8000-000000000000" for n in range(250)]
    asked = answering(store, [{"Responses": {TABLE: []}}] * 3)
    assert store.objects_of(ids) == {}
    assert [len(keys) for keys, _, _ in asked] == [100, 100, 50]
