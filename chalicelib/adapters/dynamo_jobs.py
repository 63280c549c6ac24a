"""JobStore on DynamoDB (AWS, LocalStack, moto) through PynamoDB.

Every status change is one conditional write naming the status it leaves; worker writes
also name the attempt they hold, a fencing token against stale workers.
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
from pynamodb.exceptions import DoesNotExist, PynamoDBException
from pynamodb.models import Model

from chalicelib.jobs import Job, JobStatus, Rendition
from chalicelib.ports import ConditionFailed, TransientError

JOB_PREFIX = "job#"


class RenditionAttribute(MapAttribute):
    key = UnicodeAttribute()
    width = NumberAttribute()
    height = NumberAttribute()
    content_type = UnicodeAttribute()


class JobItem(Model):
    """Unbound: make_job_model() gives a subclass bound to a table and endpoint."""

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
    # DynamoDB deletes late (up to days): readers compare it with the clock themselves.
    expires_at = TTLAttribute()


def make_job_model(table: str, region: str, host: Optional[str]) -> type[JobItem]:
    meta = type("Meta", (), {
        "table_name": table,
        "region": region,
        "host": host,
        # Fail fast so an API call can answer 503 instead of hanging a client.
        "connect_timeout_seconds": 2,
        "read_timeout_seconds": 5,
        "max_retry_attempts": 2,
    })
    return type("BoundJobItem", (JobItem,), {"Meta": meta})


def _is_condition_failure(error: PynamoDBException) -> bool:
    return getattr(error, "cause_response_code", None) in (
        "ConditionalCheckFailedException", "TransactionCanceledException",
    )


class DynamoJobStore:
    def __init__(self, model: type[JobItem]):
        self._model = model

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
        )

    # -- JobStore ------------------------------------------------------------------------
    def create(self, job: Job) -> None:
        item = self._to_item(job)
        self._write(lambda: item.save(condition=self._model.pk.does_not_exist()))

    def get(self, job_id: str) -> Optional[Job]:
        try:
            return self._to_job(self._model.get(JOB_PREFIX + job_id, consistent_read=True))
        except DoesNotExist:
            return None
        except PynamoDBException as error:
            raise TransientError("job table unavailable") from error

    def claim(self, job_id: str, now: datetime, lease_seconds: int, max_attempts: int) -> Job:
        m = self._model
        item = m(JOB_PREFIX + job_id)
        claimable = (m.status == JobStatus.QUEUED.value) | (
            (m.status == JobStatus.PROCESSING.value) & (m.lease_expires_at <= now)
        )
        self._write(lambda: item.update(
            actions=[
                m.status.set(JobStatus.PROCESSING.value),
                m.attempt.add(1),
                m.lease_expires_at.set(now + timedelta(seconds=lease_seconds)),
                m.updated_at.set(now),
            ],
            condition=m.pk.exists() & claimable & (m.attempt < max_attempts),
        ))
        return self._to_job(item)

    def release(self, job: Job, now: datetime) -> None:
        m = self._model
        item = m(JOB_PREFIX + job.job_id)
        self._write(lambda: item.update(
            actions=[m.lease_expires_at.set(now), m.updated_at.set(now)],
            condition=(m.status == JobStatus.PROCESSING.value) & (m.attempt == job.attempt),
        ))

    def transition(self, job: Job, from_status: JobStatus, attempt: Optional[int] = None) -> None:
        m = self._model
        condition = m.status == from_status.value
        if attempt is not None:
            condition &= m.attempt == attempt
        item = self._to_item(job)
        self._write(lambda: item.save(condition=condition))

    def delete(self, job_id: str) -> None:
        self._write(lambda: self._model(JOB_PREFIX + job_id).delete())

    @staticmethod
    def _write(call) -> None:
        try:
            call()
        except PynamoDBException as error:
            if _is_condition_failure(error):
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
