"""A place in an owner's job list and one page read there (chalicelib/usecases/listing.py)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Optional

from chalicelib.domain.jobs import Job


@dataclass(frozen=True)
class ListCursor:
    """A place in an owner's list: the last job read, by the index's order (created_at,
    then job id, both newest first)."""

    created_at: datetime
    job_id: str


@dataclass(frozen=True)
class OwnedPage:
    """What one read of the owner index gave: its jobs in the index's order (a job deleted
    since is left out), the place of the last key read, and whether more keys follow."""

    jobs: list[Job]
    last: Optional[ListCursor]
    more: bool
