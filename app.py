"""Chalice wiring only: routes, the SQS handler, error mapping.

Each view parses the request, calls one service function and shapes the response.
"""
from __future__ import annotations

import functools
import os

from chalice import Chalice, Response

from chalicelib import auth, problems, request_body, views
from chalicelib.config import Settings
from chalicelib.events import PoisonMessage, parse_message
from chalicelib.logs import get_logger
from chalicelib.ports import DomainError, TransientError

settings = Settings.from_environ(os.environ)
app = Chalice(app_name="image-jobs")
# API Gateway must pass these bodies through as bytes, not mangle them as text.
app.api.binary_types.extend([
    "multipart/form-data", "image/webp", "image/tiff", "image/avif", "image/heic", "image/heif",
])
log = get_logger("app")


@functools.lru_cache(maxsize=1)
def service():
    """Built once per warm Lambda (or local process), on first use, not at import."""
    from chalicelib.bootstrap import build_service

    return build_service(settings)


def problem_response(code: str, detail: str = "", retry_after=None) -> Response:
    headers = {"Content-Type": problems.CONTENT_TYPE, "Cache-Control": "no-store"}
    if retry_after:
        headers["Retry-After"] = str(retry_after)
    if code == "unauthorized":
        headers["WWW-Authenticate"] = 'Bearer realm="image-jobs"'
    return Response(
        body=problems.problem(code, detail or None),
        status_code=problems.status_of(code),
        headers=headers,
    )


def api(view):
    """Turns domain errors into problem+json; nothing internal ever reaches the client."""

    @functools.wraps(view)
    def wrapper(*args, **kwargs):
        try:
            return view(*args, **kwargs)
        except DomainError as error:
            return problem_response(error.code, error.detail, error.retry_after)
        except TransientError:
            log.exception("backend_unavailable")
            return problem_response(
                "storage_unavailable", retry_after=settings.retry_after_seconds
            )

    return wrapper


def _owner() -> str:
    request = app.current_request
    return auth.owner_of(request.headers, request.context, settings)


# Every content type reaches the view, which answers 415 as problem+json itself.
@app.route("/api/v1/images", methods=["POST"], content_types=["*/*"])
@api
def upload_image():
    owner = _owner()
    request = app.current_request
    data = request_body.image_bytes(
        request.raw_body, request.headers.get("content-type", ""), settings.max_upload_bytes
    )
    job = service().accept_upload(owner, data)
    return Response(
        status_code=202,
        body=views.accepted_body(job),
        headers={
            "Location": views.job_location(job),
            "Retry-After": str(settings.retry_after_seconds),
            "Cache-Control": "no-store",
        },
    )


@app.route("/api/v1/image-jobs/{job_id}", methods=["GET"])
@api
def get_image_job(job_id):
    owner = _owner()
    svc = service()
    job = svc.get_job(owner, job_id)
    headers = {"Cache-Control": "no-store"}
    if not job.status.terminal:
        headers["Retry-After"] = str(settings.retry_after_seconds)
    return Response(status_code=200, body=views.job_body(job, svc.urls(job)), headers=headers)


@app.on_sqs_message(queue=settings.queue_name, batch_size=1)
def handle_object_created(event):
    """One storage notification. Raising returns the message to the queue for a retry."""
    for record in event:
        try:
            created = parse_message(record.body)
        except PoisonMessage as error:
            # No retry can fix it: drop it with a line, never crash-loop on it.
            log.error("poison_message_dropped", reason=str(error))
            continue
        for item in created:
            service().handle_object_created(item)
