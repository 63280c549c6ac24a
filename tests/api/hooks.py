"""Schemathesis hooks (SCHEMATHESIS_HOOKS=tests.api.hooks): real images for the image media
types.

A JSON Schema cannot say "a decodable JPEG", so without these Schemathesis would send random
bytes labelled image/jpeg, which the server rightly refuses (415): it could then never create
a job through /images. With them every image body and `file` part is a real image, of a
random size, in the format its label names (or any format, for octet-stream). What the
server does with bytes that are not an image is pinned down by tests/e2e instead.
"""
from __future__ import annotations

import io

import pillow_heif
import schemathesis
from hypothesis import strategies as st
from PIL import Image

from chalicelib.domain.sniff import PIL_FORMATS  # noqa: E402

pillow_heif.register_heif_opener()

# Media type -> Pillow format that writes it: the same table the service opens them with.
FORMATS = PIL_FORMATS
ALIASES = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg", "image/x-png": "image/png"}


def encode(fmt: str, width: int, height: int, red: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (red, 90, 160)).save(out, fmt)
    return out.getvalue()


def images(fmt: str) -> st.SearchStrategy[bytes]:
    sides = st.integers(min_value=1, max_value=48)
    return st.builds(encode, st.just(fmt), sides, sides, st.integers(0, 255))


for media_type, fmt in FORMATS.items():
    schemathesis.openapi.media_type(media_type, images(fmt))
for alias, media_type in ALIASES.items():
    schemathesis.openapi.media_type(alias, images(FORMATS[media_type]))
schemathesis.openapi.media_type(
    "application/octet-stream", st.sampled_from(sorted(set(FORMATS.values()))).flatmap(images))
