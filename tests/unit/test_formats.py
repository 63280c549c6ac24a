"""Extra formats (WebP, AVIF) and the placeholder over the in-memory fakes: asked for, made,
refused, fingerprinted, shown, and cleaned up exactly as the JPEGs are."""
import io
from datetime import datetime, timezone

import blurhash
import pytest
from PIL import Image

from chalicelib.config import Settings
from chalicelib.domain.errors import IdempotencyKeyReused, InvalidRequest
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.jobs import JobStatus
from chalicelib.domain.renditions import RenditionFormat, RenditionName
from chalicelib.http import views
from chalicelib.imaging.placeholder import components
from chalicelib.usecases import UseCases
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, fake_context
from tests.images import jpeg, photo

START = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)
AVIF, WEBP = RenditionFormat.AVIF, RenditionFormat.WEBP


def make_use_cases(**settings):
    settings = Settings(bucket="images", max_upload_bytes=4_000_000, max_pixels=40_000_000, **settings)
    clock = Clock(START)
    return UseCases(fake_context(settings=settings, jobs=FakeJobStore(), objects=FakeObjectStore(clock), clock=clock))


@pytest.fixture
def use_cases():
    return make_use_cases()


def process(use_cases, job):
    return use_cases.worker.handle_object_created(
        ObjectCreated(bucket="images", key=job.original_key, size=0, etag="e"))


def renditions(use_cases):
    return sorted(k for k in use_cases.ctx.objects.objects if k.startswith("renditions/"))


def test_the_formats_asked_for_are_made_for_every_rendition_and_shown_as_variants(use_cases):
    job = use_cases.uploads.accept_upload("alice", photo(), formats=["webp", "avif"]).job
    assert job.formats == (WEBP, AVIF)
    assert process(use_cases, job) == "ready"
    done = use_cases.ctx.jobs.items[job.job_id]
    objects = use_cases.ctx.objects.objects
    for name, r in done.renditions.items():
        assert set(r.variants) == {WEBP, AVIF}
        for fmt, variant in r.variants.items():
            data, content_type = objects[variant.key]
            assert content_type == fmt.content_type and variant.bytes == len(data)
            decoded = Image.open(io.BytesIO(data))
            assert decoded.format == fmt.name and decoded.size == (r.width, r.height)
            assert variant.key == use_cases.ctx.object_keys.rendition(job.job_id, 1, name, fmt)
    assert len(renditions(use_cases)) == 9  # 3 renditions x (JPEG, WebP, AVIF)
    body = views.job_body(done, use_cases.manage.urls(done))
    display = body["renditions"]["display"]
    assert set(display["variants"]) == {"image/webp", "image/avif"}
    assert display["variants"]["image/avif"]["width"] == display["width"] == 600
    assert body["image_url"] == display["url"] and display["content_type"] == "image/jpeg"


def test_with_no_formats_asked_only_the_jpegs_are_made(use_cases):
    job = use_cases.uploads.accept_upload("alice", jpeg()).job
    assert process(use_cases, job) == "ready"
    done = use_cases.ctx.jobs.items[job.job_id]
    assert all(r.variants == {} for r in done.renditions.values())
    assert [k.rsplit(".", 1)[1] for k in renditions(use_cases)] == ["jpg", "jpg", "jpg"]


@pytest.mark.parametrize("formats", [["gif"], ["jpeg"], ["avif", "png"], [""], [7]])
def test_a_format_not_enabled_is_refused_and_makes_no_job(use_cases, formats):
    with pytest.raises(InvalidRequest):
        use_cases.uploads.accept_upload("alice", jpeg(), formats=formats)
    with pytest.raises(InvalidRequest):
        use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 1000, formats=formats)
    assert use_cases.ctx.jobs.items == {}


def test_a_format_the_stage_does_not_enable_is_refused():
    use_cases = make_use_cases(rendition_formats="webp")
    with pytest.raises(InvalidRequest):
        use_cases.uploads.accept_upload("alice", jpeg(), formats=["avif"])
    assert use_cases.uploads.accept_upload("alice", jpeg(), formats=["webp"]).job.formats == (WEBP,)


def test_the_formats_are_part_of_the_fingerprint_but_not_their_order(use_cases):
    data = jpeg()
    first = use_cases.uploads.accept_upload("alice", data, "k1", ["avif", "webp"])
    again = use_cases.uploads.accept_upload("alice", data, "k1", ["webp", "avif", "webp"])
    assert again.replayed and again.job.job_id == first.job.job_id
    for other in (["avif"], []):
        with pytest.raises(IdempotencyKeyReused):
            use_cases.uploads.accept_upload("alice", data, "k1", other)
    direct = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 1000, "k2", formats=["avif"])
    assert use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 1000, "k2", formats=["avif"]).replayed
    assert direct.job.formats == (AVIF,)
    with pytest.raises(IdempotencyKeyReused):
        use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 1000, "k2", formats=["webp"])


def test_without_formats_the_fingerprint_is_the_one_keys_held_before_formats_had(use_cases):
    from chalicelib.usecases.idempotency import fingerprint_of as _fingerprint
    assert _fingerprint(b"images", b"x") == _fingerprint(b"images", b"x", ())
    assert _fingerprint(b"images", b"x") != _fingerprint(b"images", b"x", (AVIF,))


@pytest.mark.parametrize("size,colour", [((900, 300), (30, 120, 200)), ((300, 900), (200, 180, 20)),
                                         ((500, 500), (90, 90, 90))])
def test_every_ready_job_has_a_placeholder_in_its_aspect_and_colour(use_cases, size, colour):
    job = use_cases.uploads.accept_upload("alice", jpeg(*size, color=colour)).job
    assert process(use_cases, job) == "ready"
    done = use_cases.ctx.jobs.items[job.job_id]
    placeholder = views.job_body(done, use_cases.manage.urls(done))["placeholder"]
    got = tuple(int(placeholder["average_color"][i:i + 2], 16) for i in (1, 3, 5))
    assert all(abs(a - b) <= 3 for a, b in zip(got, colour))
    assert blurhash.components(placeholder["blurhash"]) == components(*size)
    x, y = components(*size)
    assert (x > y) == (size[0] > size[1]) and (x < y) == (size[0] < size[1])
    display = done.renditions[RenditionName.DISPLAY]
    pixels = blurhash.decode(placeholder["blurhash"], display.width // 10, display.height // 10)
    assert len(pixels) == display.height // 10 and len(pixels[0]) == display.width // 10
    centre = pixels[len(pixels) // 2][len(pixels[0]) // 2]
    assert all(abs(a - b) <= 6 for a, b in zip(centre, colour))


def test_deleting_a_job_removes_every_variant(use_cases):
    job = use_cases.uploads.accept_upload("alice", photo(), formats=["webp", "avif"]).job
    assert process(use_cases, job) == "ready"
    assert len(renditions(use_cases)) == 9
    use_cases.manage.delete("alice", job.job_id)
    assert use_cases.ctx.objects.objects == {}


def test_an_expired_job_goes_with_every_variant(use_cases):
    job = use_cases.uploads.accept_upload("alice", photo(), formats=["avif"]).job
    assert process(use_cases, job) == "ready"
    assert len(renditions(use_cases)) == 6
    use_cases.ctx.clock.advance(use_cases.ctx.retention.total_seconds() + 1)
    use_cases.sweeper.sweep()
    assert use_cases.ctx.objects.objects == {} and job.job_id not in use_cases.ctx.jobs.items


def test_every_attempts_variants_are_cleaned_up_and_the_orphan_scan_keeps_the_result(use_cases):
    ctx = use_cases.ctx
    job = use_cases.uploads.accept_upload("alice", photo(), formats=["webp", "avif"]).job
    ctx.jobs.claim(job.job_id, ctx.clock(), ctx.lease, 3)
    stray = ctx.object_keys.rendition(job.job_id, 1, RenditionName.THUMB, AVIF)
    ctx.objects.put(stray, b"x", "image/avif")  # attempt 1 died after one put
    ctx.clock.advance(ctx.lease.total_seconds() + 1)
    assert process(use_cases, job) == "ready"  # attempt 2 removes attempt 1's leftovers
    assert stray not in ctx.objects.objects
    done = ctx.jobs.items[job.job_id]
    result = sorted(k for r in done.renditions.values() for k in r.keys)
    assert renditions(use_cases) == result and len(result) == 9
    late = ctx.object_keys.rendition(job.job_id, 9, RenditionName.DISPLAY, WEBP)
    ctx.objects.put(late, b"x", "image/webp")
    ctx.clock.advance(ctx.settings.orphan_grace_seconds + 1)
    assert use_cases.orphan_scan.run() == {"orphans_deleted": 1}
    assert renditions(use_cases) == result


def noise_jpeg(width: int, height: int) -> bytes:
    import numpy as np
    pixels = np.random.default_rng(7).integers(0, 256, (height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=95)
    return out.getvalue()


def test_an_avif_encode_over_the_cpu_limit_fails_image_too_complex_and_leaves_nothing():
    # AVIF at libaom's slowest speed on 1280 px of noise takes several CPU seconds; the JPEGs of
    # the same image's three JPEGs (display, thumb, thumb_512) about one. The limit is the
    # decoding child's, which codes too.
    use_cases = make_use_cases(decode_cpu_seconds=2, avif_speed=0)
    data = noise_jpeg(1280, 1280)
    jpeg_only = use_cases.uploads.accept_upload("alice", data).job
    assert process(use_cases, jpeg_only) == "ready"
    job = use_cases.uploads.accept_upload("alice", data, formats=["avif"]).job
    assert process(use_cases, job) == "failed"
    failed = use_cases.ctx.jobs.items[job.job_id]
    assert failed.status is JobStatus.FAILED and failed.error_code == "image_too_complex"
    assert not [k for k in renditions(use_cases) if job.job_id in k]
