"""Direct uploads: POST /uploads (straight to storage: a presigned form, one presigned PUT,
or presigned PUTs of parts) behind the Idempotency-Key rules, and a multipart upload's state
and completion (GET and POST /image-jobs/{id}/upload)."""
from __future__ import annotations

import base64
import dataclasses
from datetime import datetime, timedelta
from typing import Iterable, Optional, Union

from chalicelib.domain import metadata as job_metadata
from chalicelib.domain import sniff
from chalicelib.domain.delivery import ORIGINAL_CACHE_CONTROL
from chalicelib.domain.errors import (
    FileTooLarge,
    InvalidRequest,
    JobFinished,
    UnsupportedFormat,
)
from chalicelib.domain.idempotency import check_idempotency_key
from chalicelib.domain.focus import Focus
from chalicelib.domain.jobs import Job, JobStatus
from chalicelib.domain.renditions import asked_renditions, extra_formats
from chalicelib.domain.vocabulary import UploadMethod
from chalicelib.domain.storage import StoredPart
from chalicelib.runtime.logs import get_logger
from chalicelib.runtime.metrics import Dimension, Metric, Route
from chalicelib.usecases import lifecycle
from chalicelib.usecases.admission import Admission
from chalicelib.usecases.context import Context
from chalicelib.usecases.idempotency import Idempotency, fingerprint_of
from chalicelib.usecases.results import Accepted, PartUpload, Upload, UploadForm, UploadParts, UploadPut

log = get_logger("uploads")

# A job past these has its file: its upload is over and worked, and the job is what is left.
_ARRIVED = frozenset({JobStatus.QUEUED, JobStatus.PROCESSING, JobStatus.READY})


class DirectUploads:
    def __init__(self, ctx: Context, admission: Admission, idempotency: Idempotency):
        self._ctx = ctx
        self._admission = admission
        self._idempotency = idempotency

    # -- POST /uploads -----------------------------------------------------------------------
    def create_direct_upload(self, owner: str, content_type: object, size: object,
                             idempotency_key: Optional[str] = None, method: object = UploadMethod.POST,
                             sha256: object = None, formats: Iterable[str] = (),
                             renditions: Optional[Iterable[str]] = None,
                             metadata: object = None, focus: Optional[Focus] = None) -> Accepted:
        """`focus`: the client's (chalicelib/domain/focus.py, parsed at the edge), or None."""
        ctx, s = self._ctx, self._ctx.settings
        check_idempotency_key(idempotency_key)
        given = job_metadata.check(metadata)
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
                      declared_sha256=sha256, formats=asked, sizes=sizes, metadata=given, focus=focus)
        job = self._idempotency.new_job(owner, JobStatus.AWAITING_UPLOAD, now, **fields)
        if method is UploadMethod.MULTIPART:
            # Started before the job is written, so that it is written once, whole; a replay
            # (or a refusal) aborts the one started for nothing.
            job = dataclasses.replace(job, part_size=s.multipart_part_bytes, multipart_upload_id=(
                ctx.objects.start_multipart(job.original_key, content_type, ORIGINAL_CACHE_CONTROL)))
        # The options of the first version (type and size) alone still fingerprint a POST.
        options = f"{content_type}\n{size}" if method is UploadMethod.POST and sha256 is None \
            else f"{content_type}\n{size}\n{method.value}\n{sha256 or ''}"
        fingerprint = fingerprint_of(b"uploads", options.encode(), asked, sizes, ctx.renditions, given, focus)
        try:
            accepted = self._idempotency.create(job, "uploads", idempotency_key, fingerprint, now)
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
        job = lifecycle.owned(self._ctx, owner, job_id, live=True)
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
        storage holds. The object is known to exist then, so the completion queues the job
        itself (lifecycle.mark_arrived): a client never reads a finished upload as
        `awaiting_upload`; storage's notification, which follows, finds it queued and the
        worker claims it as any other. Idempotent: a completion retried after a lost answer
        finds the job on its way (queueing it, if the first one ended before) and returns it."""
        ctx = self._ctx
        job = lifecycle.owned(self._ctx, owner, job_id, live=True)
        if job.multipart_upload_id is None:
            raise InvalidRequest("Only a multipart upload is completed")
        if job.status is not JobStatus.AWAITING_UPLOAD:
            if job.status.terminal and job.status is not JobStatus.READY:
                raise JobFinished(f"The job is {job.status.value}")
            return job
        try:
            stored = ctx.objects.list_parts(job.original_key, job.multipart_upload_id)
        except KeyError:
            return self._arrived(self._completed_before(job))
        chosen = stored if parts is None else _chosen(parts, stored)
        _check_parts(job, chosen)
        try:
            ctx.objects.complete_multipart(job.original_key, job.multipart_upload_id, chosen)
        except KeyError:
            return self._arrived(self._completed_before(job))
        log.info("multipart_upload_completed", job_id=job.job_id, parts=len(chosen))
        return lifecycle.mark_arrived(ctx, job)

    def _arrived(self, job: Job) -> Job:
        """The job of an upload found completed: queued now if nothing has queued it yet."""
        if job.status is JobStatus.AWAITING_UPLOAD:
            return lifecycle.mark_arrived(self._ctx, job)
        return job

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
