"""A guess of the image type from the first bytes, for the Content-Type the server asks for.

The server sniffs the bytes itself and decides; this only has to name an allowed type for the
direct upload's form (`/uploads` refuses any other) and label the raw body of `/images`. It is
the server's rule (chalicelib/domain/sniff.py) copied, since the SDK cannot import the server:
tests/client/test_sniff.py runs both on the same files.
"""
from __future__ import annotations

from typing import Optional

OCTET_STREAM = "application/octet-stream"

_AVIF_BRANDS = frozenset({b"avif", b"avis"})
_HEIC_BRANDS = frozenset({b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis"})
_HEIF_BRANDS = frozenset({b"mif1", b"msf1"})
_MAX_FTYP_SIZE = 4096  # a real ftyp box holds a handful of brands


def guess_type(data: bytes) -> Optional[str]:
    """The MIME type the server will sniff from these bytes, or None."""
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return "image/webp"
    # Classic TIFF (version 42) or BigTIFF (43).
    if data.startswith((b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")):
        return "image/tiff"
    return _isobmff_type(data)


def _isobmff_type(data: bytes) -> Optional[str]:
    """AVIF/HEIC/HEIF from the leading 'ftyp' box: its major brand if that names one, else
    AVIF, then HEIC, then HEIF among all its brands."""
    if len(data) < 16 or data[4:8] != b"ftyp":
        return None
    box_size = int.from_bytes(data[:4], "big")
    if not 16 <= box_size <= _MAX_FTYP_SIZE:
        return None
    major = data[8:12]
    # 8..12 major brand, 12..16 minor version, then compatible brands.
    brands = [major] + [data[i:i + 4] for i in range(16, min(box_size, len(data)) - 3, 4)]
    if major in _AVIF_BRANDS:
        return "image/avif"
    if major in _HEIC_BRANDS:
        return "image/heic"
    for family, mime in ((_AVIF_BRANDS, "image/avif"), (_HEIC_BRANDS, "image/heic"),
                         (_HEIF_BRANDS, "image/heif")):
        if any(brand in family for brand in brands):
            return mime
    return None
