"""In-memory stores implementing the ports with the same conditional semantics."""
from __future__ import annotations

import dataclasses
import threading
from datetime import datetime, timedelta
from typing import Optional

from chalicelib.jobs import Job, JobStatus
from chalicelib.ports import ConditionFailed, FileTooLarge, IdempotencyRecord, KeyTaken, TransientError


class FakeJobStore:
    def __init__(self):
        self.items: dict[str, Job] = {}
        self.keys: dict[str, IdempotencyRecord] = {}
        self._lock = threading.Lock()
        self.down = False

    def _check(self):
        if self.down:
            raise TransientError("job table unavailable")

    def create(self, job: Job, idempotency: Optional[IdempotencyRecord] = None,
               now: Optional[datetime] = None) -> None:
        with self._lock:
            self._check()
            if idempotency is not None:
                held = self.keys.get(idempotency.scope)
                if held is not None and now < held.expires_at:
                    raise KeyTaken()
            if job.job_id in self.items:
                raise ConditionFailed()
            if idempotency is not None:
                self.keys[idempotency.scope] = idempotency
            self.items[job.job_id] = job

    def get_idempotency(self, scope: str) -> Optional[IdempotencyRecord]:
        self._check()
        return self.keys.get(scope)

    def release_idempotency(self, scope: str, job_id: str) -> None:
        with self._lock:
            self._check()
            if scope in self.keys and self.keys[scope].job_id == job_id:
                del self.keys[scope]

    def due(self, status: JobStatus, now: datetime, limit: int) -> list[Job]:
        self._check()
        found = [j for j in self.items.values()
                 if j.status is status and j.sweep_at is not None and j.sweep_at <= now]
        return sorted(found, key=lambda j: j.sweep_at)[:limit]

    def get(self, job_id: str) -> Optional[Job]:
        self._check()
        return self.items.get(job_id)

    def claim(self, job_id: str, now: datetime, lease_seconds: int, max_attempts: int) -> Job:
        with self._lock:
            self._check()
            job = self.items.get(job_id)
            claimable = job is not None and (
                job.status is JobStatus.QUEUED
                or (job.status is JobStatus.PROCESSING and job.lease_expires_at is not None
                    and job.lease_expires_at <= now)
            )
            if not claimable or job.attempt >= max_attempts:
                raise ConditionFailed()
            claimed = dataclasses.replace(
                job, status=JobStatus.PROCESSING, attempt=job.attempt + 1,
                lease_expires_at=now + timedelta(seconds=lease_seconds), updated_at=now,
                sweep_at=now + timedelta(seconds=lease_seconds),
            )
            self.items[job_id] = claimed
            return claimed

    def release(self, job: Job, now: datetime) -> None:
        with self._lock:
            self._check()
            current = self.items.get(job.job_id)
            if current is None or current.status is not JobStatus.PROCESSING or current.attempt != job.attempt:
                raise ConditionFailed()
            self.items[job.job_id] = dataclasses.replace(
                current, lease_expires_at=now, sweep_at=now, updated_at=now)

    def transition(self, job: Job, from_status: JobStatus, attempt: Optional[int] = None,
                   updated_at: Optional[datetime] = None) -> None:
        with self._lock:
            self._check()
            current = self.items.get(job.job_id)
            if current is None or current.status is not from_status:
                raise ConditionFailed()
            if attempt is not None and current.attempt != attempt:
                raise ConditionFailed()
            if updated_at is not None and current.updated_at != updated_at:
                raise ConditionFailed()
            self.items[job.job_id] = job

    def delete(self, job_id: str) -> None:
        with self._lock:
            self._check()
            self.items.pop(job_id, None)


class FakeObjectStore:
    def __init__(self, clock=None):
        self.objects: dict[str, tuple[bytes, str]] = {}
        self.modified: dict[str, datetime] = {}
        self.clock = clock
        self.down = False

    def put(self, key: str, data: bytes, content_type: str) -> None:
        if self.down:
            raise TransientError("storage unavailable")
        self.objects[key] = (data, content_type)
        if self.clock is not None:
            self.modified[key] = self.clock()

    def get(self, key: str, max_bytes: int) -> bytes:
        if self.down:
            raise TransientError("storage unavailable")
        data, _ = self.objects[key]
        if len(data) > max_bytes:
            raise FileTooLarge()
        return data

    def delete(self, key: str) -> None:
        if self.down:
            raise TransientError("storage unavailable")
        self.objects.pop(key, None)
        self.modified.pop(key, None)

    def presign_get(self, key: str, expires_in: int) -> str:
        return f"https://storage.test/{key}?expires={expires_in}"

    def presign_post(self, key: str, content_type: str, max_size: int, expires_in: int) -> dict:
        return {"url": "https://storage.test/bucket", "fields": {
            "key": key, "Content-Type": content_type, "policy": f"1-{max_size}-{expires_in}"}}

    def list_keys(self, prefix: str, older_than: datetime):
        if self.down:
            raise TransientError("storage unavailable")
        for key in sorted(self.objects):  # S3 lists keys in order
            if key.startswith(prefix) and self.modified.get(key, older_than) < older_than:
                yield key


class FakePublisher:
    def __init__(self):
        self.sent: list[tuple[str, str, int]] = []

    def publish_object_created(self, bucket: str, key: str, size: int) -> None:
        self.sent.append((bucket, key, size))


class Clock:
    def __init__(self, start: datetime):
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
