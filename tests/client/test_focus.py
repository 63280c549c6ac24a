"""The Python SDK's focus (issue 49): upload(focus=(x, y)) sends it as the route takes it
(`?focus=x,y` in plain decimals on /images, `"focus": {"x", "y"}` in /uploads), and a job
exposes the focus it shows; against a scripted API. The CLI's is in test_cli.py."""
from __future__ import annotations

import json

import httpx

from image_jobs import Focus
from tests.client.fakes import JOB_PATH, JPEG, FakeApi, FakeTime, accepted, job_answer

IMAGES, UPLOADS = "/api/v1/images", "/api/v1/uploads"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


def test_upload_sends_the_focus_in_the_images_query_in_plain_decimals():
    api = FakeApi(FakeTime()).on("POST", IMAGES, accepted())
    api.client().upload(JPEG, focus=(0.31, 0.00001), formats=["webp"])
    (request,) = api.sent()
    assert request.url.params["focus"] == "0.31,0.00001" and request.url.params["formats"] == "webp"


def test_upload_sends_the_focus_as_a_member_of_a_direct_upload():
    api = FakeApi(FakeTime()).on("POST", UPLOADS, accepted("queued"))
    api.client(max_upload_bytes=1000).upload(PNG, focus=(0, 1))
    (create,) = api.sent("POST", UPLOADS)
    assert json.loads(create.content)["focus"] == {"x": 0.0, "y": 1.0}


def test_without_a_focus_nothing_is_sent():
    api = FakeApi(FakeTime()).on("POST", IMAGES, accepted())
    api.client().upload(JPEG)
    (request,) = api.sent()
    assert "focus" not in request.url.params


def test_a_job_exposes_its_focus_and_none_before_or_from_before():
    api = FakeApi(FakeTime()).on("POST", IMAGES, accepted())
    api.on("GET", JOB_PATH, job_answer("ready", focus={"x": 0.31, "y": 0.22, "source": "faces"}),
           job_answer("ready"))
    job = api.client().upload(JPEG)
    assert job.focus is None  # queued: none yet
    job.refresh()
    assert job.focus == Focus(x=0.31, y=0.22, source="faces") and job.focus["source"] == "faces"
    job.refresh()
    assert job.focus is None  # a job made before the focus shows none
