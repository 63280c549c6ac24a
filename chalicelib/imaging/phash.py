"""A perceptual hash of a job's picture (`phash`).

The DCT hash of Zauner's pHash as `imagehash.phash` computes it (its tests compare the two):
the picture in grey at 32x32 (Lanczos), its 2-D DCT-II, the 8x8 lowest frequencies, each bit
set where the coefficient is above their median; row by row, the first the highest bit, as
16 hex characters. imagehash itself needs scipy (near all of a Lambda package's 250 MB with
the rest); only the 8 lowest frequencies of each axis are needed, two small matrix products
with numpy (which the focus already loads): the grey copy and its resample are the cost.
"""
from __future__ import annotations

import numpy as np
from PIL import Image

_SIDE = 32  # the grey image's side
_KEEP = 8  # the lowest frequencies kept on each axis: 64 bits
# cos(pi * k * (2n + 1) / 2N): DCT-II's basis, its constant factors left out (they scale
# every coefficient of one axis alike, and the bits only compare coefficients).
_BASIS = np.cos(np.pi * np.arange(_KEEP)[:, None] * (2 * np.arange(_SIDE)[None, :] + 1) / (2 * _SIDE))


def phash(im: Image.Image) -> str:
    """64 bits as 16 lowercase hex characters."""
    grey = im.convert("L").resize((_SIDE, _SIDE), Image.Resampling.LANCZOS)
    pixels = np.asarray(grey, dtype=np.float64)
    # Along each row, then down each of the _KEEP columns that remain: (vertical, horizontal).
    low = _BASIS @ (pixels @ _BASIS.T)
    # Rounded: a coefficient that is zero (a flat picture, or one mirrored along an axis) comes
    # out as rounding's noise, a few 1e-11 either side, and must compare with the median as
    # the zero imagehash's DCT gives. Real coefficients differ by far more than 1e-6.
    low = np.round(low, 6)
    bits = 0
    for bit in (low > np.median(low)).ravel().tolist():
        bits = (bits << 1) | bit
    return f"{bits:016x}"


def distance(a: str, b: str) -> int:
    """The Hamming distance of two hashes: how many of the 64 bits differ."""
    return bin(int(a, 16) ^ int(b, 16)).count("1")
