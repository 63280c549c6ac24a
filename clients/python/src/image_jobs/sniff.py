"""A guess of the image type from the first bytes, for the Content-Type the server asks for.

The server sniffs the bytes itself and decides; this only has to name an allowed type for the
direct upload's form (`/uploads` refuses any other) and label the raw body of `/images`.
"""
from __future__ import annotations

from typing import Optional

OCTET_STREAM = "application/octet-stream"

_ISOBMFF_BRANDS = {
    b"avif": "image/avif", b"avis": "image/avif",
    b"heic": "image/heic", b"heix": "image/heic", b"hevc": "image/heic", b"hevx": "image/heic",
    b"heim": "image/heic", b"heis": "image/heic",
    b"mif1": "image/heif", b"msf1": "image/heif",
}


def guess_type(head: bytes) -> Optional[str]:
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith((b"II*\x00", b"MM\x00*")):
        return "image/tiff"
    if head[4:8] == b"ftyp":
        size = int.from_bytes(head[:4], "big")
        brands = [head[8:12]] + [head[i:i + 4] for i in range(16, min(size, len(head)) - 3, 4)]
        for brand in brands:  # the major brand first, then the compatible ones
            if brand in _ISOBMFF_BRANDS:
                return _ISOBMFF_BRANDS[brand]
    return None
