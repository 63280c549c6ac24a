"""The renditions a job produces, as one table: each one's name, the square it is fitted to,
and how it fits. No I/O.

Adding a size: a member of RenditionName, a row in rendition_specs, the setting that gives
its box (chalicelib/config.py), and the docs. Everything else (the resize, object keys, the
job record, the JSON, clean-up) follows the table.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class RenditionName(StrEnum):
    """The key of a rendition everywhere: in the job, its object key and the public JSON."""

    DISPLAY = "display"
    THUMB = "thumb"


class Fit(StrEnum):
    CONTAIN = "contain"  # inside box x box with the same aspect; never upscaled
    COVER = "cover"      # exactly box x box, a centre crop; upscaled when the image is smaller


@dataclass(frozen=True)
class RenditionSpec:
    name: RenditionName
    fit: Fit
    box: int  # the side of the square, in pixels


def rendition_specs(settings) -> tuple[RenditionSpec, ...]:
    """The product's renditions, in the order they are made, each sized by its setting
    (`settings` is chalicelib.config.Settings; the domain does not import it)."""
    return (
        RenditionSpec(RenditionName.DISPLAY, Fit.CONTAIN, settings.display_box),
        RenditionSpec(RenditionName.THUMB, Fit.COVER, settings.thumb_size),
    )
