"""The photo's facts (`source`) through HTTP on every backend: GET and the list show them,
nothing private comes out, in the JSON or in any rendition. The same turned photo carries a
client's focus (issue 49): its squares are placed by it in upright coordinates."""
from __future__ import annotations

import io

import requests
from PIL import Image, ImageChops, ImageStat

from tests.animations import animated
from tests.e2e.test_images_api import headers, poll, upload_raw
from tests.images import DISPLAY_P3_PROFILE, PRIVATE_MARKERS, photo_as, private_exif


def test_a_turned_wide_gamut_heic_reads_upright_with_its_capture_time_and_nothing_private(runner):
    data = photo_as("HEIF", exif=private_exif(orientation=6).tobytes(), icc_profile=DISPLAY_P3_PROFILE)
    bad = requests.post(f"{runner.api}/api/v1/images?focus=0.5,1.5", data=data, timeout=30,
                        headers=headers(**{"Content-Type": "image/heic"}))
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_request", bad.text
    # The subject near the top of the upright picture: the client's focus.
    r = requests.post(f"{runner.api}/api/v1/images?focus=0.5,0.1", data=data, timeout=30,
                      headers=headers(**{"Content-Type": "image/heic"}))
    assert r.status_code == 202, r.text
    job = poll(runner, r.headers["Location"]).json()
    assert job["status"] == "ready", job
    assert job["source"] == {"width": 400, "height": 600, "format": "heic", "bytes": len(data),
                             "captured_at": "2024-05-01T12:34:56+02:00", "color_space": "display-p3",
                             "has_alpha": False, "animated": False, "frames": 1, "duration_ms": None}
    assert len(job["phash"]) == 16 and int(job["phash"], 16) >= 0
    assert job["focus"] == {"x": 0.5, "y": 0.1, "source": "client"}
    listed = requests.get(f"{runner.api}/api/v1/image-jobs", headers=headers(), timeout=10).json()["jobs"]
    assert [j["source"] for j in listed if j["job_id"] == job["job_id"]] == [job["source"]]
    assert [j["focus"] for j in listed if j["job_id"] == job["job_id"]] == [job["focus"]]
    assert not [m for m in PRIVATE_MARKERS if m in r.text + str(job) + str(listed)]
    display = job["renditions"]["display"]
    assert display["width"] < display["height"]  # upright as the facts say
    for rendition in job["renditions"].values():
        file = requests.get(rendition["url"], timeout=10).content
        assert not [m for m in PRIVATE_MARKERS if m.encode() in file]
        with Image.open(io.BytesIO(file)) as im:
            assert not im.getexif() and "icc_profile" not in im.info
    # Each square is the top of the upright picture (the focus at a tenth of its height: the
    # window clamped at the top edge), not its centre.
    shown = Image.open(io.BytesIO(requests.get(display["url"], timeout=10).content)).convert("RGB")
    width, height = shown.size
    for name in ("thumb", "thumb_512"):
        square = Image.open(io.BytesIO(requests.get(job["renditions"][name]["url"], timeout=10).content))
        square = square.convert("RGB")
        top = shown.crop((0, 0, width, width)).resize(square.size)
        middle = shown.crop((0, (height - width) // 2, width, (height + width) // 2)).resize(square.size)
        off_top, off_middle = (sum(ImageStat.Stat(ImageChops.difference(square, crop)).mean)
                               for crop in (top, middle))
        assert off_top * 2 < off_middle, (name, off_top, off_middle)


def test_an_animated_gif_comes_back_animated_in_every_size_and_delete_removes_it(runner):
    """Issue 51 on every backend: each rendition keeps its still and gains an animated WebP
    that storage serves (signed like the still), the list carries it, DELETE removes it."""
    data = animated("gif", frames=4, size=(240, 160), durations=[60, 0, 90, 120])
    r = upload_raw(runner, data, "image/gif")
    assert r.status_code == 202, r.text
    job = poll(runner, r.headers["Location"]).json()
    assert job["status"] == "ready", job
    assert (job["source"]["animated"], job["source"]["frames"], job["source"]["duration_ms"]) == (True, 4, 370)
    assert "animation_skipped" not in job
    for name, rendition in job["renditions"].items():
        animation = rendition["animation"]
        # Never upscaled: the squares are the source's 160 square (their stills 256 and 512).
        size = (240, 160) if name == "display" else (160, 160)
        assert (animation["width"], animation["height"]) == size, name
        assert (animation["frames"], animation["duration_ms"], animation["content_type"]) == (4, 370, "image/webp")
        served = requests.get(animation["url"], timeout=10)
        assert served.status_code == 200 and served.headers["Content-Type"] == "image/webp"
        assert len(served.content) == animation["bytes"]
        with Image.open(io.BytesIO(served.content)) as im:
            assert im.format == "WEBP" and im.n_frames == 4 and im.size == (animation["width"], animation["height"])
        still = requests.get(rendition["url"], timeout=10)
        assert still.headers["Content-Type"] == "image/jpeg"
    listed = requests.get(f"{runner.api}/api/v1/image-jobs", headers=headers(), timeout=10).json()["jobs"]
    (shown,) = [j for j in listed if j["job_id"] == job["job_id"]]
    assert {n: r["animation"]["cache_key"] for n, r in shown["renditions"].items()} == \
        {n: r["animation"]["cache_key"] for n, r in job["renditions"].items()}
    assert requests.delete(runner.api + r.headers["Location"], headers=headers(), timeout=10).status_code == 204
    gone = requests.get(job["renditions"]["thumb"]["animation"]["url"], timeout=10)
    assert gone.status_code in (403, 404)
