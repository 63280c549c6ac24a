"""In-memory stores implementing the ports with the same conditional semantics."""
from __future__ import annotations

import dataclasses
import threading
from datetime import datetime, timedelta
from typing import Optional

from chalicelib.jobs import Job, JobStatus
from chalicelib.ports import ConditionFailed, FileTooLarge, TransientError


class FakeJobStore:
    def __init__(self):
        self.items: dict[str, Job] = {}
        self._lock = threading.Lock()
        self.down = False

    def _check(self):
        if self.down:
            raise TransientError("job table unavailable")

    def create(self, job: Job) -> None:
        with self._lock:
            self._check()
            if job.job_id in self.items:
                raise ConditionFailed()
            self.items[job.job_id] = job

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
            )
            self.items[job_id] = claimed
            return claimed

    def release(self, job: Job, now: datetime) -> None:
        with self._lock:
            self._check()
            current = self.items.get(job.job_id)
            if current is None or current.status is not JobStatus.PROCESSING or current.attempt != job.attempt:
                raise ConditionFailed()
            self.items[job.job_id] = dataclasses.replace(current, lease_expires_at=now, updated_at=now)

    def transition(self, job: Job, from_status: JobStatus, attempt: Optional[int] = None) -> None:
        with self._lock:
            self._check()
            current = self.items.get(job.job_id)
            if current is None or current.status is not from_status:
                raise ConditionFailed()
            if attempt is not None and current.attempt != attempt:
                raise ConditionFailed()
            self.items[job.job_id] = job

    def delete(self, job_id: str) -> None:
        with self._lock:
            self._check()
            self.items.pop(job_id, None)


class FakeObjectStore:
    def __init__(self):
        self.objects: dict[str, tuple[bytes, str]] = {}
        self.down = False

    def put(self, key: str, data: bytes, content_type: str) -> None:
        if self.down:
            raise TransientError("storage unavailable")
        self.objects[key] = (data, content_type)

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

    def presign_get(self, key: str, expires_in: int) -> str:
        return f"https://storage.test/{key}?expires={expires_in}"


class Clock:
    def __init__(self, start: datetime):
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
