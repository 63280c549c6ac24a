"""The words the program compares, defined once: error codes, worker outcomes and the public
path prefix (rendition names are chalicelib/domain/renditions.py's, beside their table).
Anything that tests `x == "..."` belongs here."""
from __future__ import annotations

from datetime import datetime, timezone
from enum import StrEnum

# Where clients find the API, in every deployment (the cloud's API Gateway stage "api" plus
# the app's ROUTE_PREFIX "/v1" make the same path; see Settings.route_prefix).
PUBLIC_PREFIX = "/api/v1"


def rfc3339(value: datetime) -> str:
    """Every time the API shows (bodies, events, the test event): UTC, seconds, `Z`."""
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ErrorCode(StrEnum):
    """The stable machine codes of the contract, owned here. A code must also appear in
    each of these places (tests/unit/test_error_codes.py checks them all, and
    docs/architecture.md has the checklist):

    - chalicelib/http/problems.py PROBLEMS: its HTTP status and title;
    - openapi.yaml components/schemas/ErrorCode: the same codes, in this order;
    - openapi.yaml components/responses: a problem response with the code (a code that is
      only ever a job's error goes in JobErrorCode instead);
    - clients/python errors.py: an ApiError subclass, listed in ERRORS_BY_CODE;
    - clients/python __init__.py: that class imported and in __all__;
    - docs/api-guide.md "Errors and what to do with them";
    - docs/contract.md "Stable error codes".
    """

    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    JOB_NOT_FOUND = "job_not_found"
    WEBHOOK_NOT_FOUND = "webhook_not_found"
    JOB_EXPIRED = "job_expired"
    JOB_FINISHED = "job_finished"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    INVALID_REQUEST = "invalid_request"
    FILE_TOO_LARGE = "file_too_large"
    UNSUPPORTED_FORMAT = "unsupported_format"
    INVALID_IMAGE = "invalid_image"
    IMAGE_TOO_LARGE = "image_too_large"
    IMAGE_TOO_COMPLEX = "image_too_complex"
    UPLOAD_MISSING = "upload_missing"
    STORAGE_UNAVAILABLE = "storage_unavailable"
    RATE_LIMITED = "rate_limited"
    OVERLOADED = "overloaded"
    PROCESSING_FAILED = "processing_failed"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    INTERNAL_ERROR = "internal_error"


class Outcome(StrEnum):
    """What the worker did with one object-created event (logs, tests, the local worker)."""

    READY = "ready"            # this attempt wrote the renditions and finished the job
    FAILED = "failed"          # the job ended failed (its error code is on the job)
    IGNORED = "ignored"        # not an original of ours, or no such job
    DUPLICATE = "duplicate"    # the job had already ended (finished or cancelled): nothing to do
    LOST = "lost"              # this attempt's final write lost to a newer state


class SweepOutcome(StrEnum):
    """What the sweeper did with one due job, or with a batch or shard: the keys of its report,
    which its `sweep_done` log line carries as they are."""

    SKIPPED = "skipped"                  # not due after all, or moved meanwhile (not logged)
    FAILED = "failed"                    # ended failed: no claim or resend left
    NEVER_STORED = "never_stored"        # queued, but its original was never stored
    UPLOAD_MISSING = "upload_missing"    # awaiting an upload that never came
    UPLOAD_FOUND = "upload_found"        # its upload arrived without an event: queued now
    WAITING = "waiting"                  # its message may still be queued: looked at later
    # These two keep the older word in their values: logs and dashboards already search them.
    RESENT = "redriven"                  # its lost event was sent again
    RESEND_RACED = "redrive_raced"       # sent again, but a worker moved it meanwhile
    EXPIRED_DELETED = "expired_deleted"  # past retention: its objects and records deleted
    ERRORS = "errors"                    # steps or shard queries that failed (tried next run)
    SHARDS_LEFT = "shards_left"          # shards the time budget left for the next run


class UploadMethod(StrEnum):
    """How a direct upload reaches storage (POST /uploads, its "method")."""

    POST = "POST"              # a presigned form
    PUT = "PUT"                # one presigned PUT of the whole file
    MULTIPART = "multipart"    # presigned PUTs of its parts, then a completion
