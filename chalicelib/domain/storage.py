"""What storage answers: presigned uploads, stored parts and objects, the orphan scan's place."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Optional


@dataclass(frozen=True)
class PresignedPost:
    """A browser-style form upload: POST `fields` and then the file to `url`."""

    url: str
    fields: dict[str, str]


@dataclass(frozen=True)
class PresignedPut:
    """One PUT of the whole file to `url`, sent with exactly `headers` (they are signed)."""

    url: str
    headers: dict[str, str]


@dataclass(frozen=True)
class StoredPart:
    """A part of a multipart upload that storage holds."""

    number: int
    etag: str
    size: int


@dataclass(frozen=True)
class ScanPoint:
    """Where one key range of the orphan scan stands (chalicelib/usecases/orphans.py)."""

    after: Optional[str] = None  # the last key done; None: at the start of a pass
    pass_started: Optional[datetime] = None  # when the pass under way (or the last) began


@dataclass(frozen=True)
class StoredObject:
    size: int
    # When the write began (S3: a multipart object's is its upload's initiation), not when it
    # ended: storage notifies after the end (chalicelib/usecases/sweeper.py, _arrived_by).
    last_modified: datetime
    cache_control: Optional[str] = None  # as stored with it (chalicelib/domain/delivery.py)
