"""Chalice wiring only: routes, the SQS handler, error mapping.

Each view parses the request, calls one use case and shapes the response.
"""
from __future__ import annotations

import functools
import os
import threading
import time
import uuid

from chalice import Chalice, CognitoUserPoolAuthorizer, CORSConfig, Rate, Response

from chalicelib.config import Settings
from chalicelib.domain.errors import DomainError, PoisonMessage, TransientError
from chalicelib.domain.vocabulary import ErrorCode
from chalicelib.http import access, auth, problems, request_body, views
from chalicelib.runtime import correlation, deadline
from chalicelib.runtime.logs import get_logger
from chalicelib.runtime.metrics import EmfMetrics

settings = Settings.from_environ(os.environ)
app = Chalice(app_name="image-jobs")
# Every route answers browsers on another origin (the page in web/); set before the routes,
# which copy it. Chalice adds the OPTIONS preflight routes (no authorizer) and the headers.
app.api.cors = CORSConfig(
    allow_origin=settings.cors_allow_origin,
    allow_headers=["Idempotency-Key"],
    expose_headers=["Location", "Retry-After", "Idempotent-Replayed"],
    max_age=600,
)
# API Gateway must pass these bodies through as bytes, not mangle them as text: every label
# the upload route accepts.
app.api.binary_types.extend(t for t in request_body.BINARY_TYPES if t not in app.api.binary_types)
log = get_logger("app")
# In the cloud API Gateway checks the Cognito token before a view runs (AUTH_MODE=cognito);
# locally there is no authorizer and chalicelib/http/auth.py checks the HS256 token itself.
authorizer = (
    CognitoUserPoolAuthorizer("image-jobs-users", provider_arns=[settings.cognito_user_pool_arn])
    if settings.auth_mode == "cognito" else None
)
# /api/v1 here and as clients see it in the cloud, behind API Gateway's stage "api".
ROOT = settings.route_prefix


_use_cases = None
_use_cases_lock = threading.Lock()


def use_cases():
    """Built once per warm Lambda (or local process), on first use, not at import; the
    lock keeps a burst of first requests from building it several times over."""
    global _use_cases
    if _use_cases is None:
        with _use_cases_lock:
            if _use_cases is None:
                from chalicelib.bootstrap import build_use_cases

                _use_cases = build_use_cases(settings)
    return _use_cases


def problem_response(code: ErrorCode, detail: str = "", retry_after=None, allow=None,
                     instance=None) -> Response:
    headers = {"Content-Type": problems.CONTENT_TYPE, "Cache-Control": "no-store"}
    if retry_after:
        headers["Retry-After"] = str(retry_after)
    if code is ErrorCode.UNAUTHORIZED:
        headers["WWW-Authenticate"] = 'Bearer realm="image-jobs"'
    if allow:
        headers["Allow"] = ", ".join(allow)
    return Response(
        body=problems.problem(code, detail or None, instance or correlation.instance()),
        status_code=problems.status_of(code),
        headers=headers,
    )


api_metrics = EmfMetrics(settings.metrics_service)
access_log = get_logger("http")  # the component of the local server's access lines too


@app.middleware("http")
def observe(request, get_response):
    """Every request: a correlation id (the Lambda request id) on its log lines, in problem
    bodies as `instance` and in the X-Request-Id header; then its metrics, and its access
    line if it was an error or LOG_EVERY_REQUEST is set (the local runner)."""
    request_id = correlation.begin(correlation.of_context(request.lambda_context))
    started = time.monotonic()
    response = get_response(request)
    response.headers["X-Request-Id"] = request_id
    access.request_done(api_metrics, access_log, request.method, request.path, request.uri_params,
                        response.status_code, response.body, (time.monotonic() - started) * 1000,
                        log_success=settings.log_every_request)
    return response


def api(view):
    """Turns every error into problem+json; nothing internal ever reaches the client."""

    @functools.wraps(view)
    def wrapper(*args, **kwargs):
        try:
            with _invocation(getattr(app, "lambda_context", None), settings.api_timeout_seconds):
                return view(*args, **kwargs)
        except DomainError as error:
            return problem_response(error.code, error.detail, error.retry_after)
        except TransientError:
            # A dependency (table, storage, queue) is down or timed out: worth a retry.
            log.exception("backend_unavailable")
            return problem_response(
                ErrorCode.STORAGE_UNAVAILABLE, retry_after=settings.retry_after_seconds
            )
        except Exception:
            # Our own fault. The client gets an id to quote; the log line has the same id
            # beside the details, which never leave the service.
            # The request's correlation id (the Lambda request id in the cloud), which every
            # other line of this request carries too.
            instance = correlation.instance() or f"urn:uuid:{uuid.uuid4()}"
            log.exception("internal_error", instance=instance)
            return problem_response(ErrorCode.INTERNAL_ERROR, instance=instance)

    return wrapper


def _invocation(lambda_context, configured_seconds: int):
    """The time budget of one invocation (chalicelib/runtime/deadline.py): what Lambda says is left,
    at most the function's configured timeout."""
    return deadline.invocation(deadline.seconds_left(lambda_context, configured_seconds),
                               deadline.SdkLimits.for_settings(settings))


def _owner() -> str:
    """The caller, within its request rate (429 rate_limited past it)."""
    request = app.current_request
    owner = auth.owner_of(request.headers, request.context, settings)
    use_cases().admission.check_rate(owner)
    return owner


def _accepted_response(accepted) -> Response:
    headers = {
        "Location": views.job_location(accepted.job),
        "Retry-After": str(settings.retry_after_seconds),
        "Cache-Control": "no-store",
    }
    if accepted.replayed:
        headers["Idempotent-Replayed"] = "true"
    return Response(status_code=202, body=views.accepted_body(accepted), headers=headers)


def _job_response(job) -> Response:
    headers = {"Cache-Control": "no-store"}
    if not job.status.terminal:
        headers["Retry-After"] = str(settings.retry_after_seconds)
    return Response(status_code=200, body=views.job_body(job, use_cases().manage.urls(job)), headers=headers)


# Every route takes every content type: a view answers a wrong one as problem+json itself
# (Chalice's own 415 is not problem+json), and a view that reads no body ignores it.
ANY = ["*/*"]


@app.route(ROOT + "/images", methods=["POST"], content_types=ANY, authorizer=authorizer)
@api
def upload_image():
    owner = _owner()
    request = app.current_request
    data = request_body.image_bytes(
        request.raw_body, request.headers.get("content-type", ""), settings.max_upload_bytes
    )
    key = request_body.idempotency_key(request.headers.get("idempotency-key"))
    return _accepted_response(use_cases().uploads.accept_upload(owner, data, key))


@app.route(ROOT + "/uploads", methods=["POST"], content_types=ANY, authorizer=authorizer)
@api
def create_direct_upload():
    owner = _owner()
    request = app.current_request
    body = request_body.json_object(request.raw_body, request.headers.get("content-type", ""),
                                    {"content_type": str, "size": int})
    key = request_body.idempotency_key(request.headers.get("idempotency-key"))
    return _accepted_response(
        use_cases().uploads.create_direct_upload(owner, body.get("content_type"), body.get("size"), key)
    )


@app.route(ROOT + "/image-jobs/{job_id}", methods=["GET"], content_types=ANY, authorizer=authorizer)
@api
def get_image_job(job_id):
    return _job_response(use_cases().manage.get_job(_owner(), job_id))


@app.route(ROOT + "/image-jobs/{job_id}/cancel", methods=["POST"], content_types=ANY,
           authorizer=authorizer)
@api
def cancel_image_job(job_id):
    return _job_response(use_cases().manage.cancel(_owner(), job_id))


@app.route(ROOT + "/image-jobs/{job_id}", methods=["DELETE"], content_types=ANY, authorizer=authorizer)
@api
def delete_image_job(job_id):
    use_cases().manage.delete(_owner(), job_id)
    return Response(status_code=204, body="", headers={"Cache-Control": "no-store"})


@app.on_sqs_message(queue=settings.events_queue_name, batch_size=1,
                    maximum_concurrency=settings.worker_max_concurrency)
def handle_object_created(event):
    """One storage notification. Raising returns the message to the queue for a retry."""
    correlation.begin(correlation.of_context(event.context))
    for record in event:
        try:
            handle_message(record.body, getattr(event, "context", None))
        except PoisonMessage as error:
            # No retry can fix it: drop it with a line, never crash-loop on it.
            log.error("poison_message_dropped", reason=str(error))


def handle_message(body, lambda_context=None) -> None:
    """The one path from a message body to the worker, for SQS (Lambda and local) and AMQP.

    The invocation's time is what `lambda_context` (Lambda, or the local worker's stand-in)
    says is left, by default the worker function's timeout. Raises PoisonMessage for a
    message no retry can fix, TransientError (or anything else) when the message should come
    back later.
    """
    from chalicelib.domain.events import parse_message  # the worker's, not the API's

    with _invocation(lambda_context, settings.worker_timeout_seconds):
        for item in parse_message(body):
            use_cases().worker.handle_object_created(item)


def _rate(seconds: int) -> Rate:
    """The coarsest whole unit: a schedule in days reads better than one in minutes."""
    for unit, size in ((Rate.DAYS, 86400), (Rate.HOURS, 3600)):
        if seconds % size == 0:
            return Rate(seconds // size, unit=unit)
    return Rate(max(1, seconds // 60), unit=Rate.MINUTES)


@app.schedule(_rate(settings.sweep_interval_seconds))
def sweep(event):
    """Leases, re-drives, upload deadlines and retention: see usecases/sweeper.py."""
    correlation.begin(correlation.of_context(event.context))
    with _invocation(event.context, settings.sweep_timeout_seconds):
        use_cases().sweeper.sweep()


@app.schedule(_rate(settings.orphan_sweep_interval_seconds))
def sweep_orphans(event):
    """Objects left without a job, this minute's share of the bucket: see usecases/orphans.py."""
    correlation.begin(correlation.of_context(event.context))
    with _invocation(event.context, settings.orphan_sweep_timeout_seconds):
        use_cases().sweeper.sweep_orphans(scheduled=True)


# -- webhooks: CONTRACT.md "Notifications"; the rules are in chalicelib/usecases/webhooks.py --
_NO_STORE = {"Cache-Control": "no-store"}


@app.route(ROOT + "/webhook", methods=["PUT"], content_types=ANY, authorizer=authorizer)
@api
def put_webhook():
    owner = _owner()
    request = app.current_request
    url = request_body.json_object(request.raw_body, request.headers.get("content-type", ""),
                                   {"url": str}).get("url")
    registration = use_cases().webhooks.register(owner, url)
    return Response(status_code=200, headers=_NO_STORE,
                    body=views.webhook_body(registration.webhook, registration.show_secret))


@app.route(ROOT + "/webhook", methods=["GET"], content_types=ANY, authorizer=authorizer)
@api
def get_webhook():
    return Response(status_code=200, headers=_NO_STORE,
                    body=views.webhook_body(use_cases().webhooks.show(_owner())))


@app.route(ROOT + "/webhook", methods=["DELETE"], content_types=ANY, authorizer=authorizer)
@api
def delete_webhook():
    use_cases().webhooks.remove(_owner())
    return Response(status_code=204, body="", headers=_NO_STORE)


@app.route(ROOT + "/webhook/rotate-secret", methods=["POST"], content_types=ANY,
           authorizer=authorizer)
@api
def rotate_webhook_secret():
    hook = use_cases().webhooks.rotate(_owner())
    return Response(status_code=200, headers=_NO_STORE, body=views.webhook_body(hook, show_secret=True))


@app.on_sqs_message(queue=settings.webhook_queue_name, batch_size=1,
                    maximum_concurrency=settings.webhook_max_concurrency)
def deliver_webhook(event):
    """One webhook event. A retry is a new message that carries the event's attempts; a copy
    that came before it was due raises RetryLater, which keeps Lambda (or the local worker)
    from deleting it (its visibility is already set to when it is due)."""
    correlation.begin(correlation.of_context(event.context))
    with _invocation(event.context, settings.webhook_function_timeout_seconds):
        for record in event:
            try:
                use_cases().webhooks.deliver(record.body, record.receipt_handle)
            except PoisonMessage:
                log.error("poison_message_dropped", queue="webhooks")


# Methods a route may be asked for that it does not have. Their answer is 405 with `Allow`,
# as problem+json, from the app itself, so API Gateway sends them on instead of answering
# with its own error. It comes before authentication: which methods a path has is public.
# OPTIONS stays with CORS preflight; methods outside this list (TRACE, say) never reach the
# app: API Gateway refuses them, and local/chalice_local.py answers them like this.
OTHER_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
_NOT_ALLOWED_VIEW = "method_not_allowed"


def allowed_methods(path: str) -> list[str]:
    """The methods the route at `path` really has (its 405 answers aside)."""
    return sorted(method for method, entry in app.routes[path].items()
                  if entry.view_name != _NOT_ALLOWED_VIEW)


def _not_allowed(path: str):
    def method_not_allowed(**_params):
        return problem_response(ErrorCode.METHOD_NOT_ALLOWED,
                                f"{app.current_request.method} is not allowed here",
                                allow=allowed_methods(path))

    return method_not_allowed


# Last, so that it covers every route declared above.
for _path in list(app.routes):
    _missing = [m for m in OTHER_METHODS if m not in app.routes[_path]]
    if _missing:
        app.route(_path, methods=_missing, content_types=ANY, name=_NOT_ALLOWED_VIEW)(_not_allowed(_path))
