"""Images made in code for tests (and scikit-image's photographs): nothing binary is committed."""
from __future__ import annotations

import functools
import io
from pathlib import Path

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


def jpeg_with_defect(defect: str) -> bytes:
    """A JPEG with one defect that libjpeg (and Pillow's marker parser) tolerate, as phones
    and editors write them now and then:
    - "junk_between_segments": bytes that are no marker between two header segments;
    - "junk_in_segment": a comment whose length stops short of its contents;
    - "truncated_app14": an Adobe APP14 cut to fewer bytes than its fields, and one of
      length 0;
    - "damaged_app13": a Photoshop APP13 whose resource block is cut and overwritten."""
    import struct

    base = jpeg(320, 240, progressive=True)
    app0_end = 2 + 2 + int.from_bytes(base[4:6], "big")  # SOI, then APP0 (JFIF)
    head, rest = base[:app0_end], base[app0_end:]
    if defect == "junk_between_segments":
        return head + b"\x00\x11 junk \x7f" + rest
    if defect == "junk_in_segment":  # a comment whose length stops short of its text
        return head + b"\xff\xfe" + struct.pack(">H", 6) + b"made with an editor" + rest
    if defect == "truncated_app14":  # the Adobe fields cut after the version, then an empty one
        return head + b"\xff\xee" + struct.pack(">H", 9) + b"Adobe\x00\x64" + b"\x80\x00\x00\x01" \
            + b"\xff\xee\x00\x00" + rest
    if defect == "damaged_app13":
        app13 = b"Photoshop 3.0\x008BIM\x04\x04\x00\x00\x00\x00\x01\x00" + b"\x1c\x02"
        return head + b"\xff\xed" + struct.pack(">H", 2 + len(app13)) + app13 + b"\x9a\xbc\xff\x00\x17" + rest
    raise ValueError(defect)


JPEG_DEFECTS = ("junk_between_segments", "junk_in_segment", "truncated_app14", "damaged_app13")


@functools.lru_cache(maxsize=None)
def photo(name: str = "coffee.png") -> bytes:
    """A real photograph scikit-image ships (600x400 coffee by default), as a JPEG q95 upload:
    flat images like jpeg()'s get no WebP or AVIF, whose files would not be smaller there."""
    import skimage.data

    out = io.BytesIO()
    Image.open(Path(skimage.data.__file__).parent / name).convert("RGB").save(out, "JPEG", quality=95)
    return out.getvalue()
