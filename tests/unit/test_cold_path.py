"""What a fresh API process loads before it answers a GET, and how it makes its clients.

A GET reads the table and presigns two URLs: it must not pay for the imaging stack (Pillow,
pillow-heif, LittleCMS) that only uploads and the worker need, nor for boto3, nor for
structlog when it logs nothing; in the cloud (Cognito checks the token) not for PyJWT either.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from botocore.config import Config

from chalicelib.adapters.botocore_clients import Clients
from chalicelib.bootstrap import build_use_cases
from chalicelib.config import Settings

ROOT = Path(__file__).resolve().parents[2]

# Runs in a fresh interpreter: serve one GET of a ready job, then one POST, through the
# Lambda entry point, and report what was imported after each.
CHILD = r"""
import base64, json, os, sys, time
from datetime import datetime, timedelta, timezone

import app
from chalicelib.http.auth import mint_token
from chalicelib.domain.jobs import Job, JobStatus, Rendition
from chalicelib.domain.renditions import RenditionName
from chalicelib.usecases import UseCases
from tests.fakes import FakeJobStore, FakeObjectStore, fake_context

WATCH = ("PIL", "PIL.ImageCms", "pillow_heif", "boto3", "chalicelib.imaging.render", "structlog", "jwt",
         "cryptography", "multipart", "chalicelib.imaging.limits", "chalicelib.domain.events", "chalicelib.imaging.sandbox")
seen = {"after import": [m for m in WATCH if m in sys.modules]}
jobs = FakeJobStore()
ctx = fake_context(settings=app.settings, jobs=jobs, objects=FakeObjectStore())
service = UseCases(ctx)
app.use_cases = lambda: service
now = datetime.now(timezone.utc)
job = Job(job_id="6f1c1d7e-9a55-4e1b-8f55-1b2f6cf0e111", owner="alice", status=JobStatus.PROCESSING,
          created_at=now, updated_at=now, expires_at=now + timedelta(days=1), original_key="o", attempt=1)
shown = lambda name: Rendition(f"renditions/{job.job_id}/{name}.jpg", 10, 10, "image/jpeg")
jobs.items[job.job_id] = job.ready(now, {name: shown(name) for name in RenditionName}, timedelta(days=1))
cloud = os.environ["AUTH_MODE"] == "cognito"
# In the cloud API Gateway has checked the token and passes its claims.
token = "checked-by-api-gateway" if cloud else mint_token("alice", app.settings.jwt_secret, 60, int(time.time()))
claims = {"authorizer": {"claims": {"sub": "alice", "token_use": "id", "aud": "app"}}} if cloud else {}


def event(method, resource, path, params=None, body=None, content_type=None):
    headers = {"authorization": "Bearer " + token}
    if content_type:
        headers["content-type"] = content_type
    return {"resource": resource, "path": path, "httpMethod": method, "headers": headers,
            "multiValueHeaders": {k: [v] for k, v in headers.items()},
            "queryStringParameters": None, "multiValueQueryStringParameters": None,
            "pathParameters": params, "stageVariables": None,
            "requestContext": {"httpMethod": method, "resourcePath": resource, "path": path, **claims},
            "body": base64.b64encode(body).decode() if body else None, "isBase64Encoded": bool(body)}


prefix = app.settings.route_prefix
got = app.app(event("GET", prefix + "/image-jobs/{job_id}", prefix + "/image-jobs/" + job.job_id,
                    {"job_id": job.job_id}), None)
seen["get"] = [got["statusCode"], json.loads(got["body"])["status"]]
seen["after GET"] = [m for m in WATCH if m in sys.modules]
posted = app.app(event("POST", prefix + "/images", prefix + "/images", body=sys.stdin.buffer.read(),
                       content_type="image/jpeg"), None)
seen["post"] = posted["statusCode"]
seen["after POST"] = [m for m in WATCH if m in sys.modules]
print(json.dumps(seen))
"""


def first_get_then_post(auth_mode: str) -> dict:
    from tests.images import jpeg

    env = dict(os.environ, PYTHONPATH=str(ROOT), AUTH_MODE=auth_mode,
               COGNITO_USER_POOL_ARN="arn:aws:cognito-idp:us-east-1:000000000000:userpool/us-east-1_test",
               COGNITO_APP_CLIENT_IDS="app")
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env, input=jpeg(),
                          capture_output=True, check=True)
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def test_a_get_loads_only_what_it_needs_and_an_upload_loads_the_imaging_stack():
    seen = first_get_then_post("jwt")  # the local API checks HS256 tokens itself
    assert seen["get"] == [200, "ready"]
    assert seen["after import"] == []
    assert set(seen["after GET"]) <= {"jwt", "cryptography"}
    # The same watch sees them once an upload needs them: the check above can fail.
    assert seen["post"] == 202
    assert {"PIL", "PIL.ImageCms", "pillow_heif", "chalicelib.imaging.render", "structlog",
            "multipart"} <= set(seen["after POST"])


def test_in_the_cloud_a_get_loads_neither_pyjwt_nor_cryptography():
    seen = first_get_then_post("cognito")
    assert seen["get"] == [200, "ready"]
    assert seen["after import"] == [] and seen["after GET"] == []
    assert seen["post"] == 202 and "jwt" not in seen["after POST"]


def test_a_lazy_client_is_made_once_on_first_use_even_by_racing_threads(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    clients = Clients("us-east-1")
    made = []
    real = clients.create
    monkeypatch.setattr(clients, "create", lambda *args: made.append(args) or real(*args))
    lazy = clients.lazy("s3", "http://127.0.0.1:9", Config(signature_version="s3v4",
                                                            s3={"addressing_style": "path"}))
    assert made == []
    metas = []
    threads = [threading.Thread(target=lambda: metas.append(lazy.meta)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1 and all(meta is metas[0] for meta in metas)
    url = lazy.generate_presigned_url("get_object", Params={"Bucket": "b", "Key": "k"}, ExpiresIn=60)
    assert url.startswith("http://127.0.0.1:9/b/k?") and "X-Amz-Signature=" in url


def test_presigned_urls_name_the_public_endpoint_and_storage_calls_the_private_one(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    private = Settings(endpoint_url="http://127.0.0.1:9")
    public = Settings(endpoint_url="http://127.0.0.1:9", public_s3_endpoint_url="http://images.test:8080")
    for settings, host in ((private, "http://127.0.0.1:9/"), (public, "http://images.test:8080/")):
        objects = build_use_cases(settings).ctx.objects
        assert objects.presign_get("renditions/x/display.jpg", 60).startswith(host)
        assert objects._client.meta.endpoint_url == "http://127.0.0.1:9"


def test_building_and_presigning_a_ready_jobs_urls_make_no_s3_or_sqs_client(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    made = []
    real = Clients.create
    monkeypatch.setattr(Clients, "create", lambda self, service, *args: made.append(service) or real(self, service, *args))
    objects = build_use_cases(Settings(endpoint_url="http://127.0.0.1:9")).ctx.objects
    assert objects.presign_get("renditions/x/1/display.jpg", 60).startswith("http://127.0.0.1:9/")
    assert made == []


def test_a_client_is_made_without_listing_every_service_and_a_bad_name_still_fails(monkeypatch):
    """botocore checks a service's name by listing all ~450 services' folders; the shared
    session's loader looks in that service's folder only (about 15 ms of a cold start)."""
    import botocore.loaders
    from botocore.exceptions import UnknownServiceError

    from chalicelib.adapters import botocore_clients

    monkeypatch.setattr(botocore_clients, "_loaders", {})  # a cold process's: nothing loaded yet
    listed = []
    real = os.listdir
    monkeypatch.setattr(botocore.loaders.os, "listdir", lambda path: listed.append(path) or real(path))
    session = Clients("us-east-1").session
    client = session.create_client("dynamodb", region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
                                   aws_access_key_id="a", aws_secret_access_key="b")
    assert client.meta.service_model.service_name == "dynamodb"
    assert 0 < len(listed) < 10, listed
    try:
        session.create_client("dynamodbx", region_name="us-east-1")
    except UnknownServiceError as error:
        assert "dynamodbx" in str(error) and "dynamodb" in str(error)  # the names botocore knows
    else:
        raise AssertionError("an unknown service was accepted")
    assert "sqs" in session.get_available_services()


def test_every_session_of_a_process_shares_one_loader_per_data_path(monkeypatch):
    """A new Context (a test's, a benchmark's) makes a session of its own: its clients reuse the
    models the process has parsed, as one session's clients do; another AWS_DATA_PATH gets its own."""
    from chalicelib.adapters import botocore_clients

    monkeypatch.setattr(botocore_clients, "_loaders", {})
    first, second = Clients("us-east-1").session, Clients("eu-west-1").session
    loader = first.get_component("data_loader")
    assert second.get_component("data_loader") is loader
    model = loader.load_service_model("dynamodb", "service-2")
    assert second.get_component("data_loader").load_service_model("dynamodb", "service-2") is model
    monkeypatch.setenv("AWS_DATA_PATH", "/nonexistent-models")
    other = Clients("us-east-1").session.get_component("data_loader")
    assert other is not loader and "/nonexistent-models" in other.search_paths
