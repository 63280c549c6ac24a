"""The renditions a job produces, as one table: each one's name, the square it is fitted to,
and how it fits. No I/O.

Adding a size: a member of RenditionName, a row in rendition_specs, the setting that gives
its box (chalicelib/config.py), and the docs. Everything else (the resize, object keys, the
job record, the JSON, clean-up) follows the table.

Every rendition is coded as JPEG, and in each extra format (RenditionFormat) its upload asked
for: one object per (rendition, format).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from chalicelib.domain.errors import InvalidRequest


class RenditionName(StrEnum):
    """The key of a rendition everywhere: in the job, its object key and the public JSON."""

    DISPLAY = "display"
    THUMB = "thumb"
    THUMB_512 = "thumb_512"  # the 2x thumbnail: a 3-column grid on a 3x phone needs about 390 px


class Fit(StrEnum):
    CONTAIN = "contain"  # inside box x box with the same aspect; never upscaled
    # Exactly box x box, around the focus (chalicelib/domain/focus.py, square_window): the
    # image's whole short side, slid along the long side so the focus is as near the square's
    # centre as the image allows; upscaled when the image is smaller. A job made before the
    # focus has centre crops (its renditions stay as they were made).
    COVER = "cover"


@dataclass(frozen=True)
class RenditionSpec:
    name: RenditionName
    fit: Fit
    box: int  # the side of the square, in pixels
    # Made when the upload names no sizes; a size an app must ask for (`renditions=`) says False.
    by_default: bool = True


def rendition_specs(settings) -> tuple[RenditionSpec, ...]:
    """The product's renditions, in the order they are made, each sized by its setting
    (`settings` is chalicelib.config.Settings; the domain does not import it)."""
    return (
        RenditionSpec(RenditionName.DISPLAY, Fit.CONTAIN, settings.display_box),
        RenditionSpec(RenditionName.THUMB, Fit.COVER, settings.thumb_box),
        RenditionSpec(RenditionName.THUMB_512, Fit.COVER, settings.thumb_512_box),
    )


# Made for every job whatever it names: image_url and thumb_url are theirs, and every job made
# before sizes could be named has just these (its stored record names none).
ALWAYS = (RenditionName.DISPLAY, RenditionName.THUMB)


def asked_renditions(names, specs: Iterable[RenditionSpec]) -> tuple[RenditionName, ...]:
    """The renditions an upload asks for (`renditions=`), in the table's order: ALWAYS and the
    names given, or ALWAYS and the rows made by default when `names` is None (no parameter).
    Names are case-insensitive, order and repeats do not count; InvalidRequest for a name not
    in the table."""
    specs = tuple(specs)
    order = [spec.name for spec in specs]
    if names is None:
        return tuple(spec.name for spec in specs if spec.name in ALWAYS or spec.by_default)
    asked = set(ALWAYS)
    for name in names:
        if not isinstance(name, str) or name.strip().lower() not in order:
            raise InvalidRequest(f"renditions may name only: {', '.join(order)}"[:200])
        asked.add(RenditionName(name.strip().lower()))
    return tuple(n for n in order if n in asked)


class RenditionFormat(StrEnum):
    """A coding of a rendition, as an upload names it. JPEG is always made; the others only
    when the upload asks (they cost CPU and storage)."""

    JPEG = "jpeg"
    WEBP = "webp"
    AVIF = "avif"

    @property
    def content_type(self) -> str:
        return f"image/{self.value}"

    @property
    def extension(self) -> str:
        return "jpg" if self is RenditionFormat.JPEG else self.value


# What an upload may ask for on top of the JPEG, in the order they are made.
EXTRA_FORMATS = (RenditionFormat.WEBP, RenditionFormat.AVIF)


def extra_formats(names: Iterable[str], enabled: Iterable[RenditionFormat]) -> tuple[RenditionFormat, ...]:
    """The extra formats an upload asks for, once each, in EXTRA_FORMATS' order (so that the
    same set is the same request); InvalidRequest for a name the stage does not enable."""
    enabled = tuple(enabled)
    asked = set()
    for name in names:
        if not isinstance(name, str) or name.strip().lower() not in {f.value for f in enabled}:
            allowed = ", ".join(f.value for f in enabled) or "none"
            raise InvalidRequest(f"formats may name only: {allowed}"[:200])
        asked.add(RenditionFormat(name.strip().lower()))
    return tuple(f for f in EXTRA_FORMATS if f in asked)


# What an animation is coded as: animated WebP plays in every current browser, Android and iOS 14+.
ANIMATION_CONTENT_TYPE = "image/webp"


class AnimationSkipped(StrEnum):
    """Why an animated source's job is ready with its stills alone: the stable codes of the
    contract's `animation_skipped` (docs/contract.md "Animations")."""

    TOO_MANY_FRAMES = "animation_too_many_frames"    # over MAX_ANIMATION_FRAMES
    TOO_MANY_PIXELS = "animation_too_many_pixels"    # frames x width x height over MAX_ANIMATION_PIXELS
    # over ANIMATION_CPU_SECONDS or DECODE_MEMORY_MB, or out of the invocation's wall time
    TOO_COMPLEX = "animation_too_complex"

    @property
    def message(self) -> str:
        return _SKIPPED_MESSAGES[self]


_SKIPPED_MESSAGES = {
    AnimationSkipped.TOO_MANY_FRAMES: "The animation has more frames than are animated here; its renditions are stills.",
    AnimationSkipped.TOO_MANY_PIXELS: "The animation has more pixels in all its frames than are animated here; "
                                      "its renditions are stills.",
    AnimationSkipped.TOO_COMPLEX: "The animation takes too long or too much memory to make; its renditions are stills.",
}


def animation_skipped(frames: int, width: int, height: int, max_frames: int,
                      max_pixels: int) -> AnimationSkipped | None:
    """The one rule of what is animated: why a source of `frames` frames on a width x height
    canvas gets no animation, or None when it does."""
    if frames > max_frames:
        return AnimationSkipped.TOO_MANY_FRAMES
    if frames * width * height > max_pixels:
        return AnimationSkipped.TOO_MANY_PIXELS
    return None
