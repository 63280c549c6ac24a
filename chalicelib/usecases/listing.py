"""GET /image-jobs: an owner's jobs, newest first, a page at a time (docs/contract.md "The
list"). Pages come from the owner index (JobStore.owned); the status and expiry filters
apply to the jobs read, so a page is filled from a few reads of the index at most.

The page token is opaque to clients, not secret: base64url of the place reached and a
digest binding it to the caller, the owner and the filter. Another caller's or another
filter's token is refused; a token forged by hand can only place the caller within the
one owner's jobs the query is bound to anyway, so it grants nothing.
"""
from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Optional

from chalicelib.domain.errors import InvalidRequest
from chalicelib.domain.jobs import Job, JobStatus
from chalicelib.domain.objectkeys import is_job_id
from chalicelib.domain.listing import ListCursor
from chalicelib.usecases.context import Context

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
# Reads of the index one page may take to fill itself when filters leave jobs out; then it
# answers what it has, with a token to go on (a page may be short, even empty).
MAX_READS_PER_PAGE = 5


@dataclass(frozen=True)
class ListQuery:
    page_size: int = DEFAULT_PAGE_SIZE
    page_token: Optional[str] = None
    statuses: frozenset[JobStatus] = field(default_factory=frozenset)  # empty: every status
    created_after: Optional[datetime] = None   # exclusive
    created_before: Optional[datetime] = None  # exclusive

    def matches(self, job: Job, now: datetime) -> bool:
        return (not job.is_expired(now)
                and (not self.statuses or job.status in self.statuses)
                and (self.created_after is None or job.created_at > self.created_after)
                and (self.created_before is None or job.created_at < self.created_before))

    def filter_text(self) -> str:
        """The filter, canonical: what a page token is bound to besides the caller."""
        return "\n".join([",".join(sorted(s.value for s in self.statuses)),
                          self.created_after.isoformat() if self.created_after else "",
                          self.created_before.isoformat() if self.created_before else ""])


@dataclass(frozen=True)
class JobsPage:
    jobs: list[Job]
    next_page_token: Optional[str]


class ListJobs:
    def __init__(self, ctx: Context):
        self._ctx = ctx

    def page(self, caller: str, owner: str, query: ListQuery) -> JobsPage:
        """`caller` names who asks (a user, or the service principal), `owner` whose jobs."""
        if not 1 <= query.page_size <= MAX_PAGE_SIZE:
            raise InvalidRequest(f"page_size must be 1-{MAX_PAGE_SIZE}")
        binding = _binding(caller, owner, query)
        cursor = None if query.page_token is None else _decode(query.page_token, binding)
        now = self._ctx.clock()
        found: list[Job] = []
        for _ in range(MAX_READS_PER_PAGE):
            read = self._ctx.jobs.owned(owner, query.page_size, cursor,
                                        query.created_after, query.created_before)
            for index, job in enumerate(read.jobs):
                if query.matches(job, now):
                    found.append(job)
                if len(found) == query.page_size:
                    more = read.more or index < len(read.jobs) - 1
                    at = ListCursor(job.created_at, job.job_id)
                    return JobsPage(found, _encode(at, binding) if more else None)
            if not read.more or read.last is None:
                return JobsPage(found, None)
            cursor = read.last
        return JobsPage(found, _encode(cursor, binding))


def _binding(caller: str, owner: str, query: ListQuery) -> str:
    text = f"{caller}\n{owner}\n{query.filter_text()}"  # page_size may change between pages
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()[:16]).decode().rstrip("=")


def _encode(cursor: ListCursor, binding: str) -> str:
    data = json.dumps({"t": cursor.created_at.isoformat(), "j": cursor.job_id, "b": binding},
                      separators=(",", ":"))
    return base64.urlsafe_b64encode(data.encode()).decode().rstrip("=")


def _decode(token: str, binding: str) -> ListCursor:
    refused = InvalidRequest("page_token is not one this list gave to this caller with this filter")
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        created_at = datetime.fromisoformat(data["t"])
        job_id = data["j"]
        ok = data["b"] == binding and isinstance(job_id, str) and is_job_id(job_id) \
            and created_at.tzinfo is not None
    except (ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError):
        raise refused from None
    if not ok:
        raise refused
    return ListCursor(created_at, job_id)
