"""Exact duplicates of one owner through HTTP on every backend: the second upload of the same
bytes is ready with `duplicate_of` and renditions of its own (S3 CopyObject), which outlive
the first job's DELETE; another owner's same bytes are made afresh; after the DELETE the
first is not reused."""
from __future__ import annotations

import requests

from tests.e2e.test_images_api import headers, poll
from tests.images import photo


def ready(runner, data, owner="alice", formats="webp"):
    r = requests.post(f"{runner.api}/api/v1/images?formats={formats}", data=data, timeout=30,
                      headers=headers(owner, **{"Content-Type": "image/jpeg"}))
    assert r.status_code == 202, r.text
    job = poll(runner, r.headers["Location"], owner).json()
    assert job["status"] == "ready", job
    return r.headers["Location"], job


def files(job) -> dict[str, bytes]:
    found = {}
    for name, rendition in job["renditions"].items():
        found[name] = requests.get(rendition["url"], timeout=10).content
        for media, variant in rendition["variants"].items():
            found[f"{name} {media}"] = requests.get(variant["url"], timeout=10).content
    return found


def test_the_same_owners_duplicate_is_copied_and_outlives_the_first(runner):
    data = photo("chelsea.png")
    first_at, first = ready(runner, data)
    second_at, second = ready(runner, data)
    assert "duplicate_of" not in first and second["duplicate_of"] == first["job_id"]
    assert second["phash"] == first["phash"] and second["source"] == first["source"]
    assert all(second["job_id"] in r["url"] for r in second["renditions"].values())
    copied = files(second)
    assert copied == files(first) and copied
    _, other = ready(runner, data, owner="bob")
    assert "duplicate_of" not in other

    assert requests.delete(runner.api + first_at, headers=headers(), timeout=10).status_code == 204
    again = poll(runner, second_at).json()  # read anew: fresh URLs of its own objects
    assert files(again) == copied
    _, third = ready(runner, data)
    assert third.get("duplicate_of") == second["job_id"]  # the first is gone; the second is reused
