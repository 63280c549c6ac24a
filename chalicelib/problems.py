"""RFC 9457 problem details for the stable error codes of CONTRACT.md."""
from __future__ import annotations

from typing import Optional

# code -> (HTTP status, title). The title is also the safe message of a failed job's error.
PROBLEMS: dict[str, tuple[int, str]] = {
    "unauthorized": (401, "Missing or invalid bearer token"),
    "job_not_found": (404, "No such job"),
    "job_expired": (410, "The job has passed its retention period"),
    "job_finished": (409, "The job has already finished"),
    "idempotency_key_reused": (409, "The Idempotency-Key was used for a different request"),
    "invalid_request": (400, "The request is not valid"),
    "file_too_large": (413, "The file is larger than the limit"),
    "unsupported_format": (415, "The file is not a supported image format"),
    "invalid_image": (422, "The image could not be processed"),
    "image_too_large": (422, "The image has more pixels than the limit"),
    "upload_missing": (422, "The upload did not arrive before its URL expired"),
    "storage_unavailable": (503, "Storage is unavailable; try again later"),
    "rate_limited": (429, "Too many requests; try again later"),
    "overloaded": (503, "The service is busy; try again later"),
    "processing_failed": (500, "The image could not be processed after several attempts"),
}

CONTENT_TYPE = "application/problem+json"
# A URN, not a URL: no page is promised at an address we do not control.
TYPE_BASE = "urn:image-jobs:problem:"


def status_of(code: str) -> int:
    return PROBLEMS[code][0]


def message_of(code: str) -> str:
    return PROBLEMS[code][1]


def problem(code: str, detail: Optional[str] = None) -> dict:
    status, title = PROBLEMS[code]
    return {
        "type": TYPE_BASE + code,
        "title": title,
        "status": status,
        "detail": detail or title,
        "code": code,
    }
