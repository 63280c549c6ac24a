"""JobStore on DynamoDB (AWS, LocalStack, moto) through PynamoDB.

Every status change is one conditional write naming the status it leaves; worker writes
also name the attempt they hold, a fencing token against stale workers. Jobs and
idempotency records share one table (key `pk`), so they can be written in one transaction.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Optional

from pynamodb.attributes import (
    MapAttribute,
    NumberAttribute,
    TTLAttribute,
    UnicodeAttribute,
    UTCDateTimeAttribute,
)
from pynamodb.connection import Connection
from pynamodb.exceptions import DoesNotExist, PynamoDBException, TransactWriteError
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from chalicelib.jobs import Job, JobStatus, Rendition
from chalicelib.ports import ConditionFailed, IdempotencyRecord, KeyTaken, TransientError

JOB_PREFIX = "job#"
IDEMPOTENCY_PREFIX = "idem#"
SWEEP_INDEX = "sweep"
# Fail fast so an API call can answer 503 instead of hanging a client.
_CONNECTION = {"connect_timeout_seconds": 2, "read_timeout_seconds": 5, "max_retry_attempts": 2}


class RenditionAttribute(MapAttribute):
    key = UnicodeAttribute()
    width = NumberAttribute()
    height = NumberAttribute()
    content_type = UnicodeAttribute()


class JobItem(Model):
    """Unbound: bind_models() gives a subclass bound to a table and endpoint."""

    pk = UnicodeAttribute(hash_key=True)
    owner = UnicodeAttribute()
    status = UnicodeAttribute()
    attempt = NumberAttribute(default=0)
    lease_expires_at = UTCDateTimeAttribute(null=True)
    original_key = UnicodeAttribute()
    display = RenditionAttribute(null=True)
    thumb = RenditionAttribute(null=True)
    error_code = UnicodeAttribute(null=True)
    created_at = UTCDateTimeAttribute()
    updated_at = UTCDateTimeAttribute()
    finished_at = UTCDateTimeAttribute(null=True)
    # The sweep index's sort key: when the sweeper should look at this job next.
    sweep_at = UTCDateTimeAttribute(null=True)
    redrives = NumberAttribute(default=0)
    declared_type = UnicodeAttribute(null=True)
    declared_size = NumberAttribute(null=True)
    upload_expires_at = UTCDateTimeAttribute(null=True)
    idempotency_scope = UnicodeAttribute(null=True)
    # DynamoDB deletes late (up to days): readers compare it with the clock themselves.
    expires_at = TTLAttribute()


class IdempotencyItem(Model):
    pk = UnicodeAttribute(hash_key=True)
    fingerprint = UnicodeAttribute()
    job_id = UnicodeAttribute()
    expires_at = TTLAttribute()


def _meta(table: str, region: str, host: Optional[str]) -> type:
    return type("Meta", (), {"table_name": table, "region": region, "host": host, **_CONNECTION})


def make_job_model(table: str, region: str, host: Optional[str]) -> type[JobItem]:
    # A fresh index class per binding: PynamoDB keeps an index's model on its Meta class.
    index = type("SweepIndex", (GlobalSecondaryIndex,), {
        "Meta": type("Meta", (), {"index_name": SWEEP_INDEX, "projection": AllProjection()}),
        "status": UnicodeAttribute(hash_key=True),
        "sweep_at": UTCDateTimeAttribute(range_key=True),
    })
    return type("BoundJobItem", (JobItem,), {"Meta": _meta(table, region, host), "sweep_index": index()})


def make_idempotency_model(table: str, region: str, host: Optional[str]) -> type[IdempotencyItem]:
    return type("BoundIdempotencyItem", (IdempotencyItem,), {"Meta": _meta(table, region, host)})


def _condition_failed(error: PynamoDBException) -> bool:
    return getattr(error, "cause_response_code", None) == "ConditionalCheckFailedException"


class DynamoJobStore:
    def __init__(self, table: str, region: str, host: Optional[str]):
        self._model = make_job_model(table, region, host)
        self._keys = make_idempotency_model(table, region, host)
        self._connection = Connection(region=region, host=host, **_CONNECTION)

    # -- mapping ---------------------------------------------------------------------
    def _to_item(self, job: Job) -> JobItem:
        return self._model(
            JOB_PREFIX + job.job_id,
            owner=job.owner,
            status=job.status.value,
            attempt=job.attempt,
            lease_expires_at=job.lease_expires_at,
            original_key=job.original_key,
            display=_rendition_attr(job.display),
            thumb=_rendition_attr(job.thumb),
            error_code=job.error_code,
            created_at=job.created_at,
            updated_at=job.updated_at,
            finished_at=job.finished_at,
            sweep_at=job.sweep_at,
            redrives=job.redrives,
            declared_type=job.declared_type,
            declared_size=job.declared_size,
            upload_expires_at=job.upload_expires_at,
            idempotency_scope=job.idempotency_scope,
            expires_at=job.expires_at,
        )

    @staticmethod
    def _to_job(item: JobItem) -> Job:
        return Job(
            job_id=item.pk[len(JOB_PREFIX):],
            owner=item.owner,
            status=JobStatus(item.status),
            created_at=item.created_at,
            updated_at=item.updated_at,
            expires_at=item.expires_at,
            original_key=item.original_key,
            attempt=int(item.attempt or 0),
            lease_expires_at=item.lease_expires_at,
            display=_rendition(item.display),
            thumb=_rendition(item.thumb),
            error_code=item.error_code,
            finished_at=item.finished_at,
            sweep_at=item.sweep_at,
            redrives=int(item.redrives or 0),
            declared_type=item.declared_type,
            declared_size=None if item.declared_size is None else int(item.declared_size),
            upload_expires_at=item.upload_expires_at,
            idempotency_scope=item.idempotency_scope,
        )

    # -- JobStore ------------------------------------------------------------------------
    def create(self, job: Job, idempotency: Optional[IdempotencyRecord] = None,
               now: Optional[datetime] = None) -> None:
        item = self._to_item(job)
        new_job = self._model.pk.does_not_exist()
        if idempotency is None:
            self._write(lambda: item.save(condition=new_job))
            return
        k = self._keys
        record = k(IDEMPOTENCY_PREFIX + idempotency.scope, fingerprint=idempotency.fingerprint,
                   job_id=idempotency.job_id, expires_at=idempotency.expires_at)
        # A record past its 24 h may be taken over even if TTL has not deleted it yet.
        free = k.pk.does_not_exist() | (k.expires_at <= now)
        try:
            with TransactWrite(connection=self._connection) as transaction:
                transaction.save(record, condition=free)
                transaction.save(item, condition=new_job)
        except TransactWriteError as error:
            reasons = [getattr(r, "code", None) for r in (error.cancellation_reasons or [])]
            if reasons[:1] == ["ConditionalCheckFailed"]:
                raise KeyTaken() from None
            if "ConditionalCheckFailed" in reasons:
                raise ConditionFailed() from None
            raise TransientError("job table unavailable") from error
        except PynamoDBException as error:
            raise TransientError("job table unavailable") from error

    def get_idempotency(self, scope: str) -> Optional[IdempotencyRecord]:
        try:
            item = self._keys.get(IDEMPOTENCY_PREFIX + scope, consistent_read=True)
        except DoesNotExist:
            return None
        except PynamoDBException as error:
            raise TransientError("job table unavailable") from error
        return IdempotencyRecord(scope=scope, fingerprint=item.fingerprint, job_id=item.job_id,
                                 expires_at=item.expires_at)

    def release_idempotency(self, scope: str, job_id: str) -> None:
        k = self._keys
        try:
            self._write(lambda: k(IDEMPOTENCY_PREFIX + scope).delete(condition=k.job_id == job_id))
        except ConditionFailed:
            pass  # already gone, or taken over by a newer request

    def get(self, job_id: str) -> Optional[Job]:
        try:
            return self._to_job(self._model.get(JOB_PREFIX + job_id, consistent_read=True))
        except DoesNotExist:
            return None
        except PynamoDBException as error:
            raise TransientError("job table unavailable") from error

    def due(self, status: JobStatus, now: datetime, limit: int) -> list[Job]:
        m = self._model
        try:
            items = m.sweep_index.query(status.value, m.sweep_at <= now, limit=limit)
            return [self._to_job(item) for item in items]
        except PynamoDBException as error:
            raise TransientError("job table unavailable") from error

    def claim(self, job_id: str, now: datetime, lease_seconds: int, max_attempts: int) -> Job:
        m = self._model
        item = m(JOB_PREFIX + job_id)
        lease_end = now + timedelta(seconds=lease_seconds)
        claimable = (m.status == JobStatus.QUEUED.value) | (
            (m.status == JobStatus.PROCESSING.value) & (m.lease_expires_at <= now)
        )
        self._write(lambda: item.update(
            actions=[
                m.status.set(JobStatus.PROCESSING.value),
                m.attempt.add(1),
                m.lease_expires_at.set(lease_end),
                m.sweep_at.set(lease_end),
                m.updated_at.set(now),
            ],
            condition=m.pk.exists() & claimable & (m.attempt < max_attempts),
        ))
        return self._to_job(item)

    def release(self, job: Job, now: datetime) -> None:
        m = self._model
        item = m(JOB_PREFIX + job.job_id)
        self._write(lambda: item.update(
            actions=[m.lease_expires_at.set(now), m.sweep_at.set(now), m.updated_at.set(now)],
            condition=(m.status == JobStatus.PROCESSING.value) & (m.attempt == job.attempt),
        ))

    def transition(self, job: Job, from_status: JobStatus, attempt: Optional[int] = None,
                   updated_at: Optional[datetime] = None) -> None:
        m = self._model
        condition = m.status == from_status.value
        if attempt is not None:
            condition &= m.attempt == attempt
        if updated_at is not None:
            condition &= m.updated_at == updated_at
        item = self._to_item(job)
        self._write(lambda: item.save(condition=condition))

    def delete(self, job_id: str) -> None:
        self._write(lambda: self._model(JOB_PREFIX + job_id).delete())

    @staticmethod
    def _write(call) -> None:
        try:
            call()
        except PynamoDBException as error:
            if _condition_failed(error):
                raise ConditionFailed() from error
            raise TransientError("job table unavailable") from error


def _rendition_attr(r: Optional[Rendition]) -> Optional[RenditionAttribute]:
    if r is None:
        return None
    return RenditionAttribute(key=r.key, width=r.width, height=r.height, content_type=r.content_type)


def _rendition(a: Optional[RenditionAttribute]) -> Optional[Rendition]:
    if a is None:
        return None
    return Rendition(key=a.key, width=int(a.width), height=int(a.height), content_type=a.content_type)
