"""JSON bodies of the job resource, exactly the fields the contract (openapi.yaml) lists per status."""
from __future__ import annotations

from typing import Optional

from chalicelib.domain.delivery import cache_key
from chalicelib.domain.jobs import Job, JobStatus
from chalicelib.domain.renditions import RenditionName
from chalicelib.domain.source import Source
from chalicelib.domain.vocabulary import PUBLIC_PREFIX, ErrorCode, UploadMethod, rfc3339
from chalicelib.http import auth, prefer, problems
from chalicelib.domain.webhooks import Attempt, Webhook
from chalicelib.usecases.results import Accepted, Shown, PartUpload, Upload, UploadForm, UploadPut, Urls


def job_location(job: Job) -> str:
    return f"{PUBLIC_PREFIX}/image-jobs/{job.job_id}"


def accepted_body(accepted: Accepted) -> dict:
    job = accepted.job
    body = {"job_id": job.job_id, "status": job.status.value, "created_at": rfc3339(job.created_at)}
    if accepted.upload is not None:
        body["upload"] = upload_body(accepted.upload)
    return body


def upload_body(upload: Upload) -> dict:
    """How the client sends its file: the `upload` of POST /uploads, and GET .../upload."""
    if isinstance(upload, UploadForm):
        return {"method": UploadMethod.POST.value, "url": upload.url, "fields": upload.fields,
                "expires_at": rfc3339(upload.expires_at)}
    if isinstance(upload, UploadPut):
        return {"method": UploadMethod.PUT.value, "url": upload.url, "headers": upload.headers,
                "expires_at": rfc3339(upload.expires_at)}
    return {"method": UploadMethod.MULTIPART.value, "part_size": upload.part_size,
            "parts": [_part(p) for p in upload.parts], "expires_at": rfc3339(upload.expires_at)}


def _part(part: PartUpload) -> dict:
    if part.url is None:
        return {"part_number": part.number, "size": part.size, "stored": True, "etag": part.etag}
    return {"part_number": part.number, "size": part.size, "stored": False, "url": part.url}


def job_body(job: Job, urls: Optional[Urls], with_owner: bool = False) -> dict:
    """`with_owner`: for the service principal, which reads every owner's jobs."""
    body: dict = {"job_id": job.job_id, "status": job.status.value}
    if with_owner:
        body["owner"] = job.owner
    if job.status is JobStatus.READY and urls is not None:
        # image_url and thumb_url came before the map, and stay for the clients that read them.
        body["image_url"] = urls.by_name[RenditionName.DISPLAY]
        body["thumb_url"] = urls.by_name[RenditionName.THUMB]
        body["renditions"] = {str(name): _rendition(name, r, urls) for name, r in job.renditions.items()}
        body["urls_expire_at"] = rfc3339(urls.expires_at)
        if job.placeholder is not None:  # every job made ready since placeholders exist
            body["placeholder"] = {"blurhash": job.placeholder.blurhash,
                                   "average_color": job.placeholder.average_color}
        if job.phash is not None:  # every job made ready since phash exists
            body["phash"] = job.phash
        if job.duplicate_of is not None:  # its renditions are copies of that job's
            body["duplicate_of"] = job.duplicate_of
        if job.focus is not None:  # every job made ready since the focus exists
            body["focus"] = {"x": job.focus.x, "y": job.focus.y, "source": job.focus.source.value}
        if job.animation_skipped is not None:  # an animated source whose renditions are stills only
            body["animation_skipped"] = {"code": job.animation_skipped.value,
                                         "message": job.animation_skipped.message}
    if job.status is JobStatus.FAILED:
        code = job.error_code or ErrorCode.PROCESSING_FAILED
        body["error"] = {"code": code.value, "message": problems.message_of(code)}
    if job.source is not None:  # once the original was read (and on no job from before)
        body["source"] = source_body(job.source)
    if job.metadata:  # as the upload gave it; jobs without (and older ones) have none
        body["metadata"] = dict(job.metadata)
    body["created_at"] = rfc3339(job.created_at)
    if job.status.terminal and job.finished_at is not None:
        body["finished_at"] = rfc3339(job.finished_at)
    body["expires_at"] = rfc3339(job.expires_at)
    return body


def source_body(source: Source) -> dict:
    body = {"width": source.width, "height": source.height, "format": source.format,
            "bytes": source.bytes, "captured_at": source.captured_at,
            "color_space": source.color_space.value, "has_alpha": source.has_alpha}
    if source.frames is not None:  # read since animations (a job from before has no count)
        body.update(animated=source.animated, frames=source.frames, duration_ms=source.duration_ms)
    return body


def push_body(job: Job, urls: Optional[Urls]) -> dict:
    """A push message: the job as GET shows it, with the ETag GET sends and its sequence
    (Job.sequence), by which a client drops a state older than one it has."""
    return {"type": "job", "etag": prefer.etag(job), "sequence": job.sequence, "job": job_body(job, urls)}


def push_discovery_body(url: str) -> dict:
    """Where to connect for push, and the subprotocols to offer; url null: no push here."""
    return {"url": url or None, "protocols": [auth.PUSH_PROTOCOL, auth.BEARER_PROTOCOL + "<token>"]}


def _rendition(name: RenditionName, r, urls: Urls) -> dict:
    """The JPEG's url stays `url`; each extra format is a variant, keyed by its media type.
    Each names its bytes by cache_key, which an app's image cache keys by instead of the URL."""
    variants = {fmt.content_type: {"url": urls.variants[name, fmt], "cache_key": cache_key(v.key),
                                   "bytes": v.bytes, "width": r.width, "height": r.height}
                for fmt, v in r.variants.items()}
    body = {"url": urls.by_name[name], "cache_key": cache_key(r.key), "width": r.width, "height": r.height,
            "content_type": r.content_type, "variants": variants}
    if r.animation is not None:  # an animated source's; its still (the JPEG) is its first frame
        a = r.animation
        body["animation"] = {"url": urls.animations[name], "cache_key": cache_key(a.key),
                             "content_type": a.content_type, "width": a.width, "height": a.height,
                             "frames": a.frames, "duration_ms": a.duration_ms, "bytes": a.bytes}
    return body


def webhook_body(webhook: Optional[Webhook], show_secret: bool = False) -> dict:
    """The owner's webhook; `secret` only right after it was made (created or rotated)."""
    if webhook is None:
        return {"url": None}
    body = {"url": webhook.url}
    if show_secret:
        body["secret"] = webhook.secret
    if webhook.events:  # the service webhook's: the statuses it is sent
        body["events"] = [s.value for s in webhook.events]
    body["created_at"] = rfc3339(webhook.created_at)
    return body


def webhook_shown_body(shown: Shown) -> dict:
    """GET /webhook: the webhook, its breaker and its last attempts, newest first
    (`deliveries` null when the log could not be read)."""
    body = webhook_body(shown.webhook)
    if shown.webhook is None:
        return body
    breaker = shown.webhook.breaker
    body["breaker"] = ({"state": "open", "until": rfc3339(breaker.failing_until)} if breaker.is_open(shown.at)
                       else {"state": "closed"})
    body["deliveries"] = None if shown.deliveries is None else [attempt_body(a) for a in shown.deliveries]
    return body


def attempt_body(attempt: Attempt) -> dict:
    """One delivery attempt: the receiver's status_code, or the reason it gave none."""
    body: dict = {"at": rfc3339(attempt.at), "webhook_id": attempt.webhook_id, "event": attempt.event}
    if attempt.job_id is not None:
        body["job_id"] = attempt.job_id
    body["attempt"] = attempt.attempt
    body["outcome"] = attempt.outcome
    if attempt.status_code is not None:
        body["status_code"] = attempt.status_code
    else:
        body["reason"] = attempt.reason
    body["ms"] = attempt.ms
    body["breaker"] = attempt.breaker
    if attempt.next_attempt_at is not None:
        body["next_attempt_at"] = rfc3339(attempt.next_attempt_at)
    return body
