"""The photo's facts (`source`) through HTTP on every backend: GET and the list show them,
nothing private comes out, in the JSON or in any rendition."""
from __future__ import annotations

import io

import requests
from PIL import Image

from tests.e2e.test_images_api import headers, poll, upload_raw
from tests.images import DISPLAY_P3_PROFILE, PRIVATE_MARKERS, photo_as, private_exif


def test_a_turned_wide_gamut_heic_reads_upright_with_its_capture_time_and_nothing_private(runner):
    data = photo_as("HEIF", exif=private_exif(orientation=6).tobytes(), icc_profile=DISPLAY_P3_PROFILE)
    r = upload_raw(runner, data, "image/heic")
    assert r.status_code == 202, r.text
    job = poll(runner, r.headers["Location"]).json()
    assert job["status"] == "ready", job
    assert job["source"] == {"width": 400, "height": 600, "format": "heic", "bytes": len(data),
                             "captured_at": "2024-05-01T12:34:56+02:00", "color_space": "display-p3",
                             "has_alpha": False}
    assert len(job["phash"]) == 16 and int(job["phash"], 16) >= 0
    listed = requests.get(f"{runner.api}/api/v1/image-jobs", headers=headers(), timeout=10).json()["jobs"]
    assert [j["source"] for j in listed if j["job_id"] == job["job_id"]] == [job["source"]]
    assert not [m for m in PRIVATE_MARKERS if m in r.text + str(job) + str(listed)]
    display = job["renditions"]["display"]
    assert display["width"] < display["height"]  # upright as the facts say
    for rendition in job["renditions"].values():
        file = requests.get(rendition["url"], timeout=10).content
        assert not [m for m in PRIVATE_MARKERS if m.encode() in file]
        with Image.open(io.BytesIO(file)) as im:
            assert not im.getexif() and "icc_profile" not in im.info
