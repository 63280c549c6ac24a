"""The original's facts (chalicelib/domain/source.py), read from what opening it parsed:
the header, the EXIF block and the ICC profile. No pixel is decoded here.

Only the tags named below are read. GPS, serial numbers, owner names and maker notes are
in the same EXIF block, and never leave this module: nothing here copies the block whole.
"""
from __future__ import annotations

import io
import re
from datetime import datetime
from typing import TYPE_CHECKING, Optional

from chalicelib.domain.source import ColorSpace, Source, format_of
from chalicelib.imaging.timeline import STILL, Timeline

if TYPE_CHECKING:  # the caller opened it: this module imports no decoder
    from PIL import Image

_ORIENTATION = 0x0112
_EXIF_IFD = 0x8769
_DATE_TIME_ORIGINAL = 0x9003
_OFFSET_TIME_ORIGINAL = 0x9011
# Orientations 5-8 turn the picture a quarter: the upright width is the stored height.
_QUARTER_TURNS = frozenset({5, 6, 7, 8})
# Pillow's TIFF reader and pillow-heif report the size upright already (TIFF applies the
# orientation as it loads; HEIF's rotation is in its own boxes, and its EXIF says 1).
_UPRIGHT_ALREADY = frozenset({"image/tiff", "image/heic", "image/heif"})
_OFFSET = re.compile(r"[+-](0\d|1[0-4]):[0-5]\d")
# Words of the profile descriptions cameras, phones and editors write, by colour space.
_DESCRIPTIONS = (
    ("display p3", ColorSpace.DISPLAY_P3),  # not DCI-P3: cinema's white point and gamma
    ("adobe rgb", ColorSpace.ADOBE_RGB),
    ("adobergb", ColorSpace.ADOBE_RGB),
    ("srgb", ColorSpace.SRGB),
)
# Malformed metadata is no reason to fail a photo: a fact that cannot be read is left out.
_UNREADABLE = (OSError, ValueError, SyntaxError, EOFError, KeyError, IndexError, TypeError,
               AttributeError, OverflowError)


def read_facts(im: "Image.Image", content_type: str, size: int, timeline: Timeline = STILL) -> Source:
    """The facts of an image opened (header only) from `size` bytes of `content_type`, whose
    structure gave `timeline` (chalicelib/imaging/timeline.py)."""
    exif = _exif(im)
    width, height = im.size
    if content_type not in _UPRIGHT_ALREADY and exif.get(_ORIENTATION) in _QUARTER_TURNS:
        width, height = height, width
    return Source(width=width, height=height, format=format_of(content_type), bytes=size,
                  captured_at=_captured_at(exif),
                  color_space=color_space(im.info.get("icc_profile"), im.info.get("nclx_profile")),
                  has_alpha=im.has_transparency_data, frames=timeline.frames,
                  duration_ms=timeline.duration_ms if timeline.animated else None)


def _exif(im: "Image.Image"):
    try:
        return im.getexif()
    except _UNREADABLE:
        return {}


def _captured_at(exif) -> Optional[str]:
    """DateTimeOriginal ("YYYY:MM:DD HH:MM:SS", the camera's clock) as RFC 3339 with
    OffsetTimeOriginal; without a valid offset, the local date-time alone: guessing UTC
    would move the photo by hours for every reader."""
    try:
        tags = exif.get_ifd(_EXIF_IFD) if hasattr(exif, "get_ifd") else {}
        taken = _text(tags.get(_DATE_TIME_ORIGINAL))
        if taken is None:
            return None
        local = datetime.strptime(taken[:19], "%Y:%m:%d %H:%M:%S").strftime("%Y-%m-%dT%H:%M:%S")
    except _UNREADABLE:
        return None  # absent, or "0000:00:00 00:00:00" and other blanks cameras write
    offset = _text(tags.get(_OFFSET_TIME_ORIGINAL))
    return local + offset if offset is not None and _OFFSET.fullmatch(offset) else local


def _text(value) -> Optional[str]:
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    return value.strip("\0 ") if isinstance(value, str) else None


# H.273's colour primaries, as HEIF and AVIF state them in an `nclx` box instead of a profile:
# 1 BT.709 (sRGB's), 2 unspecified, 12 SMPTE EG 432-1 (Display P3's).
_NCLX_PRIMARIES = {1: ColorSpace.SRGB, 2: ColorSpace.SRGB, 12: ColorSpace.DISPLAY_P3}


def color_space(icc: Optional[bytes], nclx: Optional[dict] = None) -> ColorSpace:
    """By the embedded ICC profile's description, else by HEIF's `nclx` primaries (phones
    write Display P3 so); untagged is sRGB (as every viewer and the renditions take it); a
    profile that cannot be read, or of another space, is OTHER."""
    if not icc:
        if isinstance(nclx, dict):
            return _NCLX_PRIMARIES.get(nclx.get("color_primaries"), ColorSpace.OTHER)
        return ColorSpace.SRGB
    from PIL import ImageCms  # the caller already loaded Pillow

    try:
        profile = ImageCms.ImageCmsProfile(io.BytesIO(icc)).profile
        description = (profile.profile_description or "").lower()
        if profile.xcolor_space != "RGB ":
            return ColorSpace.OTHER
    except (ImageCms.PyCMSError, *_UNREADABLE):
        return ColorSpace.OTHER
    return next((space for word, space in _DESCRIPTIONS if word in description), ColorSpace.OTHER)
