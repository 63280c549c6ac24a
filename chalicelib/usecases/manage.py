"""An owner's jobs: read one (with fresh URLs), cancel it, delete it."""
from __future__ import annotations

from datetime import timedelta
from typing import Optional

from chalicelib.domain.errors import ConditionFailed, JobFinished, TransientError
from chalicelib.domain.jobs import Job, JobStatus
from chalicelib.runtime.logs import get_logger
from chalicelib.runtime.metrics import Metric
from chalicelib.usecases import lifecycle
from chalicelib.usecases.context import Context
from chalicelib.usecases.results import Urls

log = get_logger("manage")


class ManageJobs:
    def __init__(self, ctx: Context):
        self._ctx = ctx

    def get_job(self, owner: str, job_id: str) -> Job:
        return lifecycle.owned(self._ctx, owner, job_id, live=True)

    def get_any_job(self, job_id: str) -> Job:
        """As get_job, for the service principal: any owner's job."""
        return lifecycle.owned(self._ctx, None, job_id, live=True)

    def delete_any(self, job_id: str) -> None:
        """As delete, for the service principal: any owner's job."""
        self.delete(lifecycle.owned(self._ctx, None, job_id).owner, job_id)

    def urls(self, job: Job) -> Optional[Urls]:
        """Presigned from the stored keys (a stored URL would expire while the job stays
        ready), at the start of the read's window: the same URLs on every read in it. None
        expire after the job (UrlWindow.lifetime)."""
        if job.status is not JobStatus.READY or not job.renditions:
            return None
        ctx = self._ctx
        signed_at, ttl = ctx.url_window.lifetime(ctx.clock(), job.expires_at)

        def sign(key: str) -> str:
            return ctx.objects.presign_get(key, ttl, signed_at)

        return Urls(
            by_name={name: sign(r.key) for name, r in job.renditions.items()},
            expires_at=signed_at + timedelta(seconds=ttl),
            variants={(name, fmt): sign(v.key) for name, r in job.renditions.items() for fmt, v in r.variants.items()},
            animations={name: sign(r.animation.key) for name, r in job.renditions.items() if r.animation is not None},
        )

    def cancel(self, owner: str, job_id: str) -> Job:
        ctx = self._ctx
        for _ in range(5):  # each lost race means the job moved on: look again
            job = self.get_job(owner, job_id)
            if job.status is JobStatus.CANCELLED:
                return job
            if job.status.terminal:
                raise JobFinished("The job has already finished")
            cancelled = job.cancelled(ctx.clock(), ctx.retention)
            try:
                ctx.jobs.move(cancelled, job.status)
            except ConditionFailed:
                continue
            # A worker that wrote renditions before it noticed also removes them; this
            # covers one that died in between.
            lifecycle.call_best_effort(lifecycle.delete_renditions, ctx, cancelled)
            log.info("job_cancelled", job_id=job_id, was=job.status.value)
            lifecycle.conclude(ctx, cancelled)
            return cancelled
        raise TransientError("the job kept changing")

    def delete(self, owner: str, job_id: str) -> None:
        ctx = self._ctx
        job = lifecycle.owned(self._ctx, owner, job_id)
        if not job.status.terminal:
            # Stop a worker first, so it cannot write renditions after the objects are gone.
            try:
                ctx.jobs.move(job.cancelled(ctx.clock(), ctx.retention), job.status)
            except ConditionFailed:
                job = lifecycle.owned(self._ctx, owner, job_id)
        lifecycle.remove(ctx, job)
        log.info("job_deleted", job_id=job_id)
        if job.status is JobStatus.READY:  # the only status whose URLs were ever handed out
            self._invalidate(job)

    def _invalidate(self, job: Job) -> None:
        """Ask the CDN to drop the job's renditions, which it would otherwise serve to the
        URLs handed out before the DELETE until they expire. After the objects are gone, so
        that a request meanwhile finds none to cache again. Best effort, and never the
        DELETE's answer: the call waits at most INVALIDATION_TIMEOUT_SECONDS; a CDN that is
        slow or refuses leaves those URLs serving until their urls_expire_at, as without it."""
        ctx = self._ctx
        if ctx.edge_cache is None:
            return
        try:
            ctx.edge_cache.invalidate(ctx.object_keys.job_renditions(job.job_id))
        except TransientError as error:
            log.warning("edge_invalidation_failed", job_id=job.job_id, reason=str(error))
            ctx.metrics.emit({Metric.EDGE_INVALIDATIONS_FAILED: 1})
            return
        log.info("edge_invalidated", job_id=job.job_id)
