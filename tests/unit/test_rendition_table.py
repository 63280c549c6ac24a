"""Renditions are data: a row added to the spec table (chalicelib/domain/renditions.py) is made,
stored, shown and deleted with no other change in chalicelib/. The table is swapped for one
with a fourth, 640 px row here; the product keeps its three."""
from datetime import datetime, timezone
from enum import StrEnum

import pytest

from chalicelib.config import Settings
from chalicelib.domain import renditions
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.jobs import JobStatus
from chalicelib.domain.renditions import Fit, RenditionName, RenditionSpec
from chalicelib.http.views import job_body
from chalicelib.usecases import UseCases
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, fake_context
from tests.images import jpeg, size_of

START = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)


class Added(StrEnum):
    """The name a new row would add to RenditionName."""

    MEDIUM = "medium"


@pytest.fixture
def svc(monkeypatch):
    product = renditions.rendition_specs
    monkeypatch.setattr(renditions, "rendition_specs", lambda settings: (
        *product(settings), RenditionSpec(Added.MEDIUM, Fit.CONTAIN, 640)))
    clock = Clock(START)
    return UseCases(fake_context(settings=Settings(bucket="images"), jobs=FakeJobStore(),
                                 objects=FakeObjectStore(clock), clock=clock))


def stored(svc, job_id):
    return {k: v for k, v in svc.ctx.objects.objects.items() if k.startswith(f"renditions/{job_id}/")}


def test_the_product_makes_a_display_a_thumb_and_a_2x_thumb():
    assert [(s.name, s.fit, s.box, s.by_default) for s in renditions.rendition_specs(Settings())] == [
        (RenditionName.DISPLAY, Fit.CONTAIN, 1280, True), (RenditionName.THUMB, Fit.COVER, 256, True),
        (RenditionName.THUMB_512, Fit.COVER, 512, True)]


def test_a_fourth_row_is_made_stored_and_shown(svc):
    job = svc.uploads.accept_upload("alice", jpeg(2000, 1500)).job
    assert svc.worker.handle_object_created(ObjectCreated("images", job.original_key, 0)) == "ready"
    done = svc.ctx.jobs.items[job.job_id]
    assert done.status is JobStatus.READY
    assert {name: (r.width, r.height) for name, r in done.renditions.items()} == {
        "display": (1280, 960), "thumb": (256, 256), "thumb_512": (512, 512), "medium": (640, 480)}
    objects = stored(svc, job.job_id)
    assert sorted(objects) == [f"renditions/{job.job_id}/1/{name}.jpg"
                               for name in ("display", "medium", "thumb", "thumb_512")]
    assert size_of(objects[done.renditions[Added.MEDIUM].key][0]) == (640, 480)
    body = job_body(done, svc.manage.urls(done))
    assert sorted(body["renditions"]) == ["display", "medium", "thumb", "thumb_512"]
    medium = body["renditions"]["medium"]
    assert (medium["width"], medium["height"], medium["content_type"]) == (640, 480, "image/jpeg")
    assert done.renditions[Added.MEDIUM].key in medium["url"]


def test_delete_removes_all_four(svc):
    job = svc.uploads.accept_upload("alice", jpeg(2000, 1500)).job
    svc.worker.handle_object_created(ObjectCreated("images", job.original_key, 0))
    assert len(stored(svc, job.job_id)) == 4
    svc.manage.delete("alice", job.job_id)
    assert svc.ctx.objects.objects == {} and svc.ctx.jobs.items == {}


def test_cancel_removes_all_four_of_an_attempt_that_never_finished(svc):
    """The attempt's keys come from the table, not from the record (which names none yet)."""
    job = svc.uploads.accept_upload("alice", jpeg(2000, 1500)).job
    claimed = svc.ctx.jobs.claim(job.job_id, svc.ctx.clock(), svc.ctx.lease, 3)
    for name in (RenditionName.DISPLAY, RenditionName.THUMB, RenditionName.THUMB_512, Added.MEDIUM):
        svc.ctx.objects.put(svc.ctx.object_keys.rendition(job.job_id, claimed.attempt, name), b"x", "image/jpeg")
    svc.manage.cancel("alice", job.job_id)
    assert stored(svc, job.job_id) == {}
