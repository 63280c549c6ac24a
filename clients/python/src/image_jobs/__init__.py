"""image-jobs client: upload images, poll their jobs the way the contract says, download results.

    from image_jobs import Client

    with Client("http://127.0.0.1:8000", token) as client:
        job = client.upload("photo.jpg").wait(deadline=120)
        if job.ready:
            job.download("out/")
"""
from ._version import __version__
from .client import DEFAULT_DIRECT_THRESHOLD, DEFAULT_MAX_UPLOAD_BYTES, DEFAULT_URL, SERVICE_SCOPE, Client  # noqa: E402
from .errors import (  # noqa: E402
    ImageJobsError,
    ApiError,
    Unauthorized,
    Forbidden,
    JobNotFound,
    WebhookNotFound,
    JobExpired,
    JobFinished,
    IdempotencyKeyReused,
    InvalidRequest,
    FileTooLarge,
    UnsupportedFormat,
    InvalidImage,
    ImageTooLarge,
    ImageTooComplex,
    UploadMissing,
    StorageUnavailable,
    RateLimited,
    Overloaded,
    ProcessingFailed,
    MethodNotAllowed,
    InternalError,
    ConnectionFailed,
    PushUnavailable,
    UnexpectedResponse,
    StorageError,
    JobNotReady,
    WaitStopped,
    WaitTimeout,
    WaitCancelled,
    UploadStopped,
    UploadIncomplete,
    WebhookVerificationError,
    ERRORS_BY_CODE,
)
from .job import TERMINAL, Focus, Job, JobError, Rendition, SourceFacts, Status, Variant  # noqa: E402
from .prepared import PreparedUpload, UploadRequest  # noqa: E402
from .phash import NEAR as PHASH_NEAR, phash_distance  # noqa: E402
from .push import Watch  # noqa: E402
from .webhooks import verify_webhook  # noqa: E402

__all__ = [
    "Client",
    "Job",
    "SourceFacts",
    "Focus",
    "phash_distance",
    "PHASH_NEAR",
    "JobError",
    "Rendition",
    "Status",
    "TERMINAL",
    "Variant",
    "Watch",
    "PreparedUpload",
    "UploadRequest",
    "verify_webhook",
    "WebhookVerificationError",
    "DEFAULT_URL",
    "SERVICE_SCOPE",
    "DEFAULT_MAX_UPLOAD_BYTES",
    "DEFAULT_DIRECT_THRESHOLD",
    "ERRORS_BY_CODE",
    "ImageJobsError",
    "ApiError",
    "Unauthorized",
    "Forbidden",
    "JobNotFound",
    "WebhookNotFound",
    "JobExpired",
    "JobFinished",
    "IdempotencyKeyReused",
    "InvalidRequest",
    "FileTooLarge",
    "UnsupportedFormat",
    "InvalidImage",
    "ImageTooLarge",
    "ImageTooComplex",
    "UploadMissing",
    "StorageUnavailable",
    "RateLimited",
    "Overloaded",
    "ProcessingFailed",
    "MethodNotAllowed",
    "InternalError",
    "ConnectionFailed",
    "PushUnavailable",
    "UnexpectedResponse",
    "StorageError",
    "JobNotReady",
    "WaitStopped",
    "WaitTimeout",
    "WaitCancelled",
    "UploadStopped",
    "UploadIncomplete",
]
