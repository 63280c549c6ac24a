"""What an image will cost to decode, read from its structure before any pixel is decoded.

A small file can still be a bomb: a progressive JPEG that repeats a cheap scan thousands of
times, a GIF of thousands of frames, a TIFF of thousands of pages, or kilobytes of pixels
wrapped in megabytes of profiles and metadata. Each is refused with ImageTooComplex from
its structure alone; what the structure cannot show is bounded by the worker's CPU limit
(chalicelib/imaging/sandbox.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chalicelib.config import Settings
from chalicelib.domain.errors import ImageTooComplex, InvalidImage

if TYPE_CHECKING:  # the API's read path must not import Pillow
    from PIL import Image


@dataclass(frozen=True)
class DecodeLimits:
    """The decode budget; its defaults are Settings' (stated there once)."""

    # libjpeg writes 10 scans for a colour progressive JPEG, mozjpeg a few more; bombs
    # repeat scans by the thousand, and every scan walks every block of the image.
    max_scans: int = Settings.max_scans
    # Frames, pages or layers. Only the first is decoded, but every one must be parsed.
    max_frames: int = Settings.max_frames
    # ICC profiles, EXIF, XMP, comments and other application data, together.
    max_metadata_bytes: int = Settings.max_metadata_bytes

    @classmethod
    def of(cls, settings: Settings) -> "DecodeLimits":
        return cls(settings.max_scans, settings.max_frames, settings.max_metadata_bytes)


@dataclass(frozen=True)
class Structure:
    scans: int = 1
    frames: int = 1
    metadata_bytes: int = 0


def check(im: "Image.Image", data: bytes, content_type: str, limits: DecodeLimits) -> Structure:
    """Raise ImageTooComplex if the opened (not yet decoded) image is over the limits."""
    found = structure(im, data, content_type, limits)
    if found.scans > limits.max_scans:
        raise ImageTooComplex(f"The image has {found.scans} progressive scans; at most "
                              f"{limits.max_scans} are allowed.")
    if found.frames > limits.max_frames:
        raise ImageTooComplex(f"The image has more than {limits.max_frames} frames or pages.")
    if found.metadata_bytes > limits.max_metadata_bytes:
        raise ImageTooComplex(f"The image carries {found.metadata_bytes} bytes of metadata; at "
                              f"most {limits.max_metadata_bytes} are allowed.")
    return found


def structure(im: "Image.Image", data: bytes, content_type: str, limits: DecodeLimits) -> Structure:
    if content_type == "image/jpeg":
        scans, metadata = jpeg_segments(data, stop_after_scans=limits.max_scans + 1)
        return Structure(scans=scans, metadata_bytes=metadata)
    if content_type == "image/gif":
        frames = gif_frames(data, stop_after=limits.max_frames + 1)
    elif content_type == "image/tiff":
        frames = tiff_pages(data, stop_after=limits.max_frames + 1)
    else:
        # PNG (acTL), WebP, HEIF and AVIF read the count from a header.
        frames = int(getattr(im, "n_frames", 1) or 1)
    # What the header parse already read: profiles, EXIF, XMP, comments, PNG text before
    # the pixels (Pillow caps each PNG text chunk itself). Never `im.text`: it decodes.
    metadata = sum(len(value) for value in im.info.values() if isinstance(value, (bytes, str)))
    return Structure(frames=frames, metadata_bytes=metadata)


# The next marker after entropy-coded data: 0xFF followed by neither a stuffed zero nor a
# restart marker (RST0-7), which are part of the data.
_NEXT_MARKER = re.compile(rb"\xff(?=[^\x00\xd0-\xd7\xff])")
# Where libjpeg (next_marker) and Pillow resume after bytes that are no marker: the next
# 0xFF followed by anything but a stuffed zero or another fill byte.
_RESYNC = re.compile(rb"\xff(?=[^\x00\xff])")
_SOS, _EOI = 0xDA, 0xD9
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8), 0xD8})


def jpeg_segments(data: bytes, stop_after_scans: int) -> tuple[int, int]:
    """(scans, bytes of APPn and COM segments), walking the marker segments. Stops early
    once `stop_after_scans` scans are seen: the answer is then already "too many".

    It counts, it does not validate: what libjpeg skips with a warning (junk between
    segments, a segment whose length stops short of its contents, an APPn of length 0 or
    1) is skipped here the same way, so every scan the decoder will run is counted."""
    scans = metadata = 0
    pos, end = 2, len(data)  # after SOI
    while pos + 4 <= end:
        if data[pos] != 0xFF or data[pos + 1] == 0x00:
            found = _RESYNC.search(data, pos + 1)
            if found is None:
                break
            pos = found.start()
            continue
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker == _EOI:
            break
        if marker in _STANDALONE:
            pos += 2
            continue
        length = int.from_bytes(data[pos + 2:pos + 4], "big")
        is_metadata = 0xE0 <= marker <= 0xEF or marker == 0xFE
        if length < 2:
            if not is_metadata:  # libjpeg stops at a table or frame of no length
                raise InvalidImage("The image could not be decoded.")
            pos += 4  # libjpeg reads the length and skips nothing
            continue
        if is_metadata:
            metadata += length - 2
        pos += 2 + length
        if marker == _SOS:
            scans += 1
            if scans >= stop_after_scans:
                break
            found = _NEXT_MARKER.search(data, pos)
            if found is None:
                break
            pos = found.start()
    return scans, metadata


def gif_frames(data: bytes, stop_after: int) -> int:
    """Image descriptors in a GIF, walking its blocks without decoding any LZW data."""
    end = len(data)
    if end < 13:
        return 0
    pos = 13
    flags = data[10]
    if flags & 0x80:
        pos += 3 << ((flags & 0x07) + 1)  # global colour table
    frames = 0
    while pos < end and frames < stop_after:
        block = data[pos]
        if block == 0x3B:  # trailer
            break
        if block == 0x21:  # extension: label, then sub-blocks
            pos = skip_sub_blocks(data, pos + 2)
        elif block == 0x2C:  # image descriptor
            frames += 1
            if pos + 10 > end:
                break
            local = data[pos + 9]
            pos += 10
            if local & 0x80:
                pos += 3 << ((local & 0x07) + 1)
            pos = skip_sub_blocks(data, pos + 1)  # after the LZW minimum code size
        else:
            break  # garbage after the last frame: Pillow stops there too
    return frames


def skip_sub_blocks(data: bytes, pos: int) -> int:
    """Past a GIF block's data sub-blocks (each a length byte, then that many bytes, to a 0)."""
    end = len(data)
    while pos < end:
        size = data[pos]
        pos += 1 + size
        if size == 0:
            break
    return pos


def tiff_pages(data: bytes, stop_after: int) -> int:
    """Image file directories in a TIFF (classic or BigTIFF), following the chain of
    offsets without reading any strip; a chain that loops counts as over the limits."""
    if len(data) < 16 or data[:2] not in (b"II", b"MM"):
        return 0
    order = "little" if data[:2] == b"II" else "big"
    version = int.from_bytes(data[2:4], order)
    big = version == 43
    count_size, entry_size, offset_size = (8, 20, 8) if big else (2, 12, 4)
    offset = int.from_bytes(data[8:16] if big else data[4:8], order)
    seen: set[int] = set()
    while offset and len(seen) < stop_after:
        if offset in seen:
            return stop_after  # a loop: parsing it would never end
        if offset + count_size > len(data):
            break
        seen.add(offset)
        entries = int.from_bytes(data[offset:offset + count_size], order)
        next_at = offset + count_size + entries * entry_size
        if next_at + offset_size > len(data):
            break
        offset = int.from_bytes(data[next_at:next_at + offset_size], order)
    return len(seen)
