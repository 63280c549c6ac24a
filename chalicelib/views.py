"""JSON bodies of the job resource, exactly the fields CONTRACT.md lists per status."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Optional

from chalicelib import problems
from chalicelib.jobs import Job, JobStatus
from chalicelib.service import Accepted, Urls


def rfc3339(value: datetime) -> str:
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def job_location(job: Job) -> str:
    return f"/api/v1/image-jobs/{job.job_id}"


def accepted_body(accepted: Accepted) -> dict:
    job = accepted.job
    body = {"job_id": job.job_id, "status": job.status.value, "created_at": rfc3339(job.created_at)}
    if accepted.upload is not None:
        body["upload"] = {
            "method": "POST",
            "url": accepted.upload["url"],
            "fields": accepted.upload["fields"],
            "expires_at": rfc3339(accepted.upload["expires_at"]),
        }
    return body


def job_body(job: Job, urls: Optional[Urls]) -> dict:
    body: dict = {"job_id": job.job_id, "status": job.status.value}
    if job.status is JobStatus.READY and urls is not None:
        assert job.display is not None and job.thumb is not None
        body["image_url"] = urls.display
        body["thumb_url"] = urls.thumb
        body["renditions"] = {
            "display": _rendition(urls.display, job.display),
            "thumb": _rendition(urls.thumb, job.thumb),
        }
        body["urls_expire_at"] = rfc3339(urls.expires_at)
    if job.status is JobStatus.FAILED:
        code = job.error_code or "processing_failed"
        body["error"] = {"code": code, "message": problems.message_of(code)}
    body["created_at"] = rfc3339(job.created_at)
    if job.status.terminal and job.finished_at is not None:
        body["finished_at"] = rfc3339(job.finished_at)
    body["expires_at"] = rfc3339(job.expires_at)
    return body


def _rendition(url: str, r) -> dict:
    return {"url": url, "width": r.width, "height": r.height, "content_type": r.content_type}
