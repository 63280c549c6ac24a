"""The job: its statuses, the legal moves between them, and its fields. No I/O."""
from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Mapping, Optional

from chalicelib.domain.errors import IllegalTransition
from chalicelib.domain.focus import Focus
from chalicelib.domain.renditions import ALWAYS, ANIMATION_CONTENT_TYPE, AnimationSkipped, RenditionFormat, RenditionName
from chalicelib.domain.source import Source
from chalicelib.domain.vocabulary import ErrorCode


class JobStatus(str, Enum):
    AWAITING_UPLOAD = "awaiting_upload"
    QUEUED = "queued"
    PROCESSING = "processing"
    READY = "ready"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({JobStatus.READY, JobStatus.FAILED, JobStatus.CANCELLED})
# How far along the status diagram a status is: every move in TRANSITIONS goes up a step,
# except a re-claim, which raises the attempt instead (Job.sequence).
_STEP = {JobStatus.AWAITING_UPLOAD: 0, JobStatus.QUEUED: 1, JobStatus.PROCESSING: 2,
         JobStatus.READY: 3, JobStatus.FAILED: 3, JobStatus.CANCELLED: 3}

# The due index is write-sharded (docs/scale.md §6.1): its partition key is the status and
# a shard of the job id, so no one status's key takes every job's writes. Fixed: changing it
# re-keys every item (infra.capacity.due_shards() derives it; tests/deploy pins that).
DUE_SHARDS = 64


def due_shard(job_id: str) -> int:
    """The job's shard: from a hash of its id, never from the id's own characters, so the
    spread does not depend on the id's format (a time-ordered id puts its clock first)."""
    return int.from_bytes(hashlib.sha256(job_id.encode()).digest()[:4], "big") % DUE_SHARDS


def shard_key(status: JobStatus, shard: int) -> str:
    """The due index's partition key of one status's shard, e.g. `queued#07`."""
    return f"{status.value}#{shard:02d}"


def sweep_key(status: JobStatus, job_id: str) -> str:
    """What every store writes as `sweep_key` with every write that sets `status`."""
    return shard_key(status, due_shard(job_id))

# The status diagram of the contract. processing -> processing is a re-claim after a lease
# ran out; the claim itself is a store operation (JobStore.claim), since only the store can
# check a lease atomically, and its rule is Job.claimable.
TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.AWAITING_UPLOAD: frozenset({JobStatus.QUEUED, JobStatus.FAILED, JobStatus.CANCELLED}),
    JobStatus.QUEUED: frozenset({JobStatus.PROCESSING, JobStatus.FAILED, JobStatus.CANCELLED}),
    JobStatus.PROCESSING: frozenset(
        {JobStatus.PROCESSING, JobStatus.READY, JobStatus.FAILED, JobStatus.CANCELLED}
    ),
    JobStatus.READY: frozenset(),
    JobStatus.FAILED: frozenset(),
    JobStatus.CANCELLED: frozenset(),
}


def check_transition(source: JobStatus, target: JobStatus) -> None:
    if target not in TRANSITIONS[source]:
        raise IllegalTransition(source, target)


@dataclass(frozen=True)
class Variant:
    """A rendition in an extra format: the same pixels' size as its JPEG, its own object."""

    key: str
    bytes: int


@dataclass(frozen=True)
class Animation:
    """An animated source's rendition as an animated WebP: every frame, sized and cropped as
    the rendition's still (which is its first frame), its own object."""

    key: str
    width: int
    height: int
    frames: int
    duration_ms: int  # one play, as browsers play the original (chalicelib/imaging/timeline.py)
    bytes: int
    content_type: str = ANIMATION_CONTENT_TYPE


@dataclass(frozen=True)
class Rendition:
    key: str
    width: int
    height: int
    content_type: str = "image/jpeg"
    variants: dict[RenditionFormat, Variant] = field(default_factory=dict)
    animation: Optional[Animation] = None  # an animated source's, unless skipped

    @property
    def keys(self) -> tuple[str, ...]:
        """Its objects: the JPEG's, each variant's and the animation's."""
        animation = () if self.animation is None else (self.animation.key,)
        return (self.key, *(v.key for v in self.variants.values()), *animation)


@dataclass(frozen=True)
class Placeholder:
    """What an app paints before the image arrives: a BlurHash and the average colour."""

    blurhash: str
    average_color: str  # "#rrggbb", sRGB


@dataclass(frozen=True)
class Job:
    job_id: str
    owner: str
    status: JobStatus
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    original_key: str
    attempt: int = 0
    lease_expires_at: Optional[datetime] = None
    # A ready job's renditions, one per row of chalicelib/domain/renditions.py; empty before.
    renditions: dict[RenditionName, Rendition] = field(default_factory=dict)
    error_code: Optional[ErrorCode] = None
    finished_at: Optional[datetime] = None
    # When the sweeper should next look at this job (lease end, upload deadline, expiry...).
    sweep_at: Optional[datetime] = None
    # How often the sweeper re-sent this job's object-created event.
    resends: int = 0
    # Direct uploads: what the client declared, and when its upload URL expires.
    declared_type: Optional[str] = None
    declared_size: Optional[int] = None
    upload_expires_at: Optional[datetime] = None
    upload_method: Optional[str] = None      # an UploadMethod; None for POST /images
    declared_sha256: Optional[str] = None    # base64, as S3's x-amz-checksum-sha256
    # A multipart upload: storage's id for it, and the size of every part but the last.
    multipart_upload_id: Optional[str] = None
    part_size: Optional[int] = None
    # The idempotency record that points here, so deleting the job can free the key.
    idempotency_scope: Optional[str] = None
    # The extra formats the upload asked for (chalicelib/domain/renditions.py), besides JPEG.
    formats: tuple[RenditionFormat, ...] = ()
    placeholder: Optional[Placeholder] = None  # a ready job's
    # The renditions the upload asked for (chalicelib/domain/renditions.py, asked_renditions);
    # a record from before they could be asked for has none stored, and made these two.
    sizes: tuple[RenditionName, ...] = ALWAYS
    # The app's own strings (chalicelib/domain/metadata.py), as the upload gave them.
    metadata: dict[str, str] = field(default_factory=dict)
    # The original's facts (chalicelib/domain/source.py), once its bytes have been read.
    source: Optional[Source] = None
    # A ready job's perceptual hash: 64 bits as 16 hex characters (chalicelib/imaging/phash.py).
    phash: Optional[str] = None
    # A ready job whose renditions are copies of this earlier job's (the same owner's same
    # bytes: chalicelib/usecases/duplicates.py); its objects are its own all the same.
    duplicate_of: Optional[str] = None
    # The point the square renditions are placed around (chalicelib/domain/focus.py): the
    # client's from the upload (source `client`), then, once ready, the one they were placed
    # around. None on a job without a client's focus until it is ready, and on every job made
    # before the focus (its squares are centre crops).
    focus: Optional[Focus] = None
    # A ready job of an animated source whose renditions have no animation: why.
    animation_skipped: Optional[AnimationSkipped] = None

    def is_expired(self, now: datetime) -> bool:
        return now >= self.expires_at

    @property
    def version(self) -> str:
        """Names the job's state as clients see it: changes with every status change (and a
        re-claim's attempt), never with the presigned URLs; opaque, so nothing reads into it."""
        digest = hashlib.sha256(f"{self.job_id}/{self.status.value}/{self.attempt}".encode())
        return digest.hexdigest()[:20]

    @property
    def sequence(self) -> int:
        """Grows with every status change of the job (and a re-claim's attempt), never falls:
        of two states of one job, the one with the higher sequence is the later. Attempts
        never decrease, and within one attempt every move goes a step along the diagram."""
        return self.attempt * 4 + _STEP[self.status]

    def lease_active(self, now: datetime) -> bool:
        return self.lease_expires_at is not None and now < self.lease_expires_at

    def claimable(self, now: datetime, max_attempts: int) -> bool:
        """The claim rule, the one statement of it (JobStore.claim writes only when it holds;
        the DynamoDB condition in adapters/dynamo_jobs.py follows it clause by clause):
        (1) queued, or (2) processing with a lease that has run out, and (3) an attempt left.
        A processing job with no lease at all counts as held."""
        lease_over = self.lease_expires_at is not None and self.lease_expires_at <= now
        open_to_claim = self.status is JobStatus.QUEUED or (self.status is JobStatus.PROCESSING and lease_over)
        return open_to_claim and self.attempt_left(max_attempts)

    def attempt_left(self, max_attempts: int) -> bool:
        """Clause (3) of the claim rule: a job that has had max_attempts claims gets no more."""
        return self.attempt < max_attempts

    def _move(self, target: JobStatus, now: datetime, **changes) -> "Job":
        check_transition(self.status, target)
        return dataclasses.replace(self, status=target, updated_at=now, **changes)

    def queued(self, now: datetime, claim_within: timedelta) -> "Job":
        return self._move(JobStatus.QUEUED, now, sweep_at=now + claim_within)

    def resent(self, now: datetime, look_again_after: timedelta) -> "Job":
        """Same status; the sweeper re-sent the event and will look again later."""
        return dataclasses.replace(
            self, updated_at=now, resends=self.resends + 1, sweep_at=now + look_again_after
        )

    def ready(self, now: datetime, renditions: Mapping[RenditionName, Rendition],
              retention: timedelta, placeholder: Optional[Placeholder] = None,
              phash: Optional[str] = None, duplicate_of: Optional[str] = None,
              focus: Optional[Focus] = None,
              animation_skipped: Optional[AnimationSkipped] = None) -> "Job":
        return self._move(
            JobStatus.READY, now, renditions=dict(renditions), placeholder=placeholder, phash=phash,
            duplicate_of=duplicate_of, focus=focus, animation_skipped=animation_skipped,
            lease_expires_at=None,
            finished_at=now, expires_at=now + retention, sweep_at=now + retention,
        )

    def failed(self, now: datetime, code: ErrorCode, retention: timedelta) -> "Job":
        return self._move(
            JobStatus.FAILED, now, error_code=code, lease_expires_at=None,
            finished_at=now, expires_at=now + retention, sweep_at=now + retention,
        )

    def cancelled(self, now: datetime, retention: timedelta) -> "Job":
        return self._move(
            JobStatus.CANCELLED, now, lease_expires_at=None, finished_at=now,
            expires_at=now + retention, sweep_at=now + retention,
        )


@dataclass(frozen=True)
class JobObjects:
    """What a job says about its objects: the only part of it the orphan scan reads, so
    the store can read just these fields for a hundred jobs at a time."""

    job_id: str
    status: JobStatus
    attempt: int
    original_key: str
    result_keys: frozenset[str]  # the renditions of a ready job, every format; none otherwise

    @classmethod
    def of(cls, job: Job) -> "JobObjects":
        return cls(job_id=job.job_id, status=job.status, attempt=job.attempt, original_key=job.original_key,
                   result_keys=frozenset(k for r in job.renditions.values() for k in r.keys))
