"""The Python SDK types an animated source's renditions and picks the animation where the
client asks for WebP (docs/contract.md "Animations"), against a scripted API."""
from __future__ import annotations

import httpx
import pytest
from image_jobs import Animation

from tests.client.fakes import JOB_PATH, FakeApi, FakeTime, job_answer

ANIMATION = {"url": "http://storage.test/t.animated.webp", "cache_key": "a" * 24, "content_type": "image/webp",
             "width": 256, "height": 256, "frames": 12, "duration_ms": 960, "bytes": 4000}


@pytest.fixture
def api():
    return FakeApi(FakeTime())


def test_an_animated_job_is_typed_and_downloads_its_animations_as_webp(api, tmp_path):
    api.on("GET", JOB_PATH, job_answer("ready", retry_after=None, source={
        "width": 480, "height": 360, "format": "gif", "bytes": 9000, "captured_at": None, "color_space": "srgb",
        "has_alpha": False, "animated": True, "frames": 12, "duration_ms": 960}, renditions={
        "display": {"url": "http://storage.test/d.jpg", "width": 480, "height": 360, "content_type": "image/jpeg",
                    "variants": {}, "animation": {**ANIMATION, "url": "http://storage.test/d.animated.webp",
                                                  "width": 480, "height": 360}},
        "thumb": {"url": "http://storage.test/t.jpg", "width": 256, "height": 256, "content_type": "image/jpeg",
                  "variants": {}, "animation": ANIMATION}}))
    api.on("GET", "/d.animated.webp", httpx.Response(200, content=b"RIFFd"))
    api.on("GET", "/t.animated.webp", httpx.Response(200, content=b"RIFFt"))
    api.on("GET", "/d.jpg", httpx.Response(200, content=b"jpeg-d"))
    api.on("GET", "/t.jpg", httpx.Response(200, content=b"jpeg-t"))
    job = api.client().job("j-1").refresh()
    assert job.renditions["thumb"].animation == Animation(ANIMATION["url"], "a" * 24, "image/webp", 256, 256, 12, 960, 4000)
    assert job.source["animated"] is True and job.source["frames"] == 12
    assert job.animation_skipped is None
    saved = job.download(tmp_path / "a", stem="p", format="webp")
    assert saved == {"display": tmp_path / "a" / "p.display.animated.webp", "thumb": tmp_path / "a" / "p.thumb.animated.webp"}
    assert saved["thumb"].read_bytes() == b"RIFFt"
    stills = job.download(tmp_path / "s", stem="p", format="webp", animate=False)
    assert stills["thumb"].read_bytes() == b"jpeg-t"  # no WebP variant: the still JPEG


def test_a_skipped_animation_says_why(api):
    api.on("GET", JOB_PATH, job_answer("ready", retry_after=None, animation_skipped={
        "code": "animation_too_many_frames", "message": "m"}, renditions={
        "display": {"url": "http://storage.test/d.jpg", "width": 1, "height": 1, "content_type": "image/jpeg", "variants": {}},
        "thumb": {"url": "http://storage.test/t.jpg", "width": 1, "height": 1, "content_type": "image/jpeg", "variants": {}}}))
    job = api.client().job("j-1").refresh()
    assert job.animation_skipped.code == "animation_too_many_frames"
    assert job.renditions["display"].animation is None
