"""GET /image-jobs: an owner's jobs, newest first, a page at a time (docs/contract.md "The
list"). Pages come from the owner index (JobStore.owned); the status and expiry filters
apply to the jobs read, so a page is filled from a few reads of the index at most.

The page token is opaque to clients: base64url of the place reached (the last job's
created_at and id) and an HMAC of that place, the caller, the owner and the filter under a
key of the deployment (ctx.keys), so a token this service did not give to this caller for
this filter, or one altered, is refused before anything in it is read. Tokens of the first
shape (an unkeyed digest anyone could compute) are refused with a word to start again.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import struct
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
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
# The deployment's secret that signs page tokens (ctx.keys).
TOKEN_KEY = "page-token"
# A token: this shape's number, created_at in microseconds since the epoch, the job id's 16
# bytes, then the MAC's first 16 bytes. Shape 1 was base64url of JSON, so its first byte
# is "{".
_SHAPE = 2
_PLACE = struct.Struct(">Bq16s")
_MAC_BYTES = 16
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_-]+")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


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

    def empty(self) -> bool:
        """Whether the times leave no room for any job (both bounds are exclusive)."""
        return (self.created_after is not None and self.created_before is not None
                and self.created_after >= self.created_before)

    def filter_text(self) -> list:
        """The filter, canonical: what a page token is bound to besides the caller. Times in
        UTC, so one instant written with another offset is the same filter."""
        return [sorted(s.value for s in self.statuses), _utc(self.created_after), _utc(self.created_before)]


def _utc(at: Optional[datetime]) -> str:
    return at.astimezone(timezone.utc).isoformat(timespec="microseconds") if at else ""


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
        tokens = _Tokens(lambda: self._ctx.keys.key(TOKEN_KEY), caller, owner, query)
        cursor = None if query.page_token is None else tokens.read(query.page_token)
        if query.empty():  # DynamoDB refuses a range whose start is past its end
            return JobsPage([], None)
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
                    return JobsPage(found, tokens.make(at) if more else None)
            if not read.more or read.last is None:
                return JobsPage(found, None)
            cursor = read.last
        return JobsPage(found, tokens.make(cursor))


class _Tokens:
    """Page tokens of one list: one caller, one owner, one filter. The key is asked for only
    when a token is made or read."""

    def __init__(self, key, caller: str, owner: str, query: ListQuery):
        self._key = key
        # page_size is left out: it may change between pages.
        self._binding = json.dumps([caller, owner, query.filter_text()], separators=(",", ":")).encode()

    def _mac(self, place: bytes) -> bytes:
        return hmac.new(self._key(), self._binding + place, hashlib.sha256).digest()[:_MAC_BYTES]

    def make(self, cursor: ListCursor) -> str:
        micros = (cursor.created_at - _EPOCH) // timedelta(microseconds=1)
        place = _PLACE.pack(_SHAPE, micros, uuid.UUID(cursor.job_id).bytes)
        return base64.urlsafe_b64encode(place + self._mac(place)).decode().rstrip("=")

    def read(self, token: str) -> ListCursor:
        raw = _unbase64(token)
        if raw[:1] == b"{":
            raise InvalidRequest("page_token is of an older shape this list no longer takes: "
                                 "list again from the first page, without page_token")
        place, mac = raw[:_PLACE.size], raw[_PLACE.size:]
        if len(raw) != _PLACE.size + _MAC_BYTES or place[0] != _SHAPE \
                or not hmac.compare_digest(mac, self._mac(place)):
            raise _refused()
        _, micros, id_bytes = _PLACE.unpack(place)
        # Signed by this service, so a place it made; checked all the same.
        job_id = str(uuid.UUID(bytes=id_bytes))
        try:
            created_at = _EPOCH + timedelta(microseconds=micros)
        except OverflowError:
            raise _refused() from None
        if not is_job_id(job_id):
            raise _refused()
        return ListCursor(created_at, job_id)


def _unbase64(token: str) -> bytes:
    """The bytes of a token exactly as make() writes it: base64url without padding, nothing
    around it (base64's decoder would skip stray characters)."""
    if not _TOKEN_CHARS.fullmatch(token):
        raise _refused()
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        raise _refused() from None
    if base64.urlsafe_b64encode(raw).decode().rstrip("=") != token:
        raise _refused()
    return raw


def _refused() -> InvalidRequest:
    return InvalidRequest("page_token is not one this list gave to this caller with this filter")
