"""A perceptual hash of a job's picture (`phash`), with Pillow alone (no numpy in Lambda).

The DCT hash of Zauner's pHash as `imagehash.phash` computes it (its tests compare the two):
the picture in grey at 32x32 (Lanczos), its 2-D DCT-II, the 8x8 lowest frequencies, each bit
set where the coefficient is above their median; row by row, the first the highest bit, as
16 hex characters. imagehash itself needs numpy and scipy: some 220 MB unzipped, near all of
a Lambda package's 250 MB. Here only the 8 lowest frequencies of each axis are computed, some
ten thousand products of Python floats: a millisecond or two on the decoded image.
"""
from __future__ import annotations

import math
import statistics
from operator import mul

from PIL import Image

_SIDE = 32  # the grey image's side
_KEEP = 8  # the lowest frequencies kept on each axis: 64 bits
# cos(pi * k * (2n + 1) / 2N): DCT-II's basis, its constant factors left out (they scale
# every coefficient of one axis alike, and the bits only compare coefficients).
_BASIS = [[math.cos(math.pi * k * (2 * n + 1) / (2 * _SIDE)) for n in range(_SIDE)] for k in range(_KEEP)]


def phash(im: Image.Image) -> str:
    """64 bits as 16 lowercase hex characters."""
    grey = im.convert("L").resize((_SIDE, _SIDE), Image.Resampling.LANCZOS)
    pixels = list(grey.get_flattened_data())
    rows = [pixels[y * _SIDE:(y + 1) * _SIDE] for y in range(_SIDE)]
    # Along each row, then down each of the _KEEP columns that remain.
    # map(mul): the same products summed in the same order as a generator's, at C speed.
    along = [[sum(map(mul, basis, row)) for basis in _BASIS] for row in rows]
    low = [[sum(b * along[n][u] for n, b in enumerate(basis)) for u in range(_KEEP)] for basis in _BASIS]
    flat = [c for row in low for c in row]
    median = statistics.median(flat)
    bits = 0
    for c in flat:
        bits = (bits << 1) | (c > median)
    return f"{bits:016x}"


def distance(a: str, b: str) -> int:
    """The Hamming distance of two hashes: how many of the 64 bits differ."""
    return bin(int(a, 16) ^ int(b, 16)).count("1")
