"""Images made in code for tests: nothing binary is committed."""
from __future__ import annotations

import io

from PIL import Image


def jpeg(width: int = 640, height: int = 480, color=(200, 30, 30), **save) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, "JPEG", quality=90, **save)
    return out.getvalue()


def png(width: int = 64, height: int = 48, mode: str = "RGBA") -> bytes:
    out = io.BytesIO()
    Image.new(mode, (width, height), (10, 20, 30, 0) if mode == "RGBA" else (10, 20, 30)).save(out, "PNG")
    return out.getvalue()


def size_of(data: bytes) -> tuple[int, int]:
    return Image.open(io.BytesIO(data)).size


def bigtiff(width: int = 64, height: int = 48, grey: int = 128) -> bytes:
    """A BigTIFF (64-bit offsets, as scanners write for large scans) of one uncompressed
    grey strip, written directly: Pillow reads BigTIFF but does not write it."""
    import struct

    pixels = bytes([grey]) * (width * height)
    entries = [(256, 4, 1, width), (257, 4, 1, height), (258, 3, 1, 8), (259, 3, 1, 1), (262, 3, 1, 1),
               (273, 16, 1, 0), (277, 3, 1, 1), (278, 4, 1, height), (279, 16, 1, len(pixels))]
    ifd_at = 16
    pixels_at = ifd_at + 8 + 20 * len(entries) + 8
    ifd = struct.pack("<Q", len(entries))
    for tag, kind, count, value in entries:
        ifd += struct.pack("<HHQQ", tag, kind, count, pixels_at if tag == 273 else value)
    ifd += struct.pack("<Q", 0)
    return b"II+\x00" + struct.pack("<HHQ", 8, 0, ifd_at) + ifd + pixels
