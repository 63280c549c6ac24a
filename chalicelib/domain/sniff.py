"""The type of an upload from its magic bytes only, never from a header or a filename."""
from __future__ import annotations

ALLOWED_TYPES: frozenset[str] = frozenset(
    {
        "image/jpeg",
        "image/png",
        "image/webp",
        "image/gif",
        "image/tiff",
        "image/avif",
        "image/heic",
        "image/heif",
    }
)

# Pillow plugin allowed to open each sniffed type, so no other parser ever sees the bytes.
PIL_FORMATS: dict[str, str] = {
    "image/jpeg": "JPEG",
    "image/png": "PNG",
    "image/webp": "WEBP",
    "image/gif": "GIF",
    "image/tiff": "TIFF",
    "image/avif": "AVIF",
    "image/heic": "HEIF",
    "image/heif": "HEIF",
}

_AVIF_BRANDS = frozenset({b"avif", b"avis"})
_HEIC_BRANDS = frozenset({b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis"})
_HEIF_BRANDS = frozenset({b"mif1", b"msf1"})
_MAX_FTYP_SIZE = 4096  # a real ftyp box holds a handful of brands

def sniff(data: bytes) -> str | None:
    """MIME type from the magic bytes only (never a header or filename), or None."""
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return "image/webp"
    # Classic TIFF (version 42) or BigTIFF (43: 64-bit offsets, for scans over 4 GiB).
    if data.startswith((b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")):
        return "image/tiff"
    return _sniff_isobmff(data)


def _sniff_isobmff(data: bytes) -> str | None:
    """AVIF/HEIC/HEIF from the leading ISO-BMFF 'ftyp' box's brands."""
    if len(data) < 16 or data[4:8] != b"ftyp":
        return None
    box_size = int.from_bytes(data[:4], "big")
    if not 16 <= box_size <= _MAX_FTYP_SIZE:
        return None
    major = data[8:12]
    # 8..12 major brand, 12..16 minor version, then compatible brands.
    brands = [major] + [data[i : i + 4] for i in range(16, min(box_size, len(data)) - 3, 4)]
    for family, mime in (
        (_AVIF_BRANDS, "image/avif"),
        (_HEIC_BRANDS, "image/heic"),
    ):
        if major in family:
            return mime
    for family, mime in (
        (_AVIF_BRANDS, "image/avif"),
        (_HEIC_BRANDS, "image/heic"),
        (_HEIF_BRANDS, "image/heif"),
    ):
        if any(brand in family for brand in brands):
            return mime
    return None
