"""Extra formats through HTTP on the local runner: `?formats=` on /images, `"formats"` on
/uploads, the variants downloaded and decoded, and the placeholder of every ready job."""
from __future__ import annotations

import io
import uuid

import blurhash
import requests
from PIL import Image

from tests.e2e.test_images_api import assert_problem, headers, poll, upload_raw
from tests.images import jpeg, photo


def upload_with(runner, data, formats, key=None, multipart=False):
    extra = {"Idempotency-Key": key} if key else {}
    url = f"{runner.api}/api/v1/images?formats={formats}"
    if multipart:
        return requests.post(url, headers=headers(**extra), timeout=30,
                             files={"file": ("photo.jpg", data, "image/jpeg")})
    return requests.post(url, data=data, timeout=30,
                         headers=headers(**extra, **{"Content-Type": "image/jpeg"}))


def test_an_app_that_asks_for_avif_and_webp_gets_each_size_in_each_smaller_than_the_jpeg(runner):
    data = photo()  # a real photograph: a flat image gets no variant (below)
    r = upload_with(runner, data, "avif,webp", multipart=True)
    assert r.status_code == 202, r.text
    job = poll(runner, r.headers["Location"]).json()
    assert job["status"] == "ready"
    for name, rendition in job["renditions"].items():
        jpeg_bytes = requests.get(rendition["url"], timeout=10).content
        assert set(rendition["variants"]) == {"image/avif", "image/webp"}
        for content_type, variant in rendition["variants"].items():
            got = requests.get(variant["url"], timeout=10)
            assert got.status_code == 200 and len(got.content) == variant["bytes"]
            decoded = Image.open(io.BytesIO(got.content))
            assert decoded.format == content_type.split("/")[1].upper()
            assert decoded.size == (variant["width"], variant["height"]) == (rendition["width"], rendition["height"])
            assert variant["bytes"] < len(jpeg_bytes), (name, content_type)
    assert job["image_url"] == job["renditions"]["display"]["url"]
    placeholder = job["placeholder"]
    colour = [int(placeholder["average_color"][i:i + 2], 16) for i in (1, 3, 5)]
    average = Image.open(io.BytesIO(data)).convert("RGB").resize((1, 1), Image.Resampling.BOX).getpixel((0, 0))
    assert all(abs(a - b) <= 3 for a, b in zip(colour, average))
    x, y = blurhash.components(placeholder["blurhash"])
    assert x > y  # landscape


def test_a_format_that_is_not_enabled_is_400_and_makes_no_job(runner):
    assert_problem(upload_with(runner, jpeg(), "gif"), 400, "invalid_request")
    r = requests.post(f"{runner.api}/api/v1/uploads", timeout=10, headers=headers(),
                      json={"content_type": "image/jpeg", "size": 1000, "formats": ["heic"]})
    assert_problem(r, 400, "invalid_request")
    r = requests.post(f"{runner.api}/api/v1/uploads", timeout=10, headers=headers(),
                      json={"content_type": "image/jpeg", "size": 1000, "formats": "avif"})
    assert_problem(r, 400, "invalid_request")


def test_the_same_key_with_other_formats_is_409(runner):
    key, data = str(uuid.uuid4()), jpeg()
    first = upload_with(runner, data, "avif", key)
    assert first.status_code == 202, first.text
    again = upload_with(runner, data, "avif", key)
    assert again.status_code == 202 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["job_id"] == first.json()["job_id"]
    assert_problem(upload_with(runner, data, "webp", key), 409, "idempotency_key_reused")
    key = str(uuid.uuid4())
    body = {"content_type": "image/jpeg", "size": 1000, "formats": ["avif"]}
    assert requests.post(f"{runner.api}/api/v1/uploads", json=body, timeout=10,
                         headers=headers(**{"Idempotency-Key": key})).status_code == 202
    r = requests.post(f"{runner.api}/api/v1/uploads", json={**body, "formats": []}, timeout=10,
                      headers=headers(**{"Idempotency-Key": key}))
    assert_problem(r, 409, "idempotency_key_reused")


def test_a_format_whose_file_would_not_be_smaller_than_the_jpeg_is_left_out(runner):
    r = upload_with(runner, jpeg(900, 600), "webp,avif")  # one flat colour: the JPEG is tiny
    job = poll(runner, r.headers["Location"]).json()
    assert job["status"] == "ready"
    assert all(rendition["variants"] == {} for rendition in job["renditions"].values())


def test_deleting_a_job_removes_its_variants(runner):
    r = upload_with(runner, photo(), "webp,avif")
    job = poll(runner, r.headers["Location"]).json()
    urls = [v["url"] for rendition in job["renditions"].values() for v in rendition["variants"].values()]
    assert len(urls) == 2 * len(job["renditions"]) and all(requests.get(u, timeout=10).status_code == 200 for u in urls)
    assert requests.delete(runner.api + r.headers["Location"], headers=headers(), timeout=10).status_code == 204
    assert all(requests.get(u, timeout=10).status_code in (403, 404) for u in urls)


def test_a_job_with_no_formats_still_has_its_placeholder(runner):
    r = upload_raw(runner, jpeg(300, 600, color=(200, 30, 30)))
    job = poll(runner, r.headers["Location"]).json()
    x, y = blurhash.components(job["placeholder"]["blurhash"])
    assert x < y and job["renditions"]["thumb"]["variants"] == {}
