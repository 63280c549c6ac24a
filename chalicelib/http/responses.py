"""The API's answers as Chalice Responses: problem+json for every error, the job and webhook
resources, and the error mapping every view runs inside (`answering_problems`)."""
from __future__ import annotations

import dataclasses
import functools
import uuid
from typing import Callable, ContextManager, Optional

from chalice import Response

from chalicelib.domain.errors import DomainError, TransientError
from chalicelib.domain.vocabulary import ErrorCode
from chalicelib.http import prefer, problems, views
from chalicelib.runtime import correlation
from chalicelib.runtime.logs import get_logger

# The component app.py's lines have always had: the views' faults are the app's.
log = get_logger("app")
# Never handed out as is: the HTTP middleware adds headers to each response's own dict.
NO_STORE = {"Cache-Control": "no-store"}


def problem(code: ErrorCode, detail: str = "", retry_after=None, allow=None,
            instance=None) -> Response:
    headers = {"Content-Type": problems.CONTENT_TYPE, **NO_STORE}
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


def accepted(accepted, retry_after_seconds: int, applied: Optional[int] = None) -> Response:
    headers = {
        "Location": views.job_location(accepted.job),
        "Retry-After": str(retry_after_seconds),
        **NO_STORE,
    }
    if accepted.replayed:
        headers["Idempotent-Replayed"] = "true"
    if applied is not None:
        headers["Preference-Applied"] = prefer.applied(applied)
    return Response(status_code=202, body=views.accepted_body(accepted), headers=headers)


def job(job, urls, retry_after_seconds: int, applied: Optional[int] = None,
        with_owner: bool = False) -> Response:
    """200 with the job, its ETag, and Preference-Applied when the answer was held."""
    headers = {**NO_STORE, "ETag": prefer.etag(job)}
    if not job.status.terminal:
        headers["Retry-After"] = str(retry_after_seconds)
    if applied is not None:
        headers["Preference-Applied"] = prefer.applied(applied)
    return Response(status_code=200, body=views.job_body(job, urls, with_owner), headers=headers)


def jobs_page(page, urls_of, with_owner: bool = False) -> Response:
    """200 with a page of the list: each job as GET shows it, and the token of the next."""
    body = {"jobs": [views.job_body(j, urls_of(j), with_owner) for j in page.jobs]}
    if page.next_page_token is not None:
        body["next_page_token"] = page.next_page_token
    return Response(status_code=200, headers=dict(NO_STORE), body=body)


def accepted_or_finished(upload, held, urls, retry_after_seconds: int) -> Response:
    """An upload held for Prefer: wait: 200 with the job if it finished meanwhile (with its
    Location, as the 202 has), else the usual 202 showing its current status."""
    if not held.job.status.terminal:
        return accepted(dataclasses.replace(upload, job=held.job), retry_after_seconds, held.applied)
    response = job(held.job, urls, retry_after_seconds, held.applied)
    response.headers["Location"] = views.job_location(held.job)
    if upload.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return response


def upload(upload) -> Response:
    """200 with how the job's file is sent now (GET .../upload)."""
    return Response(status_code=200, headers=dict(NO_STORE), body=views.upload_body(upload))


def webhook(hook, show_secret: bool = False) -> Response:
    return Response(status_code=200, headers=dict(NO_STORE), body=views.webhook_body(hook, show_secret))


def webhook_shown(shown) -> Response:
    return Response(status_code=200, headers=dict(NO_STORE), body=views.webhook_shown_body(shown))


def webhook_test(attempt) -> Response:
    return Response(status_code=200, headers=dict(NO_STORE), body=views.attempt_body(attempt))


def push(url: str) -> Response:
    return Response(status_code=200, headers=dict(NO_STORE), body=views.push_discovery_body(url))


def no_content() -> Response:
    return Response(status_code=204, body="", headers=dict(NO_STORE))


def answering_problems(budget: Callable[[], ContextManager], retry_after_seconds: int):
    """A decorator for views: each runs within `budget()` (its invocation's time), and every
    error it raises is answered as problem+json; nothing internal ever reaches the client."""

    def decorate(view):
        @functools.wraps(view)
        def wrapper(*args, **kwargs):
            try:
                with budget():
                    return view(*args, **kwargs)
            except DomainError as error:
                return problem(error.code, error.detail, error.retry_after)
            except TransientError:
                # A dependency (table, storage, queue) is down or timed out: worth a retry.
                log.exception("backend_unavailable")
                return problem(ErrorCode.STORAGE_UNAVAILABLE, retry_after=retry_after_seconds)
            except Exception:
                # Our own fault. The client gets an id to quote (the request's correlation
                # id, which every other line of this request carries too); the log line has
                # the same id beside the details, which never leave the service.
                instance: Optional[str] = correlation.instance() or f"urn:uuid:{uuid.uuid4()}"
                log.exception("internal_error", instance=instance)
                return problem(ErrorCode.INTERNAL_ERROR, instance=instance)

        return wrapper

    return decorate
