"""Chalice declarations only: the routes, the event handlers and the schedules.

Each view reads the request (chalicelib/http/request_body.py), calls one use case and answers
with a builder of chalicelib/http/responses.py; each handler calls one use case.
"""
from __future__ import annotations

import os
import threading

from chalice import Chalice, CognitoUserPoolAuthorizer, CORSConfig, Response

from chalicelib.config import Settings
from chalicelib.domain import metadata as job_metadata
from chalicelib.domain.errors import PoisonMessage, PushConnectionsFull, RateLimited, TransientError, Unauthorized
from chalicelib.domain.jobs import Job
from chalicelib.http import access, auth, methods, prefer, request_body, responses
from chalicelib.domain.webhooks import SERVICE_RECEIVER
from chalicelib.runtime import correlation, deadline
from chalicelib.runtime.logs import get_logger
from chalicelib.runtime.metrics import EmfMetrics
from chalicelib.runtime.schedules import rate

settings = Settings.from_environ(os.environ)
app = Chalice(app_name="image-jobs")
# Every route answers browsers on another origin (the page in web/); set before the routes,
# which copy it. Chalice adds the OPTIONS preflight routes (no authorizer) and the headers.
app.api.cors = CORSConfig(
    allow_origin=settings.cors_allow_origin,
    allow_headers=["Idempotency-Key", "Prefer", "If-None-Match", "Image-Jobs-Metadata"],
    expose_headers=["Location", "Retry-After", "Idempotent-Replayed", "ETag", "Preference-Applied"],
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
# The service routes take the service principal's access token (scope image-jobs/service);
# every other route a user's ID token: one authorizer, set per route.
service_authorizer = authorizer.with_scopes([auth.SERVICE_SCOPE]) if authorizer is not None else None
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


api_metrics = EmfMetrics(settings.metrics_service)
access_log = get_logger("http")  # the component of the local server's access lines too


@app.middleware("http")
def observe(request, get_response):
    """Every request: its correlation id, metrics and access line (chalicelib/http/access.py)."""
    return access.observe(request, get_response, api_metrics, access_log, settings.log_every_request)


# Every view: within the API function's time budget, every error answered as problem+json.
api = responses.answering_problems(
    lambda: deadline.function_invocation(getattr(app, "lambda_context", None),
                                         settings.api_timeout_seconds, settings),
    settings.retry_after_seconds,
)


def _owner() -> str:
    """The caller, within its request rate (429 rate_limited past it)."""
    request = app.current_request
    owner = auth.owner_of(request.headers, request.context, settings)
    use_cases().admission.check_rate(owner)
    return owner


METADATA_HEADER = "image-jobs-metadata"  # POST /images: the job's metadata, a JSON object


def _service() -> auth.Caller:
    """The service principal (403 forbidden for a user's token), within its request rate."""
    request = app.current_request
    caller = auth.service_of(request.headers, request.context, settings)
    use_cases().admission.check_rate(SERVICE_RATE_PREFIX + caller.subject)
    return caller


SERVICE_RATE_PREFIX = "service:"  # its own rate bucket, apart from any owner's

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
    query = request.query_params or {}
    formats = request_body.formats_param(query.get("formats"))
    renditions = None if "renditions" not in query else request_body.formats_param(query["renditions"])
    # A header, for raw and multipart bodies alike; never the query string, which is logged.
    given = job_metadata.parse_header(request.headers.get(METADATA_HEADER))
    focus = request_body.focus_param(query)
    accepted = use_cases().uploads.accept_upload(owner, data, key, formats, renditions, metadata=given,
                                                 focus=focus)
    seconds = prefer.requested_wait(request.headers.get("prefer"), settings.max_wait_seconds)
    if seconds is None:
        return responses.accepted(accepted, settings.retry_after_seconds)
    held = use_cases().waits.hold_until_finished(accepted.job, seconds)
    return responses.accepted_or_finished(accepted, held, use_cases().manage.urls(held.job),
                                          settings.retry_after_seconds)


@app.route(ROOT + "/uploads", methods=["POST"], content_types=ANY, authorizer=authorizer)
@api
def create_direct_upload():
    owner = _owner()
    request = app.current_request
    body = request_body.json_object(request.raw_body, request.headers.get("content-type", ""),
                                    {"content_type": str, "size": int, "method": str, "sha256": str,
                                     "formats": list, "renditions": list, "metadata": dict,
                                     "focus": object})
    key = request_body.idempotency_key(request.headers.get("idempotency-key"))
    return responses.accepted(
        use_cases().direct_uploads.create_direct_upload(owner, body.get("content_type"), body.get("size"), key,
                                                 method=body.get("method", "POST"), sha256=body.get("sha256"),
                                                 formats=body.get("formats", ()),
                                                 renditions=body.get("renditions"),
                                                 metadata=body.get("metadata"),
                                                 focus=request_body.focus_member(body)),
        settings.retry_after_seconds,
    )


@app.route(ROOT + "/image-jobs/{job_id}/upload", methods=["GET"], content_types=ANY, authorizer=authorizer)
@api
def get_job_upload(job_id):
    upload = use_cases().direct_uploads.current_upload(_owner(), job_id)
    if isinstance(upload, Job):  # its file has arrived: the job is what is left to follow
        return responses.job(upload, use_cases().manage.urls(upload), settings.retry_after_seconds)
    return responses.upload(upload)


@app.route(ROOT + "/image-jobs/{job_id}/upload", methods=["POST"], content_types=ANY, authorizer=authorizer)
@api
def complete_job_upload(job_id):
    owner = _owner()
    request = app.current_request
    parts = request_body.completed_parts(request.raw_body, request.headers.get("content-type", ""))
    job = use_cases().direct_uploads.complete_upload(owner, job_id, parts)
    return responses.job(job, use_cases().manage.urls(job), settings.retry_after_seconds)


@app.route(ROOT + "/image-jobs/{job_id}", methods=["GET"], content_types=ANY, authorizer=authorizer)
@api
def get_image_job(job_id):
    job = use_cases().manage.get_job(_owner(), job_id)
    headers = app.current_request.headers
    seconds = prefer.requested_wait(headers.get("prefer"), settings.max_wait_seconds)
    if seconds is None:
        return responses.job(job, use_cases().manage.urls(job), settings.retry_after_seconds)
    held = use_cases().waits.hold_until_changed(job, seconds, prefer.known_versions(headers.get("if-none-match")))
    return responses.job(held.job, use_cases().manage.urls(held.job), settings.retry_after_seconds, held.applied)


@app.route(ROOT + "/image-jobs", methods=["GET"], content_types=ANY, authorizer=authorizer)
@api
def list_image_jobs():
    owner = _owner()
    query = request_body.list_query(app.current_request.query_params)
    page = use_cases().listing.page(owner, owner, query)
    return responses.jobs_page(page, use_cases().manage.urls)


# -- the service principal: docs/contract.md "The service principal" ------------------------
@app.route(ROOT + "/service/image-jobs", methods=["GET"], content_types=ANY, authorizer=service_authorizer)
@api
def service_list_image_jobs():
    caller = _service()
    query, owner = request_body.list_query(app.current_request.query_params, with_owner=True)
    page = use_cases().listing.page(SERVICE_RATE_PREFIX + caller.subject, owner, query)
    return responses.jobs_page(page, use_cases().manage.urls, with_owner=True)


@app.route(ROOT + "/service/image-jobs/{job_id}", methods=["GET"], content_types=ANY,
           authorizer=service_authorizer)
@api
def service_get_image_job(job_id):
    _service()
    job = use_cases().manage.get_any_job(job_id)
    return responses.job(job, use_cases().manage.urls(job), settings.retry_after_seconds, with_owner=True)


@app.route(ROOT + "/service/image-jobs/{job_id}", methods=["DELETE"], content_types=ANY,
           authorizer=service_authorizer)
@api
def service_delete_image_job(job_id):
    _service()
    use_cases().manage.delete_any(job_id)
    return responses.no_content()


@app.route(ROOT + "/service/webhook", methods=["PUT"], content_types=ANY, authorizer=service_authorizer)
@api
def put_service_webhook():
    _service()
    request = app.current_request
    body = request_body.json_object(request.raw_body, request.headers.get("content-type", ""),
                                    {"url": str, "events": list})
    registration = use_cases().webhooks.register_service(body.get("url"), body.get("events"))
    return responses.webhook(registration.webhook, registration.show_secret)


@app.route(ROOT + "/service/webhook", methods=["GET"], content_types=ANY, authorizer=service_authorizer)
@api
def get_service_webhook():
    _service()
    return _shown_webhook(SERVICE_RECEIVER)


@app.route(ROOT + "/service/webhook", methods=["DELETE"], content_types=ANY, authorizer=service_authorizer)
@api
def delete_service_webhook():
    _service()
    use_cases().webhooks.remove(SERVICE_RECEIVER)
    return responses.no_content()


@app.route(ROOT + "/service/webhook/rotate-secret", methods=["POST"], content_types=ANY,
           authorizer=service_authorizer)
@api
def rotate_service_webhook_secret():
    _service()
    hook = use_cases().webhooks.rotate(SERVICE_RECEIVER)
    return responses.webhook(hook, show_secret=True)


@app.route(ROOT + "/service/webhook/test", methods=["POST"], content_types=ANY,
           authorizer=service_authorizer)
@api
def test_service_webhook():
    _service()
    return responses.webhook_test(use_cases().webhooks.send_test(SERVICE_RECEIVER))


@app.route(ROOT + "/image-jobs/{job_id}/cancel", methods=["POST"], content_types=ANY,
           authorizer=authorizer)
@api
def cancel_image_job(job_id):
    job = use_cases().manage.cancel(_owner(), job_id)
    return responses.job(job, use_cases().manage.urls(job), settings.retry_after_seconds)


@app.route(ROOT + "/image-jobs/{job_id}", methods=["DELETE"], content_types=ANY, authorizer=authorizer)
@api
def delete_image_job(job_id):
    use_cases().manage.delete(_owner(), job_id)
    return responses.no_content()


@app.on_sqs_message(queue=settings.events_queue_name, batch_size=1,
                    maximum_concurrency=settings.worker_max_concurrency)
def handle_object_created(event):
    """One storage notification, to the worker's one entry (Worker.process_storage_message).
    Raising returns the message to the queue for a retry."""
    correlation.begin(correlation.of_context(event.context))
    for record in event:
        try:
            use_cases().worker.process_storage_message(
                record.body, deadline.seconds_left(event.context, settings.worker_timeout_seconds))
        except PoisonMessage as error:
            # No retry can fix it: drop it with a line, never crash-loop on it.
            log.error("poison_message_dropped", reason=str(error))


@app.schedule(rate(settings.sweep_interval_seconds))
def sweep(event):
    """Leases, resends, upload deadlines and retention: see usecases/sweeper.py."""
    correlation.begin(correlation.of_context(event.context))
    with deadline.function_invocation(event.context, settings.sweep_timeout_seconds, settings):
        use_cases().sweeper.sweep()


@app.schedule(rate(settings.orphan_scan_interval_seconds))
# Named before the word "scan": the name is the deployed function's and its log group's.
def sweep_orphans(event):
    """Objects left without a job, this minute's share of the bucket: see usecases/orphans.py."""
    correlation.begin(correlation.of_context(event.context))
    with deadline.function_invocation(event.context, settings.orphan_scan_timeout_seconds, settings):
        use_cases().orphan_scan.run(scheduled=True)


# -- webhooks: CONTRACT.md "Notifications"; the rules are in chalicelib/usecases/webhooks.py --
@app.route(ROOT + "/webhook", methods=["PUT"], content_types=ANY, authorizer=authorizer)
@api
def put_webhook():
    owner = _owner()
    request = app.current_request
    url = request_body.json_object(request.raw_body, request.headers.get("content-type", ""),
                                   {"url": str}).get("url")
    registration = use_cases().webhooks.register(owner, url)
    return responses.webhook(registration.webhook, registration.show_secret)


@app.route(ROOT + "/webhook", methods=["GET"], content_types=ANY, authorizer=authorizer)
@api
def get_webhook():
    return _shown_webhook(_owner())


def _shown_webhook(receiver: str):
    return responses.webhook_shown(use_cases().webhooks.shown(receiver))


@app.route(ROOT + "/webhook", methods=["DELETE"], content_types=ANY, authorizer=authorizer)
@api
def delete_webhook():
    use_cases().webhooks.remove(_owner())
    return responses.no_content()


@app.route(ROOT + "/webhook/rotate-secret", methods=["POST"], content_types=ANY,
           authorizer=authorizer)
@api
def rotate_webhook_secret():
    hook = use_cases().webhooks.rotate(_owner())
    return responses.webhook(hook, show_secret=True)


@app.route(ROOT + "/webhook/test", methods=["POST"], content_types=ANY, authorizer=authorizer)
@api
def test_webhook():
    return responses.webhook_test(use_cases().webhooks.send_test(_owner()))


@app.on_sqs_message(queue=settings.webhook_queue_name, batch_size=1,
                    maximum_concurrency=settings.webhook_max_concurrency)
def deliver_webhook(event):
    """One webhook event. A retry is a new message that carries the event's attempts; a copy
    that came before it was due raises RetryLater, which keeps Lambda (or the local worker)
    from deleting it (its visibility is already set to when it is due)."""
    correlation.begin(correlation.of_context(event.context))
    with deadline.function_invocation(event.context, settings.webhook_function_timeout_seconds, settings):
        for record in event:
            try:
                use_cases().webhooks.deliver(record.body, record.receipt_handle)
            except PoisonMessage:
                log.error("poison_message_dropped", queue="webhooks")


# -- push: docs/contract.md "Push"; the rules are in chalicelib/usecases/push.py -------------


@app.route(ROOT + "/push", methods=["GET"], content_types=ANY, authorizer=authorizer)
@api
def get_push():
    _owner()
    return responses.push(settings.push_url)


# The WebSocket API: in the cloud Chalice deploys it wherever the stage has the table's stream
# (PUSH_STREAM_ARN, from the stack), and infra/stage_config.py then copies its URL into
# PUSH_URL; locally the runner plays it (local/push_gateway.py) where PUSH_URL is set.
if settings.serves_push:
    app.experimental_feature_flags.update(["WEBSOCKETS"])

    @app.on_ws_connect()
    def push_connect(event):
        """Refused (401) unless the subprotocols carry a good token; 429 past the owner's
        request rate or connections; 503 when it cannot be recorded, since it would receive
        nothing."""
        from chalicelib.usecases.push import Refusal

        headers = {k.lower(): v for k, v in (event.to_dict().get("headers") or {}).items()}
        try:
            owner = auth.push_owner(headers.get("sec-websocket-protocol"), settings)
        except Unauthorized:
            use_cases().push.refused(Refusal.UNAUTHORIZED)
            return Response(body="", status_code=401)
        try:
            use_cases().push.connect(owner, event.connection_id)
        except RateLimited as limited:
            return Response(body="", status_code=429, headers={"Retry-After": str(limited.retry_after)})
        except PushConnectionsFull:
            return Response(body="", status_code=429)
        except TransientError:
            return Response(body="", status_code=503)
        return Response(body="", status_code=200, headers={"Sec-WebSocket-Protocol": auth.PUSH_PROTOCOL})

    # No $default route (no @app.on_ws_message): clients have nothing to say, and with no
    # route to match API Gateway answers a client's message itself with an error frame and
    # runs no function (docs/contract.md "Push"), so no message costs a run.

    @app.on_ws_disconnect()
    def push_disconnect(event):
        use_cases().push.disconnect(event.connection_id)


if settings.push_stream_arn:
    @app.on_dynamodb_record(stream_arn=settings.push_stream_arn, batch_size=100, starting_position="LATEST")
    def push_job_changes(event):
        """The table's stream: every job it moved, to its owner's connections, within the
        function's time budget (what does not fit is dropped and counted: push is best-effort
        and clients re-read by GET). Never raises nor times out, or Lambda would retry the
        batch and hold the shard's later changes back (the event source's retries, bisection
        and record age are set by infra/stream_source.py)."""
        correlation.begin(correlation.of_context(event.context))
        with deadline.function_invocation(event.context, settings.push_stream_timeout_seconds, settings):
            use_cases().push.publish_changes(event.to_dict().get("Records", []))


# Last, so that it covers every route declared above: 405 with Allow (chalicelib/http/methods.py).
methods.add_not_allowed_routes(app, ANY)
