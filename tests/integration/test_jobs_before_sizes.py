"""Records written before jobs stored the sizes asked for (tests/fixtures/jobs/before_sizes.json,
items as main wrote them, no `sizes`): read as the two every job then had, processed, shown
and deleted as such, on DynamoDB (moto's server)."""
from __future__ import annotations

import json
from pathlib import Path

import boto3

from chalicelib.adapters.dynamo_jobs import DynamoJobStore
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.jobs import JobStatus
from chalicelib.domain.renditions import ALWAYS, RenditionName
from chalicelib.http.views import job_body
from chalicelib.usecases import UseCases
from tests.fakes import FakeObjectStore, fake_context
from tests.images import jpeg

FIXTURE = json.loads((Path(__file__).parents[1] / "fixtures" / "jobs" / "before_sizes.json").read_text())
QUEUED, READY = "0d9a7c1e-5b3f-4e2a-9c8d-7f6e5d4c3b2a", "3e8b6a2f-1c4d-4f5e-8a9b-0c1d2e3f4a5b"


def old_records(stack):
    settings, _, _ = stack
    dynamodb = boto3.client("dynamodb", endpoint_url=settings.endpoint_url, region_name=settings.region,
                            aws_access_key_id="test", aws_secret_access_key="test")
    for item in FIXTURE["items"]:
        assert "sizes" not in item
        dynamodb.put_item(TableName=settings.table, Item=item)
    store = DynamoJobStore(DynamoTable(settings.table, settings.region, settings.endpoint_url))
    return settings, store


def test_an_old_record_reads_as_the_two_renditions_it_was_made_with(stack):
    _, store = old_records(stack)
    for job_id in (QUEUED, READY):
        assert store.get(job_id).sizes == ALWAYS == (RenditionName.DISPLAY, RenditionName.THUMB)
    ready = store.get(READY)
    assert set(ready.renditions) == set(ALWAYS)
    use_cases = UseCases(fake_context(settings=stack[0], jobs=store, objects=FakeObjectStore()))
    body = job_body(ready, use_cases.manage.urls(ready))
    assert sorted(body["renditions"]) == ["display", "thumb"]
    assert all(r["cache_key"] and r["variants"]["image/webp"]["cache_key"] for r in body["renditions"].values())


def test_an_old_queued_job_is_made_with_the_two_it_was_promised_and_deleted_whole(stack):
    settings, store = old_records(stack)
    objects = FakeObjectStore()
    use_cases = UseCases(fake_context(settings=settings, jobs=store, objects=objects))
    objects.put(f"originals/{QUEUED}", jpeg(1200, 800), "image/jpeg")
    use_cases.worker.handle_object_created(ObjectCreated(settings.bucket, f"originals/{QUEUED}", 0))
    done = store.get(QUEUED)
    assert done.status is JobStatus.READY and set(done.renditions) == set(ALWAYS)
    made = {k.rsplit("/", 1)[1].split(".")[0] for k in objects.objects if k.startswith("renditions/")}
    assert made == {"display", "thumb"}  # no thumb_512: it was not promised
    use_cases.manage.delete("carol", QUEUED)
    assert store.get(QUEUED) is None and not objects.objects


def test_a_new_record_round_trips_its_sizes(stack):
    settings, store = old_records(stack)
    objects = FakeObjectStore()
    use_cases = UseCases(fake_context(settings=settings, jobs=store, objects=objects))
    job = use_cases.uploads.accept_upload("erin", jpeg(), None, renditions=["thumb"]).job
    assert store.get(job.job_id).sizes == ALWAYS
    job = use_cases.uploads.accept_upload("erin", jpeg(640, 480), None).job
    assert store.get(job.job_id).sizes == (RenditionName.DISPLAY, RenditionName.THUMB, RenditionName.THUMB_512)
