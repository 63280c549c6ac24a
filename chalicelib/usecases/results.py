"""What the use cases hand back to the API layer (chalicelib/http/views.py shapes them as JSON)."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Optional

from chalicelib.domain.jobs import Job
from chalicelib.domain.renditions import RenditionFormat, RenditionName


@dataclass(frozen=True)
class UploadForm:
    """Where and how the client sends a direct upload, and until when it may."""

    url: str
    fields: dict[str, str]
    expires_at: datetime


@dataclass(frozen=True)
class Accepted:
    job: Job
    replayed: bool = False
    upload: Optional[UploadForm] = None  # direct uploads only


@dataclass(frozen=True)
class Urls:
    """Presigned URLs of a ready job's renditions, made when the job is read."""

    by_name: dict[RenditionName, str]
    expires_at: datetime
    # Each rendition's extra formats, by (name, format).
    variants: dict[tuple[RenditionName, RenditionFormat], str] = field(default_factory=dict)
