"""The SDK's sniff (a copy: it cannot import the server) answers what the server's does, on
the same files: real photographs and encodings of every allowed format, a BigTIFF, crafted
headers and bytes that are no image."""
from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest
import skimage.data
from image_jobs.sniff import OCTET_STREAM, guess_type
from PIL import Image

from chalicelib.domain.sniff import ALLOWED_TYPES, sniff
from chalicelib.imaging import render  # noqa: F401 (registers the HEIF and AVIF writers)
from tests.client.fakes import FakeApi, FakeTime, accepted
from tests.images import bigtiff, photo

PHOTOS = sorted(p for p in Path(skimage.data.__file__).parent.iterdir()
                if p.suffix in {".png", ".jpg", ".gif", ".tif"})


def encoded(fmt: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), (200, 120, 40)).save(out, fmt)
    return out.getvalue()


def ftyp(major: bytes, *compatible: bytes, size=None) -> bytes:
    body = major + b"\0\0\0\0" + b"".join(compatible)
    return struct.pack(">I", size or 8 + len(body)) + b"ftyp" + body + b"\0" * 16


CRAFTED = {
    "bigtiff little-endian": b"II+\x00" + b"\0" * 12,
    "bigtiff big-endian": b"MM\x00+" + b"\0" * 12,
    "tiff big-endian": b"MM\x00*" + b"\0" * 10,
    "avif among brands": ftyp(b"mif1", b"mif1", b"avif"),
    "heic among brands": ftyp(b"mif1", b"heic"),
    "avif preferred to an earlier heic": ftyp(b"mif1", b"heic", b"avif"),
    "heic preferred to an earlier heif": ftyp(b"msf1", b"mif1", b"hevc"),
    "the major brand first": ftyp(b"heix", b"avif"),
    "a sequence": ftyp(b"avis", b"msf1"),
    "heif alone": ftyp(b"mif1", b"mif1"),
    "a brand past byte 64": ftyp(b"mif1", *[b"iso8"] * 14, b"avif"),
    "a box over 4096 bytes": ftyp(b"avif", size=5000),
    "a box under 16 bytes": ftyp(b"avif", size=12),
    "a truncated box": b"\0\0\0\x10ftyp",
    "an mp4 video": ftyp(b"isom", b"mp41"),
    "riff but not webp": b"RIFF\0\0\0\0WAVEfmt ",
    "too short for a jpeg": b"\xff\xd8",
    "text": b"hello, this is text, not an image\n",
    "svg": b"<svg xmlns='http://www.w3.org/2000/svg'/>",
    "nothing": b"",
}


@pytest.mark.parametrize("path", PHOTOS, ids=lambda p: p.name)
def test_the_photographs_get_the_server_s_type(path):
    data = path.read_bytes()
    assert guess_type(data) == sniff(data)
    jpeg = photo(path.name) if path.suffix in {".png", ".jpg"} else None
    if jpeg is not None:
        assert guess_type(jpeg) == sniff(jpeg) == "image/jpeg"


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "GIF", "WEBP", "TIFF", "AVIF", "HEIF", "BMP"])
def test_every_format_encoded_gets_the_server_s_type(fmt):
    data = encoded(fmt)
    assert guess_type(data) == sniff(data)
    assert sniff(data) in ALLOWED_TYPES or fmt == "BMP"


def test_a_bigtiff_scan_gets_the_server_s_type():
    data = bigtiff()
    assert guess_type(data) == sniff(data) == "image/tiff"


@pytest.mark.parametrize("data", CRAFTED.values(), ids=CRAFTED.keys())
def test_crafted_headers_get_the_server_s_type(data):
    assert guess_type(data) == sniff(data)


@pytest.mark.parametrize("data", [bigtiff(), CRAFTED["a brand past byte 64"] + b"\0" * 100,
                                  CRAFTED["avif preferred to an earlier heic"]],
                         ids=["bigtiff", "a brand past byte 64", "avif preferred"])
def test_the_client_labels_the_body_it_sends_with_the_server_s_type(data):
    """From the whole file's bytes, so a brand past the first 64 bytes still counts."""
    api = FakeApi(FakeTime()).on("POST", "/api/v1/images", accepted())
    api.client().upload(data)
    (request,) = api.sent()
    assert request.headers["Content-Type"] == sniff(data) != OCTET_STREAM
