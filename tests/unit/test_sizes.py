"""Sizes for every screen: `renditions=` at upload, validated against the table, part of the
fingerprint; a 512 px thumbnail by default (docs/contract.md "Sizes for every screen")."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from chalicelib.config import Settings
from chalicelib.domain.errors import IdempotencyKeyReused, InvalidRequest
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.renditions import RenditionName
from chalicelib.usecases import UseCases
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, fake_context
from tests.images import photo, size_of

START = datetime(2026, 7, 15, 10, 0, 0, 250000, tzinfo=timezone.utc)


@pytest.fixture
def use_cases():
    clock = Clock(START)
    return UseCases(fake_context(settings=Settings(bucket="images"), jobs=FakeJobStore(),
                                 objects=FakeObjectStore(clock), clock=clock))


def made(use_cases, job):
    use_cases.worker.handle_object_created(ObjectCreated("images", job.original_key, 0))
    return use_cases.ctx.jobs.items[job.job_id]


def test_a_512_px_thumbnail_is_made_by_default(use_cases):
    done = made(use_cases, use_cases.uploads.accept_upload("alice", photo()).job)
    assert {n: (r.width, r.height) for n, r in done.renditions.items()} == {
        "display": (600, 400), "thumb": (256, 256), "thumb_512": (512, 512)}
    data, content_type = use_cases.ctx.objects.objects[done.renditions[RenditionName.THUMB_512].key]
    assert size_of(data) == (512, 512) and content_type == "image/jpeg"


@pytest.mark.parametrize("names, expected", [
    ([], {"display", "thumb"}), (["thumb"], {"display", "thumb"}),
    (["THUMB_512 ", "thumb_512"], {"display", "thumb", "thumb_512"})])
def test_an_upload_names_its_sizes_and_always_gets_display_and_thumb(use_cases, names, expected):
    done = made(use_cases, use_cases.uploads.accept_upload("alice", photo(), renditions=names).job)
    assert set(done.renditions) == expected
    assert {k.rsplit("/", 1)[1] for k in use_cases.ctx.objects.objects if k.startswith("renditions/")} == {
        f"{n}.jpg" for n in expected}


@pytest.mark.parametrize("names", [["poster"], ["thumb", "display_4k"], [3]])
def test_a_size_not_in_the_table_is_400_and_makes_no_job(use_cases, names):
    with pytest.raises(InvalidRequest, match="thumb_512"):
        use_cases.uploads.accept_upload("alice", photo(), renditions=names)
    with pytest.raises(InvalidRequest):
        use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 1000, renditions=names)
    assert use_cases.ctx.jobs.items == {}


def test_the_sizes_are_part_of_the_fingerprint_and_the_default_named_is_the_same_request(use_cases):
    first = use_cases.uploads.accept_upload("alice", photo(), "key-1").job
    again = use_cases.uploads.accept_upload("alice", photo(), "key-1",
                                            renditions=["thumb_512", "display", "thumb"])
    assert again.replayed and again.job.job_id == first.job_id
    with pytest.raises(IdempotencyKeyReused):
        use_cases.uploads.accept_upload("alice", photo(), "key-1", renditions=["thumb"])
    direct = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 1000, "key-2", renditions=[]).job
    assert direct.sizes == (RenditionName.DISPLAY, RenditionName.THUMB)
    with pytest.raises(IdempotencyKeyReused):
        use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 1000, "key-2")
