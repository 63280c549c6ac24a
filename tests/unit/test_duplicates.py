"""Exact duplicates of one owner reuse the work (chalicelib/usecases/duplicates.py), on the
in-memory stores: copies, no decode; never across owners; not after the first job's DELETE
or expiry; sizes and formats covered; two at once both fine. tests/integration has the
copy and the index on moto's server, tests/e2e the whole path on every backend."""
import threading
from datetime import datetime, timezone

import pytest

from chalicelib.config import Settings
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.jobs import JobStatus
from chalicelib.usecases import UseCases
from chalicelib.usecases.worker import Worker
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, FakeQueue, fake_context
from tests.images import photo

START = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)


@pytest.fixture
def use_cases():
    clock = Clock(START)
    settings = Settings(bucket="images", max_upload_bytes=2_000_000)
    queue = FakeQueue(clock)
    return UseCases(fake_context(settings=settings, jobs=FakeJobStore(), objects=FakeObjectStore(clock),
                                 publisher=queue, backlog=queue, clock=clock))


@pytest.fixture
def decodes(monkeypatch):
    """How many times the worker decoded (its one decoding step, counted, still run)."""
    count = []
    original = Worker._renditions

    def counted(self, data, job):
        count.append(job.job_id)
        return original(self, data, job)

    monkeypatch.setattr(Worker, "_renditions", counted)
    return count


def made(use_cases, owner="alice", data=None, **asked):
    job = use_cases.uploads.accept_upload(owner, data or photo(), **asked).job
    event = ObjectCreated("images", job.original_key, 0, "e")
    assert use_cases.worker.handle_object_created(event) == "ready"
    return use_cases.ctx.jobs.items[job.job_id]


def objects_of(use_cases, job):
    return {key: use_cases.ctx.objects.objects[key][0] for r in job.renditions.values() for key in r.keys}


def test_the_same_owners_same_bytes_are_copies_with_no_decode_and_their_own_keys(use_cases, decodes):
    first = made(use_cases, formats=["webp", "avif"])
    use_cases.ctx.clock.advance(60)
    second = made(use_cases, formats=["webp"])
    assert decodes == [first.job_id]
    assert second.duplicate_of == first.job_id and first.duplicate_of is None
    assert (second.phash, second.placeholder, second.source) == (first.phash, first.placeholder, first.source)
    mine, theirs = objects_of(use_cases, second), objects_of(use_cases, first)
    assert not set(mine) & set(theirs) and all(second.job_id in key for key in mine)
    assert sorted(mine.values()) == sorted(data for key, data in theirs.items() if not key.endswith(".avif"))
    assert second.expires_at > first.expires_at  # its own lifetime
    use_cases.manage.delete("alice", first.job_id)  # deleting either never breaks the other
    assert objects_of(use_cases, second) == mine
    assert use_cases.manage.urls(use_cases.manage.get_job("alice", second.job_id)) is not None


def test_another_owners_same_bytes_are_never_matched(use_cases, decodes):
    first = made(use_cases, "alice")
    other = made(use_cases, "bob")
    assert other.duplicate_of is None and decodes == [first.job_id, other.job_id]


def test_after_the_first_jobs_delete_it_is_not_reused(use_cases, decodes):
    first = made(use_cases)
    use_cases.manage.delete("alice", first.job_id)
    again = made(use_cases)
    assert again.duplicate_of is None and len(decodes) == 2
    assert made(use_cases).duplicate_of == again.job_id  # the new one is reused in its place


def test_after_the_first_job_expired_it_is_not_reused(use_cases, decodes):
    first = made(use_cases)
    use_cases.ctx.clock.advance(use_cases.ctx.settings.retention_seconds + 1)
    assert made(use_cases).duplicate_of is None and len(decodes) == 2


def test_a_format_or_size_the_first_did_not_make_is_made_afresh(use_cases, decodes):
    first = made(use_cases, renditions=["display", "thumb"])
    with_webp = made(use_cases, renditions=["display", "thumb"], formats=["webp"])
    bigger = made(use_cases, renditions=["display", "thumb", "thumb_512"], formats=["webp"])
    assert (with_webp.duplicate_of, bigger.duplicate_of) == (None, None) and len(decodes) == 3
    fewer = made(use_cases, renditions=["display", "thumb"])
    assert fewer.duplicate_of == bigger.job_id and set(fewer.renditions) == {"display", "thumb"}
    assert not any(r.variants for r in fewer.renditions.values())  # asked for none
    assert first.duplicate_of is None


def test_a_first_job_deleted_while_its_twin_is_copied_makes_the_twin_afresh(use_cases, decodes, monkeypatch):
    first = made(use_cases)
    objects = use_cases.ctx.objects
    original_copy = objects.copy

    def deleted_meanwhile(source, key):
        use_cases.manage.delete("alice", first.job_id)
        return original_copy(source, key)

    monkeypatch.setattr(objects, "copy", deleted_meanwhile)
    again = made(use_cases)
    assert again.duplicate_of is None and len(decodes) == 2
    assert all(key in objects.objects for key in objects_of(use_cases, again))


def test_two_identical_uploads_at_once_both_end_ready(use_cases):
    jobs = [use_cases.uploads.accept_upload("alice", photo()).job for _ in range(2)]
    outcomes = []
    threads = [threading.Thread(target=lambda j=j: outcomes.append(use_cases.worker.handle_object_created(
        ObjectCreated("images", j.original_key, 0, "e")))) for j in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert outcomes == ["ready", "ready"]
    done = [use_cases.ctx.jobs.items[j.job_id] for j in jobs]
    assert all(j.status is JobStatus.READY for j in done)
    for job in done:
        assert all(key in use_cases.ctx.objects.objects for key in objects_of(use_cases, job))
    assert made(use_cases).duplicate_of in {j.job_id for j in done}


@pytest.mark.parametrize("change", [{"jpeg_quality": 80}, {"display_box": 1024}])
def test_after_a_deployment_changes_how_renditions_are_made_the_same_bytes_are_made_afresh(
        use_cases, decodes, change):
    """A copy must be what processing would make now: the same bytes under other coding
    settings or another rendition table are not the earlier job's renditions."""
    import dataclasses

    first = made(use_cases)
    ctx = use_cases.ctx
    redeployed = UseCases(fake_context(settings=dataclasses.replace(ctx.settings, **change), jobs=ctx.jobs,
                                       objects=ctx.objects, publisher=ctx.publisher, backlog=ctx.backlog,
                                       clock=ctx.clock))
    again = made(redeployed)
    assert again.duplicate_of is None and decodes == [first.job_id, again.job_id]
    assert made(redeployed).duplicate_of == again.job_id
