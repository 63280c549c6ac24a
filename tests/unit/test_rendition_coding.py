"""How renditions are coded: progressive JPEG with optimised Huffman tables, which stores the
very same pixels as a baseline JPEG of the same quality in fewer bytes."""
from __future__ import annotations

import io
import random

import pytest
from PIL import Image, ImageChops, ImageFilter

from chalicelib.domain.renditions import RenditionName
from chalicelib.imaging.render import Coding, _from_pillow, _output, make_renditions

QUALITY = 85


def photo(size: tuple[int, int], seed: int) -> Image.Image:
    """Smooth colour fields with fine grain: codes like a photo, unlike a flat test card."""
    rnd = random.Random(seed)
    small = Image.new("RGB", (8, 6))
    small.putdata([tuple(rnd.randrange(256) for _ in range(3)) for _ in range(48)])
    base = small.resize(size, Image.BICUBIC)
    grain = Image.effect_noise(size, 20).convert("RGB")
    return Image.blend(base, grain, 0.1).filter(ImageFilter.SMOOTH)


def baseline(im: Image.Image) -> bytes:
    out = io.BytesIO()
    im.save(out, "JPEG", quality=QUALITY)
    return out.getvalue()


def pixels(data: bytes) -> Image.Image:
    im = Image.open(io.BytesIO(data))
    im.load()
    return im


@pytest.mark.parametrize("name, size", [(RenditionName.DISPLAY, (1280, 960)),
                                        (RenditionName.THUMB, (256, 256))])
def test_coding_keeps_every_pixel_of_baseline_in_fewer_bytes(name, size):
    for seed in range(3):
        im = photo(size, seed)
        out = _output(name, _from_pillow(im), Coding(jpeg_quality=QUALITY))
        reference = baseline(im)
        assert pixels(out.data).info.get("progressive") == 1
        # Lossless re-coding of the same quantised coefficients: not one pixel differs.
        assert ImageChops.difference(pixels(out.data), pixels(reference)).getbbox() is None
        assert len(out.data) < 0.97 * len(reference)


def test_both_renditions_leave_make_renditions_progressive():
    source = io.BytesIO()
    photo((2000, 1500), seed=7).save(source, "JPEG", quality=92)
    for out in make_renditions(source.getvalue(), 50_000_000, quality=QUALITY).values():
        im = pixels(out.data)
        assert im.format == "JPEG" and im.info.get("progressive") == 1
