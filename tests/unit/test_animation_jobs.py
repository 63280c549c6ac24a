"""An animated upload through the use cases (in-memory fakes): its job carries the animations
in its renditions, their objects, their URLs and cache keys; past a limit it is ready with
its stills and says why; delete and duplicates handle the animations' objects."""
from __future__ import annotations

import io
from datetime import datetime, timezone

import pytest
from PIL import Image

from chalicelib.config import Settings
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.jobs import JobStatus
from chalicelib.domain.renditions import RenditionName
from chalicelib.http.views import job_body
from chalicelib.usecases import UseCases, duplicates
from tests.animations import animated
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, fake_context

START = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)


def use_cases_with(**settings) -> UseCases:
    s = Settings(**{"bucket": "images", "max_upload_bytes": 20_000_000, **settings})
    return UseCases(fake_context(settings=s, jobs=FakeJobStore(), objects=FakeObjectStore(), clock=Clock(START)))


@pytest.fixture
def use_cases():
    return use_cases_with()


def made(use_cases, data: bytes, owner: str = "alice"):
    job = use_cases.uploads.accept_upload(owner, data).job
    use_cases.worker.handle_object_created(ObjectCreated(bucket="images", key=job.original_key, size=0, etag="e"))
    return use_cases.ctx.jobs.items[job.job_id]


def test_an_animated_upload_is_ready_with_an_animation_per_rendition_in_its_body(use_cases):
    job = made(use_cases, animated("gif", frames=5, size=(300, 200), durations=60))
    assert job.status is JobStatus.READY and job.animation_skipped is None
    body = job_body(job, use_cases.manage.urls(job))
    assert body["source"]["animated"] is True and body["source"]["frames"] == 5
    assert body["source"]["duration_ms"] == 300
    for name, rendition in job.renditions.items():
        a = rendition.animation
        assert a.key == f"renditions/{job.job_id}/1/{name}.animated.webp"
        data, content_type = use_cases.ctx.objects.objects[a.key]
        assert content_type == "image/webp" and len(data) == a.bytes
        assert Image.open(io.BytesIO(data)).n_frames == 5
        shown = body["renditions"][name]["animation"]
        assert shown["url"] == use_cases.ctx.objects.presign_get(a.key, 0) or shown["url"].startswith("http")
        assert set(shown) == {"url", "cache_key", "content_type", "width", "height", "frames", "duration_ms", "bytes"}
        assert (shown["frames"], shown["duration_ms"], shown["content_type"]) == (5, 300, "image/webp")
        # Its own size: the still's, but never upscaled (both squares are the source's 200 square).
        assert (shown["width"], shown["height"]) == ((300, 200) if name == "display" else (200, 200))
        assert Image.open(io.BytesIO(data)).size == (shown["width"], shown["height"])
        assert shown["cache_key"] != body["renditions"][name]["cache_key"]
        assert body["renditions"][name]["content_type"] == "image/jpeg"  # the still, as before
    assert "animation_skipped" not in body


def test_a_still_has_no_animation_and_says_it_is_not_animated(use_cases):
    job = made(use_cases, animated("gif", frames=1))
    body = job_body(job, use_cases.manage.urls(job))
    assert body["source"]["animated"] is False and body["source"]["duration_ms"] is None
    assert all("animation" not in r for r in body["renditions"].values())
    assert "animation_skipped" not in body


@pytest.mark.parametrize("limits,code", [
    ({"max_animation_frames": 4}, "animation_too_many_frames"),
    ({"max_animation_pixels": 5 * 100 * 80 - 1}, "animation_too_many_pixels"),
])
def test_past_a_limit_the_job_is_ready_with_its_stills_and_says_why(limits, code):
    use_cases = use_cases_with(**limits)
    job = made(use_cases, animated("gif", frames=5, size=(100, 80)))
    assert job.status is JobStatus.READY
    body = job_body(job, use_cases.manage.urls(job))
    assert body["animation_skipped"]["code"] == code and body["animation_skipped"]["message"]
    assert all("animation" not in r for r in body["renditions"].values())
    assert body["source"]["animated"] is True
    assert not any(key.endswith(".animated.webp") for key in use_cases.ctx.objects.objects)


def test_an_animation_over_its_cpu_leaves_the_stills():
    # 100 frames of 480x360 take some 2 s of CPU (benchmarks/animation.py): over its one.
    use_cases = use_cases_with(decode_cpu_seconds=6, animation_cpu_seconds=1)
    job = made(use_cases, animated("gif", frames=100, size=(480, 360)))
    assert job.status is JobStatus.READY and job.animation_skipped.value == "animation_too_complex"
    assert all(r.animation is None for r in job.renditions.values())


def test_deleting_the_job_deletes_its_animations(use_cases):
    job = made(use_cases, animated("webp", frames=3))
    keys = [r.animation.key for r in job.renditions.values()]
    assert all(key in use_cases.ctx.objects.objects for key in keys)
    use_cases.manage.delete("alice", job.job_id)
    assert not any(key in use_cases.ctx.objects.objects for key in keys)


def test_a_duplicate_copies_the_animations_as_its_own(use_cases):
    data = animated("apng", frames=3)
    first = made(use_cases, data)
    second = made(use_cases, data)
    assert second.duplicate_of == first.job_id
    for name, rendition in second.renditions.items():
        assert rendition.animation.key == f"renditions/{second.job_id}/1/{name}.animated.webp"
        assert use_cases.ctx.objects.objects[rendition.animation.key] == \
            use_cases.ctx.objects.objects[first.renditions[name].animation.key]


def test_a_job_made_before_animations_is_not_copied_for_the_same_bytes(use_cases):
    """The duplicate index is keyed by what makes renditions, animations included: the key
    a job made before them noted (without that part) is not the key asked now."""
    data = animated("gif", frames=3)
    ctx = use_cases.ctx
    import hashlib

    s = ctx.settings
    before = repr((ctx.renditions, s.jpeg_quality, s.webp_quality, s.avif_quality, s.avif_speed,
                   s.max_pixels)).encode()
    old_key = hashlib.sha256(before + hashlib.sha256(data).digest()).hexdigest()
    assert duplicates.content_of(ctx, data) != old_key
    assert duplicates.content_of(ctx, data) != duplicates.content_of(
        UseCases(fake_context(settings=Settings(bucket="images", max_animation_frames=10),
                              jobs=FakeJobStore(), objects=FakeObjectStore(), clock=Clock(START))).ctx, data)


def test_the_orphan_scan_and_clean_up_know_the_animations_keys(use_cases):
    from chalicelib.domain.jobs import JobObjects
    from chalicelib.usecases import lifecycle

    job = made(use_cases, animated("gif", frames=3))
    keys = {r.animation.key for r in job.renditions.values()}
    assert keys <= JobObjects.of(job).result_keys  # a ready job's: never an orphan
    assert keys <= set(lifecycle.rendition_keys(use_cases.ctx, job))
    # An attempt's keys (what a failed or lost attempt leaves) name its animations too.
    assert keys <= set(use_cases.ctx.object_keys.renditions(job.job_id, 1, list(job.renditions)))
