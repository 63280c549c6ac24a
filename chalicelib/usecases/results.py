"""What the use cases hand back to the API layer (chalicelib/http/views.py shapes them as JSON)."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Optional, Union

from chalicelib.domain.jobs import Job
from chalicelib.domain.renditions import RenditionFormat, RenditionName
from chalicelib.domain.webhooks import Attempt, Webhook


@dataclass(frozen=True)
class UploadForm:
    """Where and how the client sends a direct upload, and until when it may."""

    url: str
    fields: dict[str, str]
    expires_at: datetime


@dataclass(frozen=True)
class UploadPut:
    """One PUT of the whole file, with exactly these headers, until expires_at."""

    url: str
    headers: dict[str, str]
    expires_at: datetime


@dataclass(frozen=True)
class PartUpload:
    """One part of a multipart upload: stored (with storage's ETag), or a URL to PUT it to."""

    number: int
    size: int
    url: Optional[str] = None
    etag: Optional[str] = None


@dataclass(frozen=True)
class UploadParts:
    """A multipart upload as it stands: every part, stored or with a URL valid until expires_at."""

    part_size: int
    parts: tuple[PartUpload, ...]
    expires_at: datetime


Upload = Union[UploadForm, UploadPut, UploadParts]


@dataclass(frozen=True)
class Accepted:
    job: Job
    replayed: bool = False
    upload: Optional[Upload] = None  # direct uploads only


@dataclass(frozen=True)
class Urls:
    """Presigned URLs of a ready job's renditions, made when the job is read."""

    by_name: dict[RenditionName, str]
    expires_at: datetime
    # Each rendition's extra formats, by (name, format).
    variants: dict[tuple[RenditionName, RenditionFormat], str] = field(default_factory=dict)
    # Each animated rendition's animation, by name.
    animations: dict[RenditionName, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Shown:
    """GET /webhook: the receiver's webhook (None: none), its last attempts (None: the log
    could not be read), and the moment it was read (whether the breaker is open)."""

    webhook: Optional[Webhook]
    deliveries: Optional[list[Attempt]]
    at: datetime
