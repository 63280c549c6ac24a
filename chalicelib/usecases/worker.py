"""The worker: one storage notification in (process_storage_message, the entry of every
consumer), a job made ready (or failed) out for each object-created event in it.

Where a job becomes ready: Worker._process. Every write it makes is fenced by its attempt
number (JobStore.claim / finish_attempt), so a duplicate delivery, a second worker or a
late cancel can never move a job backwards or produce a second result.
"""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import time

from chalicelib.config import MIB
from chalicelib.domain.errors import (
    ConditionFailed,
    DomainError,
    FileTooLarge,
    ImageTooComplex,
    JobBusy,
    PoisonMessage,
    TransientError,
)
from chalicelib.domain import sniff
from chalicelib.domain.delivery import rendition_cache_control
from chalicelib.domain.events import ObjectCreated, parse_message
from chalicelib.domain.jobs import Animation, Job, JobStatus, Rendition, Variant
from chalicelib.domain.renditions import AnimationSkipped, RenditionSpec, animation_skipped
from chalicelib.domain.source import Source
from chalicelib.domain.vocabulary import ErrorCode, Outcome, UploadMethod
from chalicelib.imaging import animate, render
from chalicelib.imaging.sandbox import run_limited, start_early
from chalicelib.runtime import deadline
from chalicelib.runtime.logs import get_logger
from chalicelib.runtime.metrics import Metric
from chalicelib.usecases import announce, duplicates, lifecycle
from chalicelib.usecases.context import Context

log = get_logger("worker")
# Seconds kept back from the deadline for storing the renditions and finishing the job.
_TIME_TO_FINISH = 5.0


class Worker:
    def __init__(self, ctx: Context):
        ctx.settings.check_decode_memory()
        self._ctx = ctx
        if ctx.settings.decode_cpu_seconds:
            # Built on the first event (Lambda's cold start): the decoding child's interpreter
            # loads while that event's original downloads and its job is claimed.
            start_early()

    def process_storage_message(self, body: str | bytes, seconds: float | None = None) -> list[Outcome]:
        """The one entry for storage notifications, whatever carried them: every consumer
        calls it with the message's body as it came. The consumers: Lambda's SQS handler
        (app.handle_object_created), which the local SQS worker (local/sqs_worker.py) runs as
        Lambda would, and the AMQP consumer (local/amqp_worker.py), fed by MinIO or by the
        local bridge (local/bridge.py); local/__main__.py wires them.

        Parses the body (chalicelib/domain/events.py) and handles each object-created event in
        it, within the invocation's time: `seconds`, by default the worker function's timeout.
        Raises PoisonMessage for a message no retry can fix, TransientError (or anything else)
        when the message should come back later; each consumer says what that means on its
        transport.
        """
        s = self._ctx.settings
        budget = s.worker_timeout_seconds if seconds is None else seconds
        with deadline.invocation(budget, deadline.SdkLimits.for_settings(s)):
            return [self.handle_object_created(event) for event in parse_message(body)]

    def handle_object_created(self, event: ObjectCreated) -> Outcome:
        """Process one object-created event, within the invocation's time budget if it runs
        in one (chalicelib/runtime/deadline.py): the time the worker function has before it is stopped.

        Returns normally when nothing is left to do for this event (done, duplicate, not
        ours); raises TransientError when the same event should be delivered again, and
        PoisonMessage when no delivery of it can ever make sense.
        """
        ctx = self._ctx
        if event.bucket != ctx.settings.bucket:
            raise PoisonMessage("event for a bucket this service does not own")
        if not ctx.object_keys.is_original(event.key):
            log.warning("event_ignored", reason="not_an_original")
            return Outcome.IGNORED
        job_id = ctx.object_keys.job_id_of(event.key)
        started, received = time.monotonic(), ctx.clock()
        # The original first, then the claim: the claim (a conditional write) is then the
        # one check that the job is still to be done, made just before the resize, so a job
        # cancelled or deleted during the download is never resized, with no read to ask.
        original = self._fetch(ctx.object_keys.original(job_id))
        # From the header (no decode, a millisecond): every route's job gets its facts here,
        # and a job that then fails on its pixels still has them.
        source = render.facts_of(original) if isinstance(original, bytes) else None
        job = self._claim(job_id, source)
        if isinstance(job, Outcome):
            return job
        job = _with_source(job, source)
        announce.job_moved(ctx, job)
        timings = {}
        if job.attempt == 1:
            timings[Metric.QUEUE_WAIT] = (received - job.created_at).total_seconds() * 1000
        outcome = None
        try:
            outcome = self._process(job, original)
            return outcome
        finally:  # one metric line for both
            if outcome in (Outcome.READY, Outcome.FAILED):
                timings[Metric.PROCESSING_TIME] = (time.monotonic() - started) * 1000
            ctx.metrics.emit(timings)

    def _fetch(self, key: str) -> bytes | Exception:
        """The original's bytes, or the error reading them gave, raised once the job is
        claimed, where it counts as before: missing or refused, the job fails; transient,
        the attempt is spent and its lease given back (so attempts still bound an outage).
        Nothing larger than any upload may be is read; the job's own limit is checked once
        the job is known."""
        s = self._ctx.settings
        try:
            return self._ctx.objects.get(key, max(s.max_upload_bytes, s.max_direct_upload_bytes))
        except Exception as error:  # noqa: BLE001 - raised again after the claim
            return error

    def _claim(self, job_id: str, source: Source | None) -> Job | Outcome:
        """The claimed job, or what became of the event. The claim is tried before any read:
        nearly every event finds its job queued, so the job is read only when it loses."""
        ctx = self._ctx
        try:
            return ctx.jobs.claim(job_id, ctx.clock(), ctx.lease, ctx.settings.max_attempts, source)
        except ConditionFailed:
            pass
        current = ctx.jobs.get(job_id)
        if current is not None and current.status is JobStatus.AWAITING_UPLOAD:
            # A direct upload's bytes arrived: queue it, with their facts.
            current = lifecycle.mark_arrived(ctx, _with_source(current, source))
            if current.status is JobStatus.QUEUED:
                try:
                    return ctx.jobs.claim(job_id, ctx.clock(), ctx.lease, ctx.settings.max_attempts, source)
                except ConditionFailed:
                    current = ctx.jobs.get(job_id)
        if current is None:
            log.warning("event_ignored", reason="no_job", job_id=job_id)
            return Outcome.IGNORED
        if current.status.terminal or current.status is JobStatus.AWAITING_UPLOAD:
            log.info("event_duplicate", job_id=job_id, status=current.status.value)
            return Outcome.DUPLICATE
        return self._unclaimable(_with_source(current, source))

    def _unclaimable(self, current: Job) -> Outcome:
        """A queued or processing job whose claim lost, read by the claim rule (Job.claimable):
        leased by another worker, or with an attempt left (the event comes back later); else
        out of attempts (it ends failed)."""
        ctx, s = self._ctx, self._ctx.settings
        now = ctx.clock()
        if current.lease_active(now):
            remaining = (current.lease_expires_at - now).total_seconds()
            raise JobBusy(f"job {current.job_id} is leased by another worker", retry_in=remaining)
        if current.attempt_left(s.max_attempts):
            raise JobBusy(f"job {current.job_id} could not be claimed")
        log.warning("attempts_exhausted", job_id=current.job_id, attempt=current.attempt)
        failed = lifecycle.fail(ctx, current, ErrorCode.PROCESSING_FAILED,
                                lambda f: ctx.jobs.update_if_unchanged(f, seen=current))
        return Outcome.FAILED if failed else Outcome.LOST

    def _process(self, job: Job, original: bytes | Exception) -> Outcome:
        ctx = self._ctx
        log.info("job_claimed", job_id=job.job_id, attempt=job.attempt)
        try:
            if isinstance(original, Exception):
                raise original
            # The declared size of a direct upload: an emulator may not enforce the POST policy.
            limit = job.declared_size if job.declared_size is not None else ctx.settings.max_upload_bytes
            if len(original) > limit:
                raise FileTooLarge(f"The file is larger than {limit} bytes")
            mismatch = _declared_mismatch(job, original)
            if mismatch is not None:
                log.warning("upload_not_as_declared", job_id=job.job_id, code=mismatch.value)
                return self._fail(job, mismatch)
            content = duplicates.content_of(ctx, original, job.focus)
            done = self._reused(job, content)
            if done is None:
                # No check after the resize: the finishing write is conditional on this attempt,
                # so a job cancelled, deleted or taken over meanwhile keeps none of it.
                rendered = self._renditions(original, job)
                animations, skipped = self._animations(original, job, rendered.focus)
                stored = {name: self._store(job, out, animations.get(name))
                          for name, out in rendered.renditions.items()}
                done = job.ready(ctx.clock(), stored, ctx.retention, rendered.placeholder, rendered.phash,
                                 focus=rendered.focus, animation_skipped=skipped)
        except KeyError:
            return self._fail(job, ErrorCode.UPLOAD_MISSING)
        except DomainError as error:  # permanent: the bytes are what they are
            return self._fail(job, error.code)
        except Exception:
            # Transient or unexpected: give the lease back so a redelivery can try again;
            # the attempt count bounds how often.
            log.exception("job_attempt_failed", job_id=job.job_id, attempt=job.attempt)
            with deadline.compensating():
                lifecycle.call_best_effort(lifecycle.delete_attempt_renditions, ctx, job, job.attempt)
                lifecycle.call_best_effort(ctx.jobs.release_lease, job.job_id, job.attempt, ctx.clock())
            raise
        try:
            ctx.jobs.finish_attempt(done, job.attempt)
        except ConditionFailed:
            if not self._was_stored(done):
                # This attempt lost (cancelled, deleted, or a newer attempt): its renditions
                # are its own, so removing them can never touch the winner's.
                lifecycle.call_best_effort(lifecycle.delete_attempt_renditions, ctx, job, job.attempt)
                log.warning("job_finish_lost", job_id=job.job_id, attempt=job.attempt)
                return Outcome.LOST
        largest = max(done.renditions.values(), key=lambda r: r.width * r.height)
        log.info("job_ready", job_id=job.job_id, attempt=job.attempt,
                 width=largest.width, height=largest.height, duplicate_of=done.duplicate_of)
        duplicates.note(ctx, done, content)
        lifecycle.conclude(ctx, done)
        # Earlier attempts of this job are over (their leases ended before this claim); what
        # one left behind goes now, and the orphan scan covers a crash before this line.
        for attempt in range(1, job.attempt):
            lifecycle.call_best_effort(lifecycle.delete_attempt_renditions, ctx, job, attempt)
        return Outcome.READY

    def _reused(self, job: Job, content: str) -> Job | None:
        """The job made ready from copies of the owner's earlier job of the same bytes
        (chalicelib/usecases/duplicates.py), or None when there is none to reuse."""
        ctx = self._ctx
        twin = duplicates.twin_of(ctx, job, content)
        if twin is None:
            return None
        try:
            copied = duplicates.copy_renditions(ctx, job, twin)
        except KeyError:  # the twin was deleted meanwhile: this job is made afresh
            log.info("duplicate_gone", job_id=job.job_id, duplicate_of=twin.job_id)
            lifecycle.call_best_effort(lifecycle.delete_attempt_renditions, ctx, job, job.attempt)
            return None
        log.info("job_reused", job_id=job.job_id, duplicate_of=twin.job_id)
        return job.ready(ctx.clock(), copied, ctx.retention, twin.placeholder, twin.phash,
                         duplicate_of=twin.job_id, focus=twin.focus, animation_skipped=twin.animation_skipped)

    def _was_stored(self, done: Job) -> bool:
        """Whether our finishing write is in the table after all: the SDK retried it after a
        lost answer, and the retry failed on the write itself. Only this attempt writes a
        result with its own attempt number."""
        current = self._ctx.jobs.get(done.job_id)
        return (current is not None and current.status is done.status
                and current.attempt == done.attempt)

    def _store(self, job: Job, out: render.Output, animated: animate.AnimationOutput | None = None) -> Rendition:
        """One rendition's objects, the JPEG, each variant and its animation, under this
        attempt's keys."""
        objects, keys = self._ctx.objects, self._ctx.object_keys
        cache_control = rendition_cache_control(self._ctx.settings.retention_seconds)
        key = keys.rendition(job.job_id, job.attempt, out.name)
        objects.put(key, out.data, out.content_type, cache_control)
        variants = {}
        for fmt, data in out.variants.items():
            variant_key = keys.rendition(job.job_id, job.attempt, out.name, fmt)
            objects.put(variant_key, data, fmt.content_type, cache_control)
            variants[fmt] = Variant(variant_key, len(data))
        animation = None
        if animated is not None:
            animation_key = keys.animation(job.job_id, job.attempt, out.name)
            animation = Animation(animation_key, animated.width, animated.height, animated.frames,
                                  animated.duration_ms, len(animated.data))
            objects.put(animation_key, animated.data, animation.content_type, cache_control)
        return Rendition(key, out.width, out.height, out.content_type, variants, animation)

    def _specs(self, job: Job) -> tuple[RenditionSpec, ...]:
        return tuple(spec for spec in self._ctx.renditions if spec.name in job.sizes)

    def _animations(self, data: bytes, job: Job, focus) -> tuple[dict, AnimationSkipped | None]:
        """An animated source's animations ({} for a still), or why it has none: past a limit
        (chalicelib/domain/renditions.py animation_skipped, checked from the facts before any
        decode, and again in the child), or over its CPU or memory in the decoding child. A
        call of its own after the stills', so the stills are made whatever the animation costs."""
        s, source = self._ctx.settings, job.source
        if source is None or not source.animated:
            return {}, None
        reason = animation_skipped(source.frames, source.width, source.height,
                                   s.max_animation_frames, s.max_animation_pixels)
        if reason is None:
            # The stills' focus (the client's or the one found): the squares' frames are cut
            # around the very point their stills were.
            args = (data, s.max_pixels, self._specs(job), s.webp_quality, self._ctx.decode_limits,
                    animate.AnimationLimits.of(s), focus)
            try:
                return self._limited(animate.make_animations, args, s.animation_cpu_seconds), None
            except animate.AnimationRefused as refused:
                reason = refused.reason
            except (ImageTooComplex, TransientError):
                # Over its CPU or memory; or out of wall time (a machine too busy) or its child
                # died: a retry would remake the stills for an animation that may never fit,
                # and the stills must not be lost to it (three such attempts failed the job).
                reason = AnimationSkipped.TOO_COMPLEX
        log.info("animation_skipped", job_id=job.job_id, code=reason.value, frames=source.frames)
        return {}, reason

    def _renditions(self, data: bytes, job: Job) -> render.Rendered:
        """Decode and code every size and format in a child with a CPU and a memory limit, so
        that no image can hold a worker for more than decode_cpu_seconds, nor take more than
        decode_memory_mb; the wall clock allows for a busy machine, within the time the
        worker function has left."""
        s = self._ctx.settings
        # The client's focus, if the upload gave one; the child finds one otherwise.
        args = (data, s.max_pixels, self._specs(job), render.Coding.of(s), self._ctx.decode_limits, job.formats,
                job.focus)
        return self._limited(render.make_images, args, s.decode_cpu_seconds)

    def _limited(self, fn, args: tuple, cpu_seconds: int):
        """fn(*args) in the decoding child within cpu_seconds and decode_memory_mb (in this
        process, unlimited, when decode_cpu_seconds is 0)."""
        s = self._ctx.settings
        if not s.decode_cpu_seconds:
            return fn(*args)
        # A small Lambda gets a fraction of a core (1024 MB: about 0.6), and a busy machine
        # less: the wall clock only catches a child that hangs without using its CPU.
        wall = 4.0 * cpu_seconds + 5.0
        budget = deadline.current()
        if budget is not None:
            wall = min(wall, budget.remaining() - _TIME_TO_FINISH)
            if wall <= 0:
                raise TransientError("no time left in this invocation to decode")
        return run_limited(fn, *args, cpu_seconds=cpu_seconds,
                           wall_seconds=wall, memory_bytes=s.decode_memory_mb * MIB)

    def _fail(self, job: Job, code: ErrorCode) -> Outcome:
        failed = lifecycle.fail(self._ctx, job, code,
                                lambda f: self._ctx.jobs.finish_attempt(f, job.attempt))
        return Outcome.FAILED if failed else Outcome.LOST


def _with_source(job: Job, source: Source | None) -> Job:
    """The job with its original's facts, as read now (None: the header was unreadable)."""
    return job if source is None else dataclasses.replace(job, source=source)


# Types a client may declare for the same bytes: the sniffer tells HEIC from HEIF by brand.
_SAME_TYPE = {"image/heif": "image/heic"}
_SIGNED = (UploadMethod.PUT.value, UploadMethod.MULTIPART.value)


def _declared_mismatch(job: Job, data: bytes) -> ErrorCode | None:
    """Why a PUT or multipart original is not what its job declared, or None. Storage
    enforces the signed length, type and checksum on AWS; an emulator may not (moto does
    not), and a multipart upload pins only its parts: so the worker checks them again."""
    if job.upload_method not in _SIGNED:
        return None
    if job.declared_size is not None and len(data) != job.declared_size:
        return ErrorCode.FILE_TOO_LARGE if len(data) > job.declared_size else ErrorCode.INVALID_IMAGE
    if job.declared_sha256 is not None and \
            base64.b64encode(hashlib.sha256(data).digest()).decode() != job.declared_sha256:
        return ErrorCode.INVALID_IMAGE
    found = sniff.sniff(data)
    if found is not None and job.declared_type is not None and \
            _SAME_TYPE.get(found, found) != _SAME_TYPE.get(job.declared_type, job.declared_type):
        return ErrorCode.UNSUPPORTED_FORMAT
    return None
