"""A hostile corpus, generated: files that are small to send and costly or odd to decode."""
from __future__ import annotations

import io
import re
import struct
import zlib

from PIL import Image

_SOS = b"\xff\xda"
_NEXT_MARKER = re.compile(rb"\xff(?=[^\x00\xd0-\xd7\xff])")


def _last_scan(jpeg: bytes) -> tuple[int, int]:
    start = jpeg.rindex(_SOS)
    length = int.from_bytes(jpeg[start + 2:start + 4], "big")
    end = _NEXT_MARKER.search(jpeg, start + 2 + length).start()
    return start, end


def scan_bomb(width: int = 2000, height: int = 2000, scans: int = 2000) -> bytes:
    """A progressive JPEG whose last scan is repeated: every copy makes the decoder walk
    every block of the image again, for a few bytes each."""
    out = io.BytesIO()
    Image.new("RGB", (width, height), (90, 120, 150)).save(out, "JPEG", progressive=True, quality=90)
    jpeg = out.getvalue()
    start, end = _last_scan(jpeg)
    return jpeg[:end] + jpeg[start:end] * (scans - 1) + jpeg[end:]


def frame_bomb(frames: int = 1200) -> bytes:
    """An animated GIF of many tiny frames, each different so that none is merged away."""
    images = [Image.frombytes("L", (4, 4), bytes((i * 7 + j) % 256 for j in range(16))) for i in range(frames)]
    out = io.BytesIO()
    images[0].save(out, "GIF", save_all=True, append_images=images[1:], duration=10, optimize=False)
    return out.getvalue()


def page_bomb(pages: int = 2000) -> bytes:
    """A multi-page TIFF of 1x1 grey pages, written directly (Pillow takes seconds for it)."""
    header = b"II*\x00" + struct.pack("<I", 8)
    body, offset = b"", 8
    for page in range(pages):
        entries = [(256, 4, 1, 1), (257, 4, 1, 1), (258, 3, 1, 8), (259, 3, 1, 1), (262, 3, 1, 1),
                   (273, 4, 1, 0), (277, 3, 1, 1), (278, 4, 1, 1), (279, 4, 1, 1)]
        ifd_size = 2 + 12 * len(entries) + 4
        pixel_at = offset + ifd_size
        next_ifd = pixel_at + 1 if page < pages - 1 else 0
        ifd = struct.pack("<H", len(entries))
        for tag, kind, count, value in entries:
            value = pixel_at if tag == 273 else value
            ifd += struct.pack("<HHI", tag, kind, count) + (struct.pack("<HH", value, 0) if kind == 3 else struct.pack("<I", value))
        ifd += struct.pack("<I", next_ifd)
        body += ifd + bytes([page % 256])
        offset = pixel_at + 1
    return header + body


def huge_profile_jpeg(profile_bytes: int = 2 * 1024 * 1024) -> bytes:
    """A tiny JPEG carrying a huge (and meaningless) ICC profile, split over APP2 segments."""
    out = io.BytesIO()
    Image.new("RGB", (16, 16), (10, 20, 30)).save(out, "JPEG", icc_profile=b"\x00" * profile_bytes)
    return out.getvalue()


def png_header(width: int, height: int) -> bytes:
    """A PNG that claims width x height and holds almost no pixel data."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 16)) + chunk(b"IEND", b"")


def jpeg_with_zip_appended() -> bytes:
    """A polyglot: a real JPEG that is also a (truncated) ZIP archive."""
    out = io.BytesIO()
    Image.new("RGB", (64, 48), (200, 10, 10)).save(out, "JPEG")
    return out.getvalue() + b"PK\x03\x04" + b"\x00" * 26 + b"evil.html<script>alert(1)</script>"


def gif_html_polyglot() -> bytes:
    """GIF magic, then HTML: sniffed as GIF, not decodable as one."""
    return b"GIF89a<html><script>alert(1)</script></html>" + b"\x00" * 32


def truncated_jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (640, 480), (1, 2, 3)).save(out, "JPEG")
    data = out.getvalue()
    return data[: len(data) // 2]


def huge_screen_gif(width: int = 6000, height: int = 6000, frames: int = 8) -> bytes:
    """An animated GIF whose logical screen is huge and whose frames are 1x1: a few hundred
    bytes that decode, frame after frame, to a whole canvas."""
    import struct as _struct

    head = b"GIF89a" + _struct.pack("<HHBBB", width, height, 0x80, 0, 0) + b"\x00\x00\x00\xff\xff\xff"
    loop = b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00"
    body = b""
    for i in range(frames):
        body += b"\x21\xf9\x04\x00\x00\x00\x00\x00"  # no delay
        body += b"\x2c" + _struct.pack("<HHHHB", i, i, 1, 1, 0) + b"\x02\x02\x44\x01\x00"
    return head + loop + body + b"\x3b"


def zero_delay_gif(frames: int = 40) -> bytes:
    """An animated GIF of frames with no delay at all (browsers play each for 100 ms)."""
    images = [Image.new("RGB", (32, 32), (i * 6 % 256, 80, 160)) for i in range(frames)]
    out = io.BytesIO()
    images[0].save(out, "GIF", save_all=True, append_images=images[1:], duration=0, loop=0)
    return out.getvalue()
