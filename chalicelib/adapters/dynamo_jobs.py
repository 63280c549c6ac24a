"""JobStore on DynamoDB (AWS, LocalStack, moto) through PynamoDB.

Every status change is one conditional write naming the status it leaves; worker writes
also name the attempt they hold, a fencing token against stale workers. Jobs and
idempotency records share one table (key `pk`), so they can be written in one transaction.
"""
from __future__ import annotations

import dataclasses
import hashlib
import time
from contextlib import suppress
from datetime import datetime, timedelta
from typing import Any, Callable, Optional, Sequence

from pynamodb.attributes import (
    Attribute,
    BooleanAttribute,
    MapAttribute,
    NumberAttribute,
    TTLAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
    UTCDateTimeAttribute,
)
from pynamodb.constants import MAP
from pynamodb.exceptions import TransactWriteError
from pynamodb.expressions.condition import size
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex, KeysOnlyProjection
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from chalicelib.adapters import dynamo_shapes
from chalicelib.adapters.dynamo_table import (
    DynamoTable, dynamo_errors, find, found_item, new_write_id, reason_codes, retrying_conflicts, written_once,
)
from chalicelib.domain.errors import ConditionFailed, IdempotencyKeyTaken, QuotaFull, TransientError
from chalicelib.domain import metadata as job_metadata
from chalicelib.domain.focus import Focus, FocusSource
from chalicelib.domain.jobs import Animation, Job, JobObjects, JobStatus, Placeholder, Rendition, Variant, shard_key, sweep_key
from chalicelib.domain.renditions import ALWAYS, AnimationSkipped, RenditionFormat, RenditionName
from chalicelib.domain.source import ColorSpace, Source
from chalicelib.domain.vocabulary import ErrorCode
from chalicelib.domain.idempotency import IdempotencyRecord
from chalicelib.domain.listing import ListCursor, OwnedPage
from chalicelib.domain.storage import ScanPoint
from chalicelib.runtime import deadline

JOB_PREFIX = "job#"
IDEMPOTENCY_PREFIX = "idem#"
OWNER_PREFIX = "owner#"
SCAN_PREFIX = "orphan-scan#"
CONTENT_PREFIX = "content#"
UNAVAILABLE = "job table unavailable"
# The due index: the jobs by when the sweeper should look at them next, write-sharded:
# partition key `sweep_key` (`<status>#<shard>`), sort key `sweep_at` (docs/scale.md §6.1).
# Its name and its attributes' are those stored and deployed (infra/template.yaml).
DUE_INDEX = "sweep_sharded"
# The list's index: partition key `owner`, sort key `created_at`, keys only (docs/scale.md
# §11): a job's later writes leave its keys alone, so only its creation writes the index.
OWNER_CREATED_INDEX = "owner_created"
# Job fields that the item stores in another form (the rest map one to one by name).
_SPECIAL = frozenset({"job_id", "status", "error_code", "renditions", "formats", "placeholder", "sizes",
                      "metadata", "source", "focus", "animation_skipped"})
BATCH_GET_KEYS = 100  # DynamoDB's most keys per BatchGetItem
# A BatchGetItem may answer with some keys unread (throttled, or over 16 MB): they are asked
# again after a growing pause, this many times at most.
UNPROCESSED_RETRIES = 5
# What the orphan scan reads of a job (JobObjects): every attribute that names an object in
# any shape a record can still have. The renditions are read whole (their names are the
# table's): their sizes add a few bytes, no capacity (a read is charged by item).
_OBJECT_FIELDS = ("pk", "status", "attempt", *dynamo_shapes.OBJECT_ATTRIBUTES)


class RenditionAttribute(MapAttribute):
    key = UnicodeAttribute()
    width = NumberAttribute()
    height = NumberAttribute()
    content_type = UnicodeAttribute()
    # {format: {"key": ..., "bytes": ...}}, absent when the upload asked for no extra format.
    variants = MapAttribute(null=True)
    # An animated source's animation (key, width, height, frames, duration_ms, bytes);
    # absent for a still, and on every item from before shape 5.
    animation = MapAttribute(null=True)


class PlaceholderAttribute(MapAttribute):
    blurhash = UnicodeAttribute()
    average_color = UnicodeAttribute()


class SourceAttribute(MapAttribute):
    """The original's facts (chalicelib/domain/source.py), one attribute each, stored under
    one-letter names: a ready job item is near one write unit (1 KB, docs/scale.md §10), and
    attribute names count in its size."""

    width = NumberAttribute(attr_name="w")
    height = NumberAttribute(attr_name="h")
    format = UnicodeAttribute(attr_name="f")
    bytes = NumberAttribute(attr_name="b")
    captured_at = UnicodeAttribute(null=True, attr_name="t")
    color_space = UnicodeAttribute(attr_name="c")
    has_alpha = BooleanAttribute(attr_name="a")
    # Absent on items from before shape 5 (frames not read then).
    frames = NumberAttribute(null=True, attr_name="n")
    duration_ms = NumberAttribute(null=True, attr_name="d")

    @classmethod
    def of(cls, source: Optional[Source]) -> Optional["SourceAttribute"]:
        if source is None:
            return None
        return cls(**{**dataclasses.asdict(source), "color_space": source.color_space.value})

    def to_source(self) -> Source:
        return Source(width=int(self.width), height=int(self.height), format=self.format,
                      bytes=int(self.bytes), captured_at=self.captured_at,
                      color_space=ColorSpace(self.color_space), has_alpha=bool(self.has_alpha),
                      frames=None if self.frames is None else int(self.frames),
                      duration_ms=None if self.duration_ms is None else int(self.duration_ms))


class FocusAttribute(MapAttribute):
    """A job's focus (chalicelib/domain/focus.py): x and y as numbers, the source as `s`."""

    x = NumberAttribute()
    y = NumberAttribute()
    source = UnicodeAttribute(attr_name="s")

    @classmethod
    def of(cls, focus: Optional[Focus]) -> Optional["FocusAttribute"]:
        return None if focus is None else cls(x=focus.x, y=focus.y, source=focus.source.value)

    def to_focus(self) -> Focus:
        return Focus(float(self.x), float(self.y), FocusSource(self.source))


# Not a class attribute of RenditionsAttribute: PynamoDB would take it for a field of a container.
_EACH = RenditionAttribute()


class RenditionsAttribute(Attribute[dict]):
    """A job's renditions as one map, keyed by rendition name, of RenditionAttribute maps."""

    attr_type = MAP

    def serialize(self, value: dict[RenditionName, Rendition]) -> dict:
        return {str(name): {MAP: _EACH.serialize(_stored(r))} for name, r in value.items()}

    def deserialize(self, value: dict) -> dict[RenditionName, Rendition]:
        found = {}
        for name, stored in value.items():
            a = _EACH.deserialize(stored[MAP])
            variants = a.variants.as_dict() if a.variants is not None else {}
            animated = a.animation.as_dict() if a.animation is not None else None
            found[RenditionName(name)] = Rendition(
                key=a.key, width=int(a.width), height=int(a.height), content_type=a.content_type,
                variants={RenditionFormat(fmt): Variant(v["key"], int(v["bytes"])) for fmt, v in variants.items()},
                animation=None if animated is None else Animation(
                    animated["key"], int(animated["width"]), int(animated["height"]), int(animated["frames"]),
                    int(animated["duration_ms"]), int(animated["bytes"])))
        return found


def _stored(r: Rendition) -> dict:
    stored = {"key": r.key, "width": r.width, "height": r.height, "content_type": r.content_type}
    if r.variants:
        stored["variants"] = {str(fmt): {"key": v.key, "bytes": v.bytes} for fmt, v in r.variants.items()}
    if r.animation is not None:
        a = r.animation
        stored["animation"] = {"key": a.key, "width": a.width, "height": a.height, "frames": a.frames,
                               "duration_ms": a.duration_ms, "bytes": a.bytes}
    return stored


class JobItem(Model):
    """Unbound: job_model() gives a subclass bound to the table.

    Written in the shape dynamo_shapes.SHAPE_VERSION names; read in any shape a record can
    still have: every read (get, query, batch get, an update's answer, a stream image)
    reaches one of the two methods below, which upgrade the raw item first."""

    @classmethod
    def from_raw_data(cls, data):
        return super().from_raw_data(data if data is None else dynamo_shapes.upgrade(data))

    def deserialize(self, attribute_values):
        return super().deserialize(dynamo_shapes.upgrade(attribute_values))

    pk = UnicodeAttribute(hash_key=True)
    owner = UnicodeAttribute()
    status = UnicodeAttribute()
    attempt = NumberAttribute(default=0)
    lease_expires_at = UTCDateTimeAttribute(null=True)
    original_key = UnicodeAttribute()
    renditions = RenditionsAttribute(null=True)  # absent until the job is ready
    error_code = UnicodeAttribute(null=True)
    created_at = UTCDateTimeAttribute()
    updated_at = UTCDateTimeAttribute()
    finished_at = UTCDateTimeAttribute(null=True)
    # The due index's sort key: when the sweeper should look at this job next.
    sweep_at = UTCDateTimeAttribute(null=True)
    # The due index's partition key, sweep_key(status, job id): set with every status.
    sweep_key = UnicodeAttribute(null=True)
    resends = NumberAttribute(default=0, attr_name="redrives")  # stored under its older name
    declared_type = UnicodeAttribute(null=True)
    declared_size = NumberAttribute(null=True)
    upload_expires_at = UTCDateTimeAttribute(null=True)
    upload_method = UnicodeAttribute(null=True)
    declared_sha256 = UnicodeAttribute(null=True)
    multipart_upload_id = UnicodeAttribute(null=True)
    part_size = NumberAttribute(null=True)
    idempotency_scope = UnicodeAttribute(null=True)
    formats = UnicodeAttribute(null=True)  # the extra formats asked for, comma-separated
    placeholder = PlaceholderAttribute(null=True)  # a ready job's
    # The renditions asked for, comma-separated; absent on a record from before sizes could
    # be asked for, which made the two of ALWAYS.
    sizes = UnicodeAttribute(null=True)
    # The app's metadata as JSON text, in the order given; absent without (and on old items).
    metadata = UnicodeAttribute(null=True)
    # The original's facts once read; absent before (and on items from before shape 4).
    source = SourceAttribute(null=True)
    phash = UnicodeAttribute(null=True)  # a ready job's (absent on older ones)
    duplicate_of = UnicodeAttribute(null=True)  # a ready job made by copies of this job's
    # The client's focus from the upload, then the one a ready job's squares were placed
    # around; absent without (and on items from before shape 5: their squares are centred).
    focus = FocusAttribute(null=True)
    # An animated source's ready job without animations: why (an AnimationSkipped code).
    animation_skipped = UnicodeAttribute(null=True)
    # DynamoDB deletes late (up to days): readers compare it with the clock themselves.
    expires_at = TTLAttribute()
    # A fresh id from each conditional write of the job (absent in items written before it
    # existed): a write botocore re-sent after a lost answer, whose re-send then failed its
    # condition, finds its own id here and knows it landed.
    write_id = UnicodeAttribute(null=True)


class OwnerItem(Model):
    """An owner's unfinished jobs, the set their quota counts (pk `owner#<owner>`)."""

    pk = UnicodeAttribute(hash_key=True)
    active = UnicodeSetAttribute(null=True)
    # Refreshed on every new job: an owner idle for a retention period leaves nothing behind.
    expires_at = TTLAttribute(null=True)


class ScanPointItem(Model):
    """Where one key range of the orphan scan stands (pk `orphan-scan#<range>`)."""

    pk = UnicodeAttribute(hash_key=True)
    after = UnicodeAttribute(null=True)
    pass_started = UTCDateTimeAttribute(null=True)


class ContentItem(Model):
    """The last ready job of one owner's bytes (pk `content#<sha256 of owner and the bytes'
    SHA-256>`): what a duplicate upload reuses. Lives as long as that job."""

    pk = UnicodeAttribute(hash_key=True)
    job_id = UnicodeAttribute()
    expires_at = TTLAttribute()


class IdempotencyItem(Model):
    pk = UnicodeAttribute(hash_key=True)
    fingerprint = UnicodeAttribute()
    job_id = UnicodeAttribute()
    expires_at = TTLAttribute()


def job_model(table: DynamoTable) -> type[JobItem]:
    """JobItem bound to the table, with its two indexes."""
    # A fresh index class per binding: PynamoDB keeps an index's model on its Meta class.
    due_index = type("DueIndex", (GlobalSecondaryIndex,), {
        "Meta": type("Meta", (), {"index_name": DUE_INDEX, "projection": AllProjection()}),
        "sweep_key": UnicodeAttribute(hash_key=True),
        "sweep_at": UTCDateTimeAttribute(range_key=True),
    })()

    owner_index = type("OwnerIndex", (GlobalSecondaryIndex,), {
        "Meta": type("Meta", (), {"index_name": OWNER_CREATED_INDEX, "projection": KeysOnlyProjection()}),
        "owner": UnicodeAttribute(hash_key=True),
        "created_at": UTCDateTimeAttribute(range_key=True),
    })()
    return table.model(JobItem, due_index=due_index, owner_created_index=owner_index)


class DynamoJobStore:
    def __init__(self, table: DynamoTable):
        self._model = job_model(table)
        self._idempotency = table.model(IdempotencyItem)
        self._owners = table.model(OwnerItem)
        self._points = table.model(ScanPointItem)
        self._contents = table.model(ContentItem)
        self._connection = table.connect(self._model, self._idempotency, self._owners, self._points,
                                         self._contents)

    # -- mapping: Job fields and item attributes share their names ------------------------
    def _to_item(self, job: Job) -> JobItem:
        values = {f.name: getattr(job, f.name) for f in dataclasses.fields(Job) if f.name not in _SPECIAL}
        return self._model(
            JOB_PREFIX + job.job_id,
            status=job.status.value,
            sweep_key=sweep_key(job.status, job.job_id),
            error_code=None if job.error_code is None else job.error_code.value,
            renditions=job.renditions or None,
            formats=",".join(job.formats) or None,
            sizes=",".join(job.sizes),
            placeholder=None if job.placeholder is None else PlaceholderAttribute(
                blurhash=job.placeholder.blurhash, average_color=job.placeholder.average_color),
            metadata=job_metadata.to_text(job.metadata),
            source=SourceAttribute.of(job.source),
            focus=FocusAttribute.of(job.focus),
            animation_skipped=None if job.animation_skipped is None else job.animation_skipped.value,
            **values,
        )

    @staticmethod
    def _to_job(item: JobItem) -> Job:
        values = {f.name: getattr(item, f.name) for f in dataclasses.fields(Job) if f.name not in _SPECIAL}
        return Job(
            job_id=item.pk[len(JOB_PREFIX):],
            status=JobStatus(item.status),
            error_code=None if item.error_code is None else ErrorCode(item.error_code),
            renditions=item.renditions or {},
            formats=tuple(RenditionFormat(f) for f in (item.formats or "").split(",") if f),
            sizes=ALWAYS if item.sizes is None else tuple(RenditionName(n) for n in item.sizes.split(",")),
            placeholder=None if item.placeholder is None else Placeholder(
                item.placeholder.blurhash, item.placeholder.average_color),
            metadata=job_metadata.from_text(item.metadata),
            source=None if item.source is None else item.source.to_source(),
            focus=None if item.focus is None else item.focus.to_focus(),
            animation_skipped=None if item.animation_skipped is None else AnimationSkipped(item.animation_skipped),
            **values,
        )

    # -- JobStore ------------------------------------------------------------------------
    def create(self, job: Job, quota: int) -> None:
        self._create(job, quota)

    def create_with_key(self, job: Job, record: IdempotencyRecord, now: datetime, quota: int) -> None:
        k = self._idempotency
        key_item = k(IDEMPOTENCY_PREFIX + record.scope, fingerprint=record.fingerprint,
                     job_id=record.job_id, expires_at=record.expires_at)
        self._create(job, quota, key_item, k.pk.does_not_exist() | (k.expires_at <= now))

    def _create(self, job: Job, quota: int, key_item=None, key_free=None) -> None:
        """One transaction: [the key record,] the job, the owner's quota place; any
        precondition failing cancels all of them. A conflict on the owner's item (another
        of the owner's creates or releases in flight) is tried again after a pause."""
        write_id = new_write_id()
        item = self._to_item(job)
        item.write_id = write_id
        o = self._owners
        place = o(OWNER_PREFIX + job.owner)

        def transact():
            with TransactWrite(connection=self._connection) as transaction:
                if key_item is not None:
                    transaction.save(key_item, condition=key_free)
                # ALL_OLD: a refusal carries the stored job, so a re-send that found its own
                # needs no read (a loaded table may leave no time for one).
                transaction.save(item, condition=self._model.pk.does_not_exist(), return_values="ALL_OLD")
                transaction.update(
                    place,
                    actions=[o.active.add({job.job_id}), o.expires_at.set(job.expires_at)],
                    condition=o.active.does_not_exist() | (size(o.active) < quota),
                )

        with dynamo_errors(UNAVAILABLE):
            try:
                # A conflict on the key is a concurrent request with the same key: the caller
                # reads the key again, rather than this call waiting.
                retrying_conflicts(transact, on_key=key_item is not None)
            except TransactWriteError as error:
                reasons = reason_codes(error)
                failed = [i for i, code in enumerate(reasons) if code == "ConditionalCheckFailed"]
                if key_item is not None and reasons[:2] == ["ConditionalCheckFailed"] * 2 \
                        and self._landed(job.job_id, write_id, found_item(error, 1)) is not None:
                    # The key is held by this very call's job: a re-send after a lost answer.
                    # Answered as the create it is, not as a taken key, so that what follows a
                    # create (the push fan-out's first message) follows this one too.
                    return
                if key_item is not None and reasons[:1] in (["ConditionalCheckFailed"], ["TransactionConflict"]):
                    raise IdempotencyKeyTaken() from None
                if not failed:
                    raise  # no condition failed: an outage
                if failed[0] == len(reasons) - 1:
                    raise QuotaFull() from None
                if self._landed(job.job_id, write_id, found_item(error, len(reasons) - 2)) is not None:
                    # botocore re-sent the transaction after a timeout, and the first send had
                    # committed (an emulator ignores the ClientRequestToken that makes DynamoDB
                    # answer it): the job carries this call's write id.
                    return
                raise ConditionFailed() from None

    def active_jobs(self, owner: str) -> set[str]:
        with dynamo_errors(UNAVAILABLE):
            item = find(self._owners, OWNER_PREFIX + owner)
        return set() if item is None else set(item.active or ())

    def release_place(self, owner: str, job_id: str) -> None:
        o = self._owners
        with suppress(ConditionFailed):  # no places at all: nothing to release
            self._write(lambda: o(OWNER_PREFIX + owner).update(
                actions=[o.active.delete({job_id})], condition=o.pk.exists()))

    def get_idempotency(self, scope: str) -> Optional[IdempotencyRecord]:
        with dynamo_errors(UNAVAILABLE):
            item = find(self._idempotency, IDEMPOTENCY_PREFIX + scope)
        if item is None:
            return None
        return IdempotencyRecord(scope=scope, fingerprint=item.fingerprint, job_id=item.job_id,
                                 expires_at=item.expires_at)

    def release_idempotency(self, scope: str, job_id: str) -> None:
        k = self._idempotency
        with suppress(ConditionFailed):  # already gone, or taken over by a newer request
            self._write(lambda: k(IDEMPOTENCY_PREFIX + scope).delete(condition=k.job_id == job_id))

    def same_content(self, owner: str, sha256: str) -> Optional[str]:
        with dynamo_errors(UNAVAILABLE):
            item = find(self._contents, _content_key(owner, sha256))
        return None if item is None else item.job_id

    def note_content(self, owner: str, sha256: str, job_id: str, expires_at: datetime) -> None:
        self._write(lambda: self._contents(_content_key(owner, sha256), job_id=job_id,
                                           expires_at=expires_at).save())

    def get(self, job_id: str) -> Optional[Job]:
        with dynamo_errors(UNAVAILABLE):
            item = find(self._model, JOB_PREFIX + job_id)
        return None if item is None else self._to_job(item)

    def objects_of(self, job_ids: list[str]) -> dict[str, JobObjects]:
        found = {}
        for item in self._batch_get(self._model, [JOB_PREFIX + i for i in job_ids], _OBJECT_FIELDS):
            job_id = item.pk[len(JOB_PREFIX):]
            found[job_id] = JobObjects(
                job_id=job_id, status=JobStatus(item.status), attempt=int(item.attempt),
                original_key=item.original_key,
                result_keys=frozenset(k for r in (item.renditions or {}).values() for k in r.keys))
        return found

    def scan_points(self, names: list[str]) -> dict[str, ScanPoint]:
        saved = {item.pk[len(SCAN_PREFIX):]: ScanPoint(after=item.after, pass_started=item.pass_started)
                 for item in self._batch_get(self._points, [SCAN_PREFIX + n for n in names])}
        return {name: saved.get(name, ScanPoint()) for name in names}

    def save_scan_point(self, name: str, point: ScanPoint) -> None:
        item = self._points(SCAN_PREFIX + name, after=point.after, pass_started=point.pass_started)
        self._write(item.save)

    def _batch_get(self, model: type[Model], pks: list[str], fields: Optional[Sequence[str]] = None) -> list:
        """BatchGetItem, 100 keys a call, strongly consistent; the keys DynamoDB leaves
        unprocessed are asked again with backoff, as AWS advises, while the budget allows."""
        table = model.Meta.table_name
        found = []
        for start in range(0, len(pks), BATCH_GET_KEYS):
            pending = pks[start:start + BATCH_GET_KEYS]
            for retry in range(UNPROCESSED_RETRIES + 1):
                if retry:
                    if not deadline.has_time_for(1):
                        break
                    _sleep(min(1.0, 0.05 * 2 ** retry))
                with dynamo_errors(UNAVAILABLE):
                    answer = self._connection.batch_get_item(
                        table, [{"pk": pk} for pk in pending], consistent_read=True, attributes_to_get=None if fields is None else list(fields))
                found += [model.from_raw_data(raw) for raw in answer.get("Responses", {}).get(table, [])]
                pending = [key["pk"]["S"] for key in answer.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])]
                if not pending:
                    break
            if pending:
                raise TransientError(f"job table left {len(pending)} keys unread")
        return found

    def due(self, status: JobStatus, now: datetime, limit: int, *, shard: int) -> list[Job]:
        m = self._model
        with dynamo_errors(UNAVAILABLE):
            items = m.due_index.query(shard_key(status, shard), m.sweep_at <= now, limit=limit)
            return [self._to_job(item) for item in items]

    def owned(self, owner: str, limit: int, after: Optional[ListCursor] = None,
              created_after: Optional[datetime] = None,
              created_before: Optional[datetime] = None) -> OwnedPage:
        m = self._model
        if created_after is not None and created_before is not None:
            bounds = m.created_at.between(created_after, created_before)
        elif created_after is not None:
            bounds = m.created_at >= created_after
        elif created_before is not None:
            bounds = m.created_at <= created_before
        else:
            bounds = None
        start = None if after is None else {
            "pk": {"S": JOB_PREFIX + after.job_id}, "owner": {"S": owner},
            "created_at": {"S": m.created_at.serialize(after.created_at)}}
        with dynamo_errors(UNAVAILABLE):
            # One key more than asked: whether more follow, without a last empty page.
            keys = [(item.pk, item.created_at) for item in m.owner_created_index.query(
                owner, bounds, scan_index_forward=False, limit=limit + 1, last_evaluated_key=start,
                page_size=limit + 1)]
        more, keys = len(keys) > limit, keys[:limit]
        found = {item.pk: item for item in self._batch_get(m, [pk for pk, _ in keys])}
        jobs = [self._to_job(found[pk]) for pk, _ in keys if pk in found and found[pk].owner == owner]
        last = ListCursor(keys[-1][1], keys[-1][0][len(JOB_PREFIX):]) if keys else None
        return OwnedPage(jobs=jobs, last=last, more=more)

    def move(self, job: Job, from_status: JobStatus) -> None:
        m = self._model
        # The attempt too: a cancel that read attempt n must not land on a re-claim's n + 1
        # (it would write the older attempt back, and the sequence would fall).
        same_attempt = m.attempt == job.attempt
        if job.attempt == 0:
            same_attempt |= m.attempt.does_not_exist()
        self._save(job, (m.status == from_status.value) & same_attempt)

    def claim(self, job_id: str, now: datetime, lease: timedelta, max_attempts: int,
              source: Optional[Source] = None) -> Job:
        m = self._model
        item = m(JOB_PREFIX + job_id)
        lease_end = now + lease
        # Job.claimable, clause by clause (tests/integration/test_job_store.py holds them to it).
        queued = m.status == JobStatus.QUEUED.value  # (1)
        # (2); a missing lease_expires_at compares false: held, as there.
        lease_over = (m.status == JobStatus.PROCESSING.value) & (m.lease_expires_at <= now)
        attempt_left = m.attempt < max_attempts  # (3)
        claimable = (queued | lease_over) & attempt_left
        landed = self._write_once(job_id, lambda write_id: item.update(
            actions=[
                m.status.set(JobStatus.PROCESSING.value),
                m.sweep_key.set(sweep_key(JobStatus.PROCESSING, job_id)),
                m.attempt.add(1),
                m.lease_expires_at.set(lease_end),
                m.sweep_at.set(lease_end),
                m.updated_at.set(now),
                m.write_id.set(write_id),
                *([] if source is None else [m.source.set(SourceAttribute.of(source))]),
            ],
            condition=m.pk.exists() & claimable,  # exists: never an upsert
        ))
        # update() loaded the whole item as it now is; a claim that landed on an earlier send
        # is read back.
        return self._to_job(landed or item)

    def release_lease(self, job_id: str, attempt: int, now: datetime) -> None:
        m = self._model
        item = m(JOB_PREFIX + job_id)
        self._write_once(job_id, lambda write_id: item.update(
            actions=[m.lease_expires_at.set(now), m.sweep_at.set(now), m.updated_at.set(now),
                     m.write_id.set(write_id)],
            condition=self._held_by(attempt),
        ))

    def finish_attempt(self, job: Job, attempt: int) -> None:
        self._save(job, self._held_by(attempt))

    def update_if_unchanged(self, job: Job, seen: Job) -> None:
        m = self._model
        self._save(job, (m.status == seen.status.value) & (m.updated_at == seen.updated_at))

    def _save(self, job: Job, condition) -> None:
        """Write `job` whole on `condition`, stamped with a fresh write id."""
        item = self._to_item(job)

        def save(write_id: str) -> None:
            item.write_id = write_id
            item.save(condition=condition)

        self._write_once(job.job_id, save)

    def _write_once(self, job_id: str, write: Callable[[str], Any]) -> Optional[JobItem]:
        """write(write_id), a conditional write of the job that stores write_id: the job's
        item when an earlier send of it landed, None when it succeeded at once
        (dynamo_table.written_once)."""
        def read() -> Optional[JobItem]:
            with dynamo_errors(UNAVAILABLE):
                return find(self._model, JOB_PREFIX + job_id)

        return written_once(lambda write_id: self._write(lambda: write(write_id)), read)

    def _landed(self, job_id: str, write_id: str, raw: Optional[dict] = None) -> Optional[JobItem]:
        """The job's item if its last write was the one with write_id; read unless the
        refusal brought the item (`raw`, DynamoDB's form)."""
        with dynamo_errors(UNAVAILABLE):
            item = self._model.from_raw_data(raw) if raw else find(self._model, JOB_PREFIX + job_id)
        return item if item is not None and item.write_id == write_id else None

    def delete(self, job_id: str) -> None:
        self._write(lambda: self._model(JOB_PREFIX + job_id).delete())

    def delete_many(self, job_ids: list[str]) -> None:
        def batch():
            # BatchWriteItem, 25 deletes a call; PynamoDB sends what DynamoDB left unprocessed
            # again, and raises once its retries are spent.
            with self._model.batch_write() as writes:
                for job_id in job_ids:
                    writes.delete(self._model(JOB_PREFIX + job_id))

        self._write(batch)

    def _held_by(self, attempt: int):
        m = self._model
        return (m.status == JobStatus.PROCESSING.value) & (m.attempt == attempt)

    @staticmethod
    def _write(call) -> None:
        with dynamo_errors(UNAVAILABLE, conditional=True):
            retrying_conflicts(call)


def _content_key(owner: str, sha256: str) -> str:
    """Hashed with the owner, so the key names no owner and no two owners share one."""
    return CONTENT_PREFIX + hashlib.sha256(f"{owner}\n{sha256}".encode()).hexdigest()


def _sleep(seconds: float) -> None:
    time.sleep(seconds)  # a seam: tests stub the pause between retries


def add_missing_sweep_keys(model: type[JobItem]) -> int:
    """Give every job item written before `sweep_key` (stored shape 1) its key, so that the
    due index holds it: once, when a table of the first release is upgraded
    (infra/upgrade_records.py, docs/deploy.md). A Scan of the whole table, so an operator's
    step and never a function's (the stage policy allows no Scan). Each write is conditional
    on the status the scan read and on the key still missing; returns how many it wrote."""
    written = 0
    with dynamo_errors(UNAVAILABLE):
        for item in model.scan(model.pk.startswith(JOB_PREFIX) & model.sweep_key.does_not_exist(),
                               attributes_to_get=["pk", "status"]):
            job_id = item.pk[len(JOB_PREFIX):]
            try:
                with dynamo_errors(UNAVAILABLE, conditional=True):
                    model(item.pk).update(
                        actions=[model.sweep_key.set(sweep_key(JobStatus(item.status), job_id))],
                        condition=(model.status == item.status) & model.sweep_key.does_not_exist())
            except ConditionFailed:
                continue  # written meanwhile, by a status change that set it
            written += 1
    return written
