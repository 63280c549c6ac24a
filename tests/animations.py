"""Animated sources made from real photographs (scikit-image's): frames panned and zoomed
across a photo, as GIF, WebP or APNG, with the delays and loop count given."""
from __future__ import annotations

import io
from collections.abc import Iterator, Sequence

from PIL import Image

from tests.images import photo_image

# Pillow's writer names per kind of animated file.
KINDS = {"gif": "GIF", "webp": "WEBP", "apng": "PNG"}


def panned(frames: int, size: tuple[int, int], name: str = "coffee.png") -> Iterator[Image.Image]:
    """`frames` frames of `size`, each a window of the photo a little further along and a
    little closer, so that no two frames are the same (nor merged by an encoder)."""
    photo = photo_image(name)
    width, height = size
    for i in range(frames):
        zoom = 1.0 - 0.3 * i / max(1, frames - 1)
        w, h = min(photo.width, round(photo.width * zoom)), min(photo.height, round(photo.height * zoom))
        left = round((photo.width - w) * i / max(1, frames - 1))
        top = round((photo.height - h) * (frames - 1 - i) / max(1, frames - 1))
        yield photo.crop((left, top, left + w, top + h)).resize(size, Image.Resampling.BILINEAR)


def animated(kind: str = "gif", frames: int = 6, size: tuple[int, int] = (240, 160),
             durations: Sequence[int] | int = 80, loop: int = 0, name: str = "coffee.png",
             mode: str = "RGB") -> bytes:
    """An animated file of `kind` (gif, webp, apng). `loop` as Pillow's writers take it: for
    GIF the NETSCAPE repeat count (0 forever), for WebP and APNG the plays (0 forever)."""
    images = [im.convert(mode) for im in panned(frames, size, name)]
    if kind == "gif" and mode == "RGB":
        # Each frame's own palette, found by Pillow's fast octree: its GIF writer would
        # find it by median cut, 50 times the CPU (100 frames of 480x360: 17 s against 0.2).
        images = [im.quantize(256, method=Image.Quantize.FASTOCTREE) for im in images]
    out = io.BytesIO()
    options = {"lossless": True} if kind == "webp" else {}
    images[0].save(out, KINDS[kind], save_all=True, append_images=images[1:], duration=durations,
                   loop=loop, **options)
    return out.getvalue()


def frames_of(data: bytes) -> list[tuple[Image.Image, int]]:
    """Every frame of an animated file, composited (RGBA), with its delay in ms."""
    found = []
    with Image.open(io.BytesIO(data)) as im:
        for index in range(getattr(im, "n_frames", 1)):
            im.seek(index)
            im.load()
            found.append((im.convert("RGBA"), int(im.info.get("duration") or 0)))
    return found
