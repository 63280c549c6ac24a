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
