"""What a job's original is, as its own file says: the `source` of a job (docs/contract.md
"The photo's facts"). Only these facts leave the file: no GPS, serial number, owner name or
maker note is ever read into them."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional


class ColorSpace(str, Enum):
    """The embedded profile's colour space; SRGB too for an untagged file (a viewer takes
    untagged pixels as sRGB, and so do the renditions)."""

    SRGB = "srgb"
    DISPLAY_P3 = "display-p3"
    ADOBE_RGB = "adobe-rgb"
    OTHER = "other"


def format_of(content_type: str) -> str:
    """`jpeg` for image/jpeg: every allowed type's subtype is the format's name."""
    return content_type.split("/", 1)[1]


@dataclass(frozen=True)
class Source:
    width: int  # upright: after the EXIF orientation, as the renditions are
    height: int
    format: str  # format_of(the sniffed type)
    bytes: int
    # EXIF DateTimeOriginal as RFC 3339 with OffsetTimeOriginal's offset, or the local
    # date-time without an offset when the file gives none (the zone is unknown); None without.
    captured_at: Optional[str]
    color_space: ColorSpace
    has_alpha: bool
    # Its frames (more than one: an animated GIF, WebP or APNG) and the time one play of
    # them takes as browsers play it (None for a still); frames None: read before frames were
    # (a job made before animations, whose record has none).
    frames: Optional[int] = None
    duration_ms: Optional[int] = None

    @property
    def animated(self) -> bool:
        return (self.frames or 1) > 1
