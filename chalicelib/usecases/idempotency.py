"""Creating a job, with or without an Idempotency-Key, within its owner's quota: one job per
key and fingerprint, a replay answered with the job the key holds, and a key whose job can no
longer succeed taken over."""
from __future__ import annotations

import dataclasses
import hashlib
import random
import time
from datetime import datetime, timedelta
from typing import Optional

from chalicelib.domain import metadata as job_metadata
from chalicelib.domain.errors import (
    IdempotencyKeyReused,
    IdempotencyKeyTaken,
    JobNotFound,
    QuotaFull,
    RateLimited,
    TransientError,
)
from chalicelib.domain.focus import Focus, canonical
from chalicelib.domain.jobs import Job, JobStatus
from chalicelib.domain.renditions import RenditionFormat, RenditionName, asked_renditions
from chalicelib.domain.idempotency import IdempotencyRecord
from chalicelib.runtime.logs import get_logger
from chalicelib.usecases import lifecycle
from chalicelib.usecases.admission import Admission
from chalicelib.usecases.context import Context
from chalicelib.usecases.results import Accepted

log = get_logger("uploads")

# Reads of a key that keeps changing hands before giving up with a 503.
_KEY_TURNS = 4
# The cap of the jittered pause before the next turn (seconds), doubled each turn: two
# requests with one key whose transactions keep meeting draw apart.
_KEY_TURN_PAUSE = 0.05
# Pauses before a key's missing job is taken for gone (seconds).
_GONE_PAUSES = (0.05, 0.1, 0.2)


class Idempotency:
    def __init__(self, ctx: Context, admission: Admission):
        self._ctx = ctx
        self._admission = admission

    def new_job(self, owner: str, status: JobStatus, now: datetime, **fields) -> Job:
        ctx = self._ctx
        job_id = ctx.new_id()
        fields.setdefault("sweep_at", now + ctx.queue_timeout)
        return Job(job_id=job_id, owner=owner, status=status, created_at=now, updated_at=now,
                   expires_at=now + ctx.retention, original_key=ctx.object_keys.original(job_id), **fields)

    def create(self, job: Job, operation: str, key: Optional[str], fingerprint: str,
                now: datetime) -> Accepted:
        jobs = self._ctx.jobs
        if key is None:
            self._within_quota(lambda quota: jobs.create(job, quota), job.owner)
            return Accepted(job)
        scope = hashlib.sha256(f"{job.owner}\n{operation}\n{key}".encode()).hexdigest()
        job = dataclasses.replace(job, idempotency_scope=scope)
        ttl = timedelta(seconds=self._ctx.settings.idempotency_ttl_seconds)
        record = IdempotencyRecord(scope=scope, fingerprint=fingerprint, job_id=job.job_id,
                                   expires_at=now + ttl)
        # Each turn either answers or sees the key change hands (a concurrent request took
        # it, or a doomed job gave it up): look again, a few times. The key is read only when
        # the write loses, so a first request costs one transaction.
        for turn in range(_KEY_TURNS):
            if turn:
                time.sleep(random.uniform(0, _KEY_TURN_PAUSE * 2 ** turn))
            try:
                self._within_quota(lambda quota: jobs.create_with_key(job, record, now, quota),
                                   job.owner)
                return Accepted(job)
            except IdempotencyKeyTaken:
                pass  # held, or a concurrent identical request's transaction was in flight
            held = jobs.get_idempotency(scope)
            if held is None or now >= held.expires_at:
                continue  # freed or expired meanwhile: take it
            if held.job_id == job.job_id:
                # Our own transaction: it committed, and botocore re-sent it after a timeout.
                return Accepted(job)
            replayed = self._replay(held, fingerprint, job.owner)
            if replayed is not None:
                return replayed
        raise TransientError("the idempotency key kept changing hands")

    def _within_quota(self, create, owner: str) -> None:
        """Create within the owner's quota of unfinished jobs (429 rate_limited past it).
        A quota place still held by a job that finished (its release was lost in a crash) is
        given back here, so a quota never leaks for good."""
        s = self._ctx.settings
        for first_try in (True, False):
            try:
                return create(s.max_active_jobs)
            except QuotaFull:
                if not (first_try and self._admission.may_reconcile(owner) and self._reconcile(owner)):
                    break
        log.warning("upload_rate_limited", reason="active_jobs", limit=s.max_active_jobs)
        raise RateLimited(f"You already have {s.max_active_jobs} unfinished jobs; try again when "
                          "one has finished", retry_after=max(s.retry_after_seconds, 5))

    def _reconcile(self, owner: str) -> bool:
        """lifecycle.reconcile_places, as a best effort: the table's answer was that the quota
        is full, and that is the answer (429) when the reconcile cannot be done now."""
        try:
            return lifecycle.reconcile_places(self._ctx, owner)
        except TransientError:
            log.warning("quota_reconcile_failed")
            return False

    def _replay(self, held: IdempotencyRecord, fingerprint: str, owner: str) -> Optional[Accepted]:
        """The held key's job, or None after freeing a key whose job can no longer succeed
        (it never got its original, or it is gone): the caller then takes the key."""
        if held.fingerprint != fingerprint:
            raise IdempotencyKeyReused("This Idempotency-Key was used for a different request")
        job = self._job_of(held)
        if job is not None and job.owner != owner:
            raise JobNotFound()
        if job is None or never_stored(job):
            log.info("idempotency_key_taken_over", job_id=held.job_id)
            self._ctx.jobs.release_idempotency(held.scope, held.job_id)
            return None
        log.info("idempotent_replay", job_id=job.job_id)
        return Accepted(job, replayed=True)

    def _job_of(self, held: IdempotencyRecord) -> Optional[Job]:
        """The key's job. DynamoDB writes the key and the job in one atomic transaction, but
        an emulator may show the key a moment before the job: look again briefly before
        calling it gone."""
        for pause in _GONE_PAUSES:
            job = self._ctx.jobs.get(held.job_id)
            if job is not None:
                return job
            time.sleep(pause)
        return self._ctx.jobs.get(held.job_id)


def never_stored(job: Job) -> bool:
    """A job that can no longer succeed because its original never arrived."""
    return job.status is JobStatus.FAILED and job.error_code in lifecycle.NEVER_STORED


def fingerprint_of(operation: bytes, payload: bytes, formats: tuple[RenditionFormat, ...] = (),
                 sizes: Optional[tuple[RenditionName, ...]] = None, specs=(),
                 metadata: Optional[dict] = None, focus: Optional[Focus] = None) -> str:
    """The request's identity: the operation, its bytes (or declared file), the extra formats
    and the sizes, each in its canonical order, the metadata (whatever its keys' order) and
    the client's focus (as kept: 0.5 and 0.50 are one point). With no formats asked, the
    default sizes, no metadata and no focus, it is what it was before any of them existed, so
    keys held across the upgrades still replay (naming the default sizes is the same request
    as naming none)."""
    extra = b"\nformats=" + ",".join(formats).encode() if formats else b""
    if sizes is not None and sizes != asked_renditions(None, specs):
        extra += b"\nrenditions=" + ",".join(sizes).encode()
    if metadata:
        extra += b"\nmetadata=" + job_metadata.canonical(metadata)
    if focus is not None:
        extra += b"\nfocus=" + canonical(focus)
    return hashlib.sha256(operation + b"\n" + payload + extra).hexdigest()
