"""RFC 9457 problem details for the stable error codes (vocabulary.ErrorCode)."""
from __future__ import annotations

from typing import Optional

from chalicelib.domain.vocabulary import ErrorCode as C

# code -> (HTTP status, title). The title is also the safe message of a failed job's error.
# upload_missing and processing_failed are only ever a job's error, never an HTTP answer;
# their statuses complete the table.
PROBLEMS: dict[C, tuple[int, str]] = {
    C.UNAUTHORIZED: (401, "Missing or invalid bearer token"),
    C.FORBIDDEN: (403, "This token may not do that"),
    C.JOB_NOT_FOUND: (404, "No such job"),
    C.WEBHOOK_NOT_FOUND: (404, "No webhook is registered"),
    C.JOB_EXPIRED: (410, "The job has passed its retention period"),
    C.JOB_FINISHED: (409, "The job has already finished"),
    C.IDEMPOTENCY_KEY_REUSED: (409, "The Idempotency-Key was used for a different request"),
    C.INVALID_REQUEST: (400, "The request is not valid"),
    C.FILE_TOO_LARGE: (413, "The file is larger than the limit"),
    C.UNSUPPORTED_FORMAT: (415, "The file is not a supported image format"),
    C.INVALID_IMAGE: (422, "The image could not be processed"),
    C.IMAGE_TOO_LARGE: (422, "The image has more pixels than the limit"),
    C.IMAGE_TOO_COMPLEX: (422, "The image would cost too much to decode"),
    C.UPLOAD_MISSING: (422, "The upload did not arrive before its URL expired"),
    C.STORAGE_UNAVAILABLE: (503, "Storage is unavailable; try again later"),
    C.RATE_LIMITED: (429, "Too many requests; try again later"),
    C.OVERLOADED: (503, "The service is busy; try again later"),
    C.PROCESSING_FAILED: (500, "The image could not be processed after several attempts"),
    C.METHOD_NOT_ALLOWED: (405, "The method is not allowed on this resource"),
    C.INTERNAL_ERROR: (500, "Something went wrong on our side"),
}
assert set(PROBLEMS) == set(C), "every error code needs a problem"

CONTENT_TYPE = "application/problem+json"
# A URN, not a URL: no page is promised at an address we do not control.
TYPE_BASE = "urn:image-jobs:problem:"


def status_of(code: C) -> int:
    return PROBLEMS[C(code)][0]


def message_of(code: C) -> str:
    return PROBLEMS[C(code)][1]


def problem(code: C, detail: Optional[str] = None, instance: Optional[str] = None) -> dict:
    """`instance` (RFC 9457): a URI naming this occurrence, for a fault the client should quote."""
    code = C(code)
    status, title = PROBLEMS[code]
    body = {
        "type": TYPE_BASE + code.value,
        "title": title,
        "status": status,
        "detail": detail or title,
        "code": code.value,
    }
    if instance:
        body["instance"] = instance
    return body
