"""Accepting work: POST /images (bytes through the API) and POST /uploads (straight to
storage: a presigned form, one presigned PUT, or presigned PUTs of parts), both behind the
same Idempotency-Key rules; and a multipart upload's state and completion."""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import random
import re
import time
from datetime import datetime, timedelta
from typing import Iterable, Optional, Union

from chalicelib.domain import sniff
from chalicelib.domain.errors import (
    FileTooLarge,
    IdempotencyKeyReused,
    InvalidRequest,
    JobExpired,
    JobFinished,
    JobNotFound,
    IdempotencyKeyTaken,
    QuotaFull,
    RateLimited,
    StorageUnavailable,
    TransientError,
    UnsupportedFormat,
)
from chalicelib.domain.delivery import ORIGINAL_CACHE_CONTROL
from chalicelib.domain.jobs import Job, JobStatus
from chalicelib.domain.objectkeys import is_job_id
from chalicelib.domain.renditions import RenditionFormat, RenditionName, asked_renditions, extra_formats
from chalicelib.domain.vocabulary import ErrorCode, UploadMethod
from chalicelib.imaging import render
from chalicelib.ports import IdempotencyRecord, StoredPart
from chalicelib.runtime import deadline
from chalicelib.runtime.logs import get_logger
from chalicelib.runtime.metrics import Dimension, Metric, Route
from chalicelib.usecases import lifecycle
from chalicelib.usecases.admission import Admission
from chalicelib.usecases.context import Context
from chalicelib.usecases.results import Accepted, PartUpload, Upload, UploadForm, UploadParts, UploadPut

log = get_logger("uploads")

_IDEMPOTENCY_KEY = re.compile(r"[\x20-\x7e]{1,255}")
# Reads of a key that keeps changing hands before giving up with a 503.
_KEY_TURNS = 4
# The cap of the jittered pause before the next turn (seconds), doubled each turn: two
# requests with one key whose transactions keep meeting draw apart.
_KEY_TURN_PAUSE = 0.05
# Pauses before a key's missing job is taken for gone (seconds).
_GONE_PAUSES = (0.05, 0.1, 0.2)
# A job past these has its file: its upload is over and worked, and the job is what is left.
_ARRIVED = frozenset({JobStatus.QUEUED, JobStatus.PROCESSING, JobStatus.READY})


class Uploads:
    def __init__(self, ctx: Context, admission: Admission):
        self._ctx = ctx
        self._admission = admission

    # -- POST /images ------------------------------------------------------------------------
    def accept_upload(self, owner: str, data: bytes, idempotency_key: Optional[str] = None,
                      formats: Iterable[str] = (), renditions: Optional[Iterable[str]] = None) -> Accepted:
        ctx, s = self._ctx, self._ctx.settings
        check_idempotency_key(idempotency_key)
        asked = extra_formats(formats, s.enabled_formats)
        sizes = asked_renditions(renditions, ctx.renditions)
        self._admission.check_backlog()
        if len(data) > s.max_upload_bytes:
            raise FileTooLarge(f"The file is larger than {s.max_upload_bytes} bytes")
        info = render.inspect(data, s.max_pixels, ctx.decode_limits)
        fingerprint = _fingerprint(b"images", hashlib.sha256(data).digest(), asked, sizes, ctx.renditions)
        now = ctx.clock()
        job = self._new_job(owner, JobStatus.QUEUED, now, formats=asked, sizes=sizes)
        accepted = self._create(job, "images", idempotency_key, fingerprint, now)
        if accepted.replayed:
            return self._repair(accepted, data, info.content_type)
        job = accepted.job
        try:
            ctx.objects.put(job.original_key, data, info.content_type, ORIGINAL_CACHE_CONTROL)
        except TransientError:
            log.warning("original_store_failed", job_id=job.job_id)
            with deadline.compensating():
                going_on = self._compensate(job)
            if going_on is not None:
                return dataclasses.replace(accepted, job=going_on)
            raise StorageUnavailable(retry_after=s.retry_after_seconds) from None
        log.info("upload_accepted", job_id=job.job_id, content_type=info.content_type,
                 width=info.width, height=info.height, bytes=len(data))
        ctx.metrics.emit({Metric.JOBS_ACCEPTED: 1}, {Dimension.ROUTE: Route.IMAGES})
        return accepted

    def _compensate(self, job: Job) -> Optional[Job]:
        """After a failed put: end the job and free its key, unless the put landed after
        all (a timeout is ambiguous) and a worker already took the job. Then the job may
        still succeed: the key stays, and the job is returned to be answered as accepted.

        If the table is down too this raises, and the key stays with a queued job that has
        no original: a replay stores the bytes, or the sweeper ends it and frees the key."""
        ctx = self._ctx
        failed = lifecycle.fail(ctx, job, ErrorCode.STORAGE_UNAVAILABLE,
                                lambda f: ctx.jobs.move(f, JobStatus.QUEUED))
        if failed is None:
            current = ctx.jobs.get(job.job_id)
            if current is not None and not _never_stored(current):
                log.info("original_stored_after_all", job_id=job.job_id, status=current.status.value)
                return current
        if job.idempotency_scope:
            lifecycle.call_best_effort(ctx.jobs.release_idempotency, job.idempotency_scope, job.job_id)
        return None

    def _repair(self, accepted: Accepted, data: bytes, content_type: str) -> Accepted:
        """A replay whose first request died before storing the original: the fingerprint
        proves these bytes identical, so store them and the job goes on (the contract)."""
        ctx = self._ctx
        job = accepted.job
        if job.status is not JobStatus.QUEUED:
            return accepted  # a claimed job had its original: only queued ones may lack it
        try:
            if ctx.objects.head(job.original_key) is not None:
                return accepted
            ctx.objects.put(job.original_key, data, content_type, ORIGINAL_CACHE_CONTROL)
        except TransientError:
            # The job keeps waiting for its bytes: the next retry, or the sweeper, ends it.
            raise StorageUnavailable(retry_after=ctx.settings.retry_after_seconds) from None
        log.info("original_stored_by_replay", job_id=job.job_id)
        return accepted

    # -- POST /uploads -----------------------------------------------------------------------
    def create_direct_upload(self, owner: str, content_type: object, size: object,
                             idempotency_key: Optional[str] = None, method: object = UploadMethod.POST,
                             sha256: object = None, formats: Iterable[str] = (),
                             renditions: Optional[Iterable[str]] = None) -> Accepted:
        ctx, s = self._ctx, self._ctx.settings
        check_idempotency_key(idempotency_key)
        self._admission.check_backlog()
        if not isinstance(content_type, str) or not isinstance(size, int) or isinstance(size, bool):
            raise InvalidRequest('Send {"content_type": "image/...", "size": <bytes>}')
        if content_type not in sniff.ALLOWED_TYPES:
            raise UnsupportedFormat("content_type must be one of " + ", ".join(sorted(sniff.ALLOWED_TYPES)))
        if size < 1:
            raise InvalidRequest("size must be a positive number of bytes")
        if size > s.max_direct_upload_bytes:
            raise FileTooLarge(f"The file is larger than {s.max_direct_upload_bytes} bytes")
        method = _method(method)
        _check_sha256(sha256, method)
        asked = extra_formats(formats, s.enabled_formats)
        sizes = asked_renditions(renditions, ctx.renditions)
        if method is UploadMethod.MULTIPART and size < s.multipart_min_bytes:
            raise InvalidRequest(f"multipart is for files of at least {s.multipart_min_bytes} bytes; "
                                 'send smaller ones with "PUT"')
        now = ctx.clock()
        ttl = s.multipart_upload_ttl_seconds if method is UploadMethod.MULTIPART else s.upload_url_ttl_seconds
        upload_expires_at = now + timedelta(seconds=ttl)
        # The URLs expire at the deadline; the sweeper looks once a transfer begun just
        # before it has had time to arrive.
        fields = dict(declared_type=content_type, declared_size=size, upload_expires_at=upload_expires_at,
                      sweep_at=upload_expires_at + ctx.upload_grace, upload_method=method.value,
                      declared_sha256=sha256, formats=asked, sizes=sizes)
        job = self._new_job(owner, JobStatus.AWAITING_UPLOAD, now, **fields)
        if method is UploadMethod.MULTIPART:
            # Started before the job is written, so that it is written once, whole; a replay
            # (or a refusal) aborts the one started for nothing.
            job = dataclasses.replace(job, part_size=s.multipart_part_bytes, multipart_upload_id=(
                ctx.objects.start_multipart(job.original_key, content_type, ORIGINAL_CACHE_CONTROL)))
        # The options of the first version (type and size) alone still fingerprint a POST.
        options = f"{content_type}\n{size}" if method is UploadMethod.POST and sha256 is None \
            else f"{content_type}\n{size}\n{method.value}\n{sha256 or ''}"
        fingerprint = _fingerprint(b"uploads", options.encode(), asked, sizes, ctx.renditions)
        try:
            accepted = self._create(job, "uploads", idempotency_key, fingerprint, now)
        except BaseException:
            self._abort_unused(job)
            raise
        if accepted.replayed:
            self._abort_unused(job)
        else:
            ctx.metrics.emit({Metric.JOBS_ACCEPTED: 1}, {Dimension.ROUTE: Route.UPLOADS})
            ctx.metrics.emit({Metric.UPLOADS_CREATED: 1}, {Dimension.METHOD: method})
        job = accepted.job
        if job.status is not JobStatus.AWAITING_UPLOAD or job.upload_expires_at is None:
            return accepted
        upload = self._upload_of(job, now)
        if isinstance(upload, Job):
            return dataclasses.replace(accepted, job=upload)  # a replay after the file arrived
        log.info("direct_upload_created", job_id=job.job_id, replayed=accepted.replayed,
                 method=job.upload_method or UploadMethod.POST.value)
        return dataclasses.replace(accepted, upload=upload)

    def _abort_unused(self, job: Job) -> None:
        if job.multipart_upload_id is not None:
            lifecycle.call_best_effort(lifecycle.abort_upload, self._ctx, job)

    # -- GET and POST /image-jobs/{id}/upload -------------------------------------------------
    def current_upload(self, owner: str, job_id: str) -> Union[Upload, Job]:
        """The job's upload as it stands, with fresh URLs: how a client resumes. Once the
        file has arrived there is nothing left to send: the job, to follow."""
        ctx = self._ctx
        job = self._owned(owner, job_id)
        if job.status in _ARRIVED:
            return job
        if job.status is not JobStatus.AWAITING_UPLOAD or job.upload_expires_at is None:
            raise InvalidRequest(f"The job is {job.status.value}: its upload is over")
        upload = self._upload_of(job, ctx.clock())
        if upload is None:
            raise InvalidRequest("The job's time to upload is over")
        if isinstance(upload, Job):
            return upload
        ctx.metrics.emit({Metric.UPLOADS_RESUMED: 1},
                         {Dimension.METHOD: UploadMethod(job.upload_method or UploadMethod.POST)})
        return upload

    def complete_upload(self, owner: str, job_id: str, parts: Optional[list]) -> Job:
        """Join a multipart upload's parts; `parts` [(number, etag)], or None for the parts
        storage holds. Storage's notification of the object then queues the job. Idempotent:
        a completion retried after a lost answer finds the job on its way and returns it."""
        ctx = self._ctx
        job = self._owned(owner, job_id)
        if job.multipart_upload_id is None:
            raise InvalidRequest("Only a multipart upload is completed")
        if job.status is not JobStatus.AWAITING_UPLOAD:
            if job.status.terminal and job.status is not JobStatus.READY:
                raise JobFinished(f"The job is {job.status.value}")
            return job
        try:
            stored = ctx.objects.list_parts(job.original_key, job.multipart_upload_id)
        except KeyError:
            return self._completed_before(job)
        chosen = stored if parts is None else _chosen(parts, stored)
        _check_parts(job, chosen)
        try:
            ctx.objects.complete_multipart(job.original_key, job.multipart_upload_id, chosen)
        except KeyError:
            return self._completed_before(job)
        log.info("multipart_upload_completed", job_id=job.job_id, parts=len(chosen))
        return ctx.jobs.get(job.job_id) or job

    def _completed_before(self, job: Job) -> Job:
        """The upload is no more: completed by an earlier call (its object is there: the
        job, on its way), or aborted by a cancel or an expiry (JobFinished once the job shows
        it, InvalidRequest before)."""
        ctx = self._ctx
        if ctx.objects.head(job.original_key) is not None:
            return ctx.jobs.get(job.job_id) or job
        current = ctx.jobs.get(job.job_id) or job
        if current.status.terminal:
            raise JobFinished(f"The job is {current.status.value}")
        raise InvalidRequest("The upload was aborted")

    def _upload_of(self, job: Job, now: datetime) -> Union[Upload, Job, None]:
        """How the client sends the job's file from now on, with URLs valid until the job's
        deadline (a part's for at most upload_url_ttl_seconds); None past the deadline; the
        job when its multipart upload was completed (storage lists no parts of it then)."""
        ctx, s = self._ctx, self._ctx.settings
        assert job.upload_expires_at is not None and job.declared_type and job.declared_size
        seconds_left = int((job.upload_expires_at - now).total_seconds())
        if seconds_left <= 0:
            return None
        method = UploadMethod(job.upload_method or UploadMethod.POST)
        if method is UploadMethod.POST:
            post = ctx.objects.presign_post(job.original_key, job.declared_type, job.declared_size,
                                            seconds_left, ORIGINAL_CACHE_CONTROL)
            return UploadForm(url=post.url, fields=post.fields, expires_at=job.upload_expires_at)
        if method is UploadMethod.PUT:
            # No Cache-Control here: a signed header more would refuse the PUTs of clients
            # that send the two headers they always had (no URL of an original is handed out).
            put = ctx.objects.presign_put(job.original_key, job.declared_type, job.declared_size,
                                          job.declared_sha256, seconds_left)
            return UploadPut(url=put.url, headers=put.headers, expires_at=job.upload_expires_at)
        assert job.multipart_upload_id is not None and job.part_size
        try:
            held_parts = ctx.objects.list_parts(job.original_key, job.multipart_upload_id)
        except KeyError:
            return self._completed_before(job)
        stored = {p.number: p for p in held_parts}
        expires_in = min(seconds_left, s.upload_url_ttl_seconds)
        parts = []
        for number, size in enumerate(_part_sizes(job.declared_size, job.part_size), start=1):
            held = stored.get(number)
            if held is not None and held.size == size:
                parts.append(PartUpload(number=number, size=size, etag=held.etag))
            else:
                url = ctx.objects.presign_part(job.original_key, job.multipart_upload_id, number, size,
                                               expires_in)
                parts.append(PartUpload(number=number, size=size, url=url))
        return UploadParts(part_size=job.part_size, parts=tuple(parts),
                           expires_at=now + timedelta(seconds=expires_in))

    def _owned(self, owner: str, job_id: str) -> Job:
        job = self._ctx.jobs.get(job_id) if is_job_id(job_id) else None
        if job is None or job.owner != owner:
            raise JobNotFound()
        if job.is_expired(self._ctx.clock()):
            raise JobExpired()
        return job

    # -- shared ------------------------------------------------------------------------------
    def _new_job(self, owner: str, status: JobStatus, now: datetime, **fields) -> Job:
        ctx = self._ctx
        job_id = ctx.new_id()
        fields.setdefault("sweep_at", now + ctx.queue_timeout)
        return Job(job_id=job_id, owner=owner, status=status, created_at=now, updated_at=now,
                   expires_at=now + ctx.retention, original_key=ctx.object_keys.original(job_id), **fields)

    def _create(self, job: Job, operation: str, key: Optional[str], fingerprint: str,
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
        A slot still held by a job that finished (its release was lost in a crash) is
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
        """lifecycle.reconcile_slots, as a best effort: the table's answer was that the quota
        is full, and that is the answer (429) when the reconcile cannot be done now."""
        try:
            return lifecycle.reconcile_slots(self._ctx, owner)
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
        if job is None or _never_stored(job):
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


def _method(value: object) -> UploadMethod:
    try:
        return UploadMethod(value)
    except ValueError:
        raise InvalidRequest('method must be "POST", "PUT" or "multipart"') from None


def _check_sha256(value: object, method: UploadMethod) -> None:
    if value is None:
        return
    if method is not UploadMethod.PUT:
        raise InvalidRequest('sha256 pins the bytes of a "PUT" upload only')
    try:
        digest = base64.b64decode(value, validate=True) if isinstance(value, str) else b""
    except ValueError:
        digest = b""
    if len(digest) != 32:
        raise InvalidRequest("sha256 must be the file's SHA-256 digest in base64 (44 characters)")


def _part_sizes(size: int, part_size: int) -> list[int]:
    """Every part's size: part_size each, the last what is left."""
    full, rest = divmod(size, part_size)
    return [part_size] * full + ([rest] if rest else [])


def _chosen(parts: list, stored: list[StoredPart]) -> list[StoredPart]:
    """The client's [(number, etag)] as storage holds them (sizes from storage)."""
    held = {p.number: p for p in stored}
    chosen = []
    for number, etag in parts:
        part = held.get(number)
        if part is None or part.etag.strip('"') != etag.strip('"'):
            raise InvalidRequest(f"Part {number} is not stored with that ETag")
        chosen.append(part)
    return sorted(chosen, key=lambda p: p.number)


def _check_parts(job: Job, parts: list[StoredPart]) -> None:
    """Every part, each of its planned size: so the object has the declared size."""
    assert job.declared_size and job.part_size
    sizes = _part_sizes(job.declared_size, job.part_size)
    have = {p.number: p.size for p in parts}
    missing = [n for n, size in enumerate(sizes, start=1) if have.get(n) != size]
    if missing or len(have) != len(sizes):
        listed = ", ".join(map(str, missing[:20])) or "none"
        raise InvalidRequest(f"Parts missing or of another size than planned: {listed}")


def _never_stored(job: Job) -> bool:
    """A job that can no longer succeed because its original never arrived."""
    return job.status is JobStatus.FAILED and job.error_code in lifecycle.NEVER_STORED


def check_idempotency_key(key: Optional[str]) -> None:
    if key is not None and not _IDEMPOTENCY_KEY.fullmatch(key):
        raise InvalidRequest("Idempotency-Key must be 1-255 printable ASCII characters")


def _fingerprint(operation: bytes, payload: bytes, formats: tuple[RenditionFormat, ...] = (),
                 sizes: Optional[tuple[RenditionName, ...]] = None, specs=()) -> str:
    """The request's identity: the operation, its bytes (or declared file), the extra formats
    and the sizes, each in its canonical order. With no formats asked and the default sizes,
    it is what it was before either existed, so keys held across the upgrade still replay
    (naming the default sizes is the same request as naming none)."""
    extra = b"\nformats=" + ",".join(formats).encode() if formats else b""
    if sizes is not None and sizes != asked_renditions(None, specs):
        extra += b"\nrenditions=" + ",".join(sizes).encode()
    return hashlib.sha256(operation + b"\n" + payload + extra).hexdigest()
