"""Photo-like test images made in code: a sky, a sun, hills; grain to make one large."""
from __future__ import annotations

import functools
import io
import random

from PIL import Image, ImageDraw, ImageFilter


def landscape(width: int, height: int, sky=(255, 170, 90), hills=(40, 90, 70), seed: int = 1,
              grain: int = 0, quality: int = 88) -> bytes:
    rng = random.Random(seed)
    top, bottom = (40, 60, 140), sky
    image = Image.linear_gradient("L").resize((width, height))
    image = Image.merge("RGB", [image.point(lambda v, a=a, b=b: a + (b - a) * v // 255)
                                for a, b in zip(top, bottom)])
    draw = ImageDraw.Draw(image)
    r = height // 7
    cx, cy = int(width * rng.uniform(.25, .75)), int(height * .45)
    draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=(255, 236, 180))
    for layer in range(3):
        shade = tuple(max(0, c - 25 * layer) for c in hills)
        base = int(height * (.6 + .12 * layer))
        points = [(0, height)] + [(x, base - int(height * .1 * rng.random()))
                                  for x in range(0, width + width // 8, width // 8)] + [(width, height)]
        draw.polygon(points, fill=shade)
    image = image.filter(ImageFilter.GaussianBlur(max(1, width // 800)))
    if grain:
        noise = Image.effect_noise((width, height), grain).convert("RGB")
        image = Image.blend(image, noise, 0.25)
    out = io.BytesIO()
    image.save(out, "JPEG", quality=quality)
    return out.getvalue()


@functools.lru_cache(maxsize=None)
def large_landscape(min_bytes: int) -> bytes:
    """Over min_bytes (the API's upload limit): the page sends it straight to storage."""
    data = landscape(4000, 3000, sky=(250, 120, 140), hills=(60, 70, 120), seed=3, grain=60, quality=95)
    assert len(data) > min_bytes, len(data)
    return data
