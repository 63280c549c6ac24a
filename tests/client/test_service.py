"""The SDK and the CLI as the app's backend uses them, against the real local runner:
metadata on uploads (through /images and straight to storage), client.jobs() paging the
owner's jobs, and the service principal's token paging any owner's and holding the service
webhook."""
from __future__ import annotations

import json
import time

import pytest

from chalicelib.config import Settings
from chalicelib.http.auth import SERVICE_SCOPE, mint_token
from image_jobs import Client, Forbidden, InvalidRequest, JobNotFound, WebhookNotFound
from tests.client.conftest import token_for
from tests.images import jpeg


def service_token() -> str:
    return mint_token("app-backend", Settings().jwt_secret, 3600, int(time.time()), scope=SERVICE_SCOPE)


def test_metadata_goes_up_with_either_route_and_comes_back_on_the_job(runner, owner, tmp_path):
    small = tmp_path / "small.jpg"
    small.write_bytes(jpeg())
    with Client(runner.api, token_for(owner), max_upload_bytes=10 ** 9) as client:
        through_api = client.upload(small, metadata={"post": "p-1", "note": "ünï"})
        assert through_api.wait(deadline=60).metadata == {"post": "p-1", "note": "ünï"}
    with Client(runner.api, token_for(owner), max_upload_bytes=1) as client:
        direct = client.upload(small, metadata={"post": "p-2"})
        assert direct.wait(deadline=60).metadata == {"post": "p-2"}
        with pytest.raises(InvalidRequest):
            client.upload(small, metadata={"bad key": "x"})


def test_the_sdk_gives_the_photos_facts_from_either_route(runner, owner, tmp_path):
    from tests.images import photo_as, private_exif

    turned = tmp_path / "turned.jpg"
    turned.write_bytes(photo_as("JPEG", exif=private_exif(orientation=6).tobytes()))
    for threshold in (10 ** 9, 1):  # through /images, then straight to storage
        with Client(runner.api, token_for(owner), max_upload_bytes=threshold) as client:
            job = client.upload(turned).wait(deadline=60)
            assert job.source == {"width": 400, "height": 600, "format": "jpeg", "bytes": turned.stat().st_size,
                                  "captured_at": "2024-05-01T12:34:56+02:00", "color_space": "srgb",
                                  "has_alpha": False, "animated": False, "frames": 1, "duration_ms": None}
            assert job.phash is not None and len(job.phash) == 16
    assert job.duplicate_of is not None  # the second: the same owner's same bytes


def test_jobs_pages_through_every_job_newest_first_and_filters_by_status(runner, owner, tmp_path):
    photo = tmp_path / "p.jpg"
    photo.write_bytes(jpeg())
    with Client(runner.api, token_for(owner)) as client:
        made = [client.upload(photo, metadata={"n": str(i)}) for i in range(5)]
        for job in made:
            job.wait(deadline=60)
        listed = list(client.jobs(page_size=2))
        assert [j.job_id for j in listed] == [j.job_id for j in reversed(made)]
        assert [j.metadata["n"] for j in listed] == ["4", "3", "2", "1", "0"]
        assert all(j.owner is None for j in listed)
        assert [j.job_id for j in client.jobs(status=["failed", "cancelled"])] == []
        assert len(list(client.jobs(status="ready", page_size=3))) == 5
        with pytest.raises(Forbidden):
            list(client.jobs(owner=owner))  # a user token on the service's list
    with Client(runner.api, service_token()) as service:
        theirs = list(service.jobs(owner=owner, page_size=2))
        assert [j.job_id for j in theirs] == [j.job_id for j in reversed(made)]
        assert {j.owner for j in theirs} == {owner}
        assert theirs[0].refresh().status == "ready"  # read again on the service's own route
        with pytest.raises(Forbidden):
            service.upload(photo)


def test_the_service_webhook_from_the_sdk(runner, owner):
    with Client(runner.api, service_token()) as service:
        made = service.set_service_webhook("http://127.0.0.1:9/hooks", events=["ready", "queued"])
        try:
            assert made["secret"].startswith("whsec_") and made["events"] == ["queued", "ready"]
            assert service.service_webhook()["url"] == "http://127.0.0.1:9/hooks"
            rotated = service.rotate_service_webhook_secret()
            assert rotated["secret"] != made["secret"]
            tried = service.test_service_webhook()  # nothing listens on port 9
            assert (tried["event"], tried["outcome"], tried["reason"]) == ("webhook.test", "failed", "refused")
            assert service.service_webhook()["deliveries"][0] == tried
        finally:
            service.delete_service_webhook()
        assert service.service_webhook() == {"url": None}
    with Client(runner.api, token_for(owner)) as user, pytest.raises(Forbidden):
        user.service_webhook()



def test_the_owners_webhook_from_the_sdk(runner, owner):
    """The owner's webhook has the service webhook's calls, on its own routes (issue 52)."""
    with Client(runner.api, token_for(owner)) as user:
        assert user.webhook() == {"url": None}
        with pytest.raises(WebhookNotFound):
            user.test_webhook()
        made = user.set_webhook("http://127.0.0.1:9/mine")
        try:
            assert made["secret"].startswith("whsec_") and user.webhook()["url"] == "http://127.0.0.1:9/mine"
            assert user.rotate_webhook_secret()["secret"] != made["secret"]
            tried = user.test_webhook()  # nothing listens on port 9
            assert (tried["event"], tried["outcome"], tried["reason"]) == ("webhook.test", "failed", "refused")
            assert user.webhook()["deliveries"][0] == tried
        finally:
            user.delete_webhook()
        assert user.webhook() == {"url": None}

def cli(runner, token, cwd):
    """The installed `image-jobs` command against the runner, with this token."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    command = Path(sys.executable).with_name("image-jobs")
    env = {**os.environ, "IMAGE_JOBS_URL": runner.api, "IMAGE_JOBS_TOKEN": token}
    return lambda *a: subprocess.run([str(command), *a], cwd=cwd, env=env, capture_output=True,
                                     text=True, timeout=180, stdin=subprocess.DEVNULL)


def test_the_cli_uploads_with_metadata_and_lists(runner, owner, tmp_path):
    photo = tmp_path / "p.jpg"
    photo.write_bytes(jpeg())
    run = cli(runner, token_for(owner), tmp_path)
    up = run("upload", "--json", "--wait", "--metadata", "post=p-9", "--metadata", "kind=avatar", str(photo))
    assert up.returncode == 0, up.stderr
    job = json.loads(up.stdout.splitlines()[0])
    assert job["metadata"] == {"post": "p-9", "kind": "avatar"}
    listed = run("list", "--json", "--status", "ready")
    assert listed.returncode == 0, listed.stderr
    assert [json.loads(line)["job_id"] for line in listed.stdout.splitlines()] == [job["job_id"]]


def test_a_service_client_reads_waits_and_deletes_any_owners_job_by_its_id(runner, owner, tmp_path):
    """With a service token the SDK takes the service's routes by itself (its token's scope
    says which client it is): job(id).refresh(), wait() and delete() work, where they were
    403 on the owner's routes; jobs() without owner= says what is missing (issue 47, 10 c)."""
    with Client(runner.api, token_for(owner)) as user:
        made = user.upload(jpeg())
    with Client(runner.api, service_token()) as service:
        assert service.service
        job = service.job(made.job_id)
        assert job.refresh().owner == owner
        assert job.wait(deadline=60).ready
        assert service.job(made.location).refresh().owner == owner  # the Location the app was given
        with pytest.raises(ValueError, match="owner="):
            next(service.jobs())
        job.delete()
        with pytest.raises(JobNotFound):
            job.refresh()


def test_the_cli_with_a_service_token_lists_one_owner_and_says_so_without(runner, owner, tmp_path):
    with Client(runner.api, token_for(owner)) as user:
        made = user.upload(jpeg())
    run = cli(runner, service_token(), tmp_path)
    bare = run("list")
    assert bare.returncode == 2 and "--owner" in bare.stderr
    listed = run("list", "--json", "--owner", owner)
    assert listed.returncode == 0, listed.stderr
    assert [json.loads(line)["job_id"] for line in listed.stdout.splitlines()] == [made.job_id]
    shown = run("status", "--json", made.job_id)  # read on the service's route
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout.splitlines()[0])["owner"] == owner
