"""Exact duplicates reuse the work: a job whose original has the same bytes (SHA-256) as a
ready job of the same owner, not deleted nor expired, that made every size and format the new
one asks for, is made ready by server-side copies of that job's renditions: no decode, no
encode. The copies are the new job's own objects, under its own keys, with its own lifetime,
so deleting either job never touches the other's.

The index: one item per owner and content (JobStore.same_content / note_content), written
when a job becomes ready and living as long as it; a stale one (its job deleted, expired,
or made with fewer sizes or formats) is read and ignored. Never across owners: the owner is
part of the key, and the job read back is checked to be the owner's. Two identical uploads at
once both find nothing and are both processed; each then notes itself.
"""
from __future__ import annotations

import dataclasses
import hashlib
from typing import Optional

from chalicelib.domain.focus import Focus, canonical
from chalicelib.domain.jobs import Job, JobStatus, Rendition, Variant
from chalicelib.runtime.logs import get_logger
from chalicelib.usecases import lifecycle
from chalicelib.usecases.context import Context

log = get_logger("duplicates")


# How the squares are placed, part of the recipe: a job made before the focus (centre crops)
# is never copied for one made after. Changes whenever the placing does (a new detector).
SQUARES = "around the focus"


def content_of(ctx: Context, data: bytes, focus: Optional[Focus] = None) -> str:
    """What the index is keyed by (with the owner), hex: the original's SHA-256 with what its
    renditions are made by (the rendition table, how squares are placed, the coding settings,
    the pixel limit) and the client's focus (`focus`: the same bytes around another point
    are other squares). A deployment that changes any of these makes other renditions of the
    same bytes (or fails them), so a job made before the change is no longer found."""
    s = ctx.settings
    # The animations' (issue 51): jobs made before them have none, and were keyed without
    # this part, so a duplicate of an animated upload is never a copy of such a job's stills.
    animation = ("animation", 1, s.max_animation_frames, s.max_animation_pixels)
    recipe = repr((ctx.renditions, SQUARES, s.jpeg_quality, s.webp_quality, s.avif_quality, s.avif_speed,
                   s.max_pixels, *animation)).encode()
    asked = b"" if focus is None else b"\nfocus=" + canonical(focus)
    return hashlib.sha256(recipe + hashlib.sha256(data).digest() + asked).hexdigest()


def twin_of(ctx: Context, job: Job, content: str) -> Optional[Job]:
    """The owner's ready job of the same bytes whose renditions cover the job's, or None."""
    twin_id = ctx.jobs.same_content(job.owner, content)
    if twin_id is None or twin_id == job.job_id:
        return None
    twin = ctx.jobs.get(twin_id)
    if (twin is None or twin.owner != job.owner or twin.status is not JobStatus.READY
            or twin.is_expired(ctx.clock())):
        return None
    if not set(job.sizes) <= set(twin.renditions) or not set(job.formats) <= set(twin.formats):
        return None
    return twin


def copy_renditions(ctx: Context, job: Job, twin: Job) -> dict:
    """The twin's renditions the job asks for, copied under this attempt's keys. KeyError
    when one of the twin's objects is gone (it was deleted meanwhile)."""
    keys = ctx.object_keys
    copied = {}
    for name in job.sizes:
        source = twin.renditions[name]
        key = keys.rendition(job.job_id, job.attempt, name)
        ctx.objects.copy(source.key, key)
        variants = {}
        for fmt in job.formats:
            if fmt in source.variants:  # the twin made none where the JPEG was the better file
                variant_key = keys.rendition(job.job_id, job.attempt, name, fmt)
                ctx.objects.copy(source.variants[fmt].key, variant_key)
                variants[fmt] = Variant(variant_key, source.variants[fmt].bytes)
        animation = source.animation
        if animation is not None:
            animation_key = keys.animation(job.job_id, job.attempt, name)
            ctx.objects.copy(animation.key, animation_key)
            animation = dataclasses.replace(animation, key=animation_key)
        copied[name] = Rendition(key, source.width, source.height, source.content_type, variants, animation)
    return copied


def note(ctx: Context, job: Job, content: str) -> None:
    """A ready job is the one its bytes now lead to, as long as it lives. Best effort: a lost
    note costs only a later duplicate's reuse."""
    lifecycle.call_best_effort(ctx.jobs.note_content, job.owner, content, job.job_id, job.expires_at)
