"""The placeholder an app paints before a rendition arrives: a BlurHash and the average colour.

BlurHash (https://blurha.sh), not ThumbHash: its decoders are the ones each platform already
ships or has a maintained package for (Wolt's Swift and Kotlin ones, react-native-blurhash,
expo-image, the `blurhash` npm package), and its encoder here is a maintained pure-Python
package on PyPI with a decoder beside it (the tests decode what we make). Its one lack, the
aspect ratio, every ready job gives as the renditions' width and height; the numbers of
components follow that aspect, so the blur is not stretched.
"""
from __future__ import annotations

import blurhash
from PIL import Image

from chalicelib.domain.jobs import Placeholder

# The side of the image the hash is computed from: the hash keeps a few cosines only (four
# along a side: eight samples resolve them), and the pure-Python encoder's cost grows with
# the pixels (at 32 a side it was 4 ms of a job's CPU, at 16 one).
_SOURCE_SIDE = 16
# Components along the longer side (BlurHash allows 1 to 9): 4 is its authors' default.
_COMPONENTS = 4


def make_placeholder(im: Image.Image, size: tuple[int, int] | None = None) -> Placeholder:
    """The placeholder of an RGB image (the largest rendition, before it is coded), from it or
    from a smaller copy of it (the focus's: a fraction of the reduce) with the image's `size`,
    whose aspect the components follow."""
    small = im.copy()
    small.thumbnail((_SOURCE_SIDE, _SOURCE_SIDE), Image.Resampling.BOX)
    # The mean of the box means: the image's own within a unit (each box holds about as
    # many pixels), for a tenth of the CPU of averaging every pixel again.
    average = small.resize((1, 1), Image.Resampling.BOX).getpixel((0, 0))
    width, height = small.size
    pixels = list(small.get_flattened_data())
    rows = [pixels[y * width:(y + 1) * width] for y in range(height)]
    x, y = components(*(size or im.size))
    return Placeholder(blurhash=blurhash.encode(rows, x, y), average_color="#%02x%02x%02x" % average[:3])


def components(width: int, height: int) -> tuple[int, int]:
    """(x, y) components in the image's aspect, _COMPONENTS along the longer side."""
    short = max(1, min(_COMPONENTS, round(_COMPONENTS * min(width, height) / max(width, height))))
    return (_COMPONENTS, short) if width >= height else (short, _COMPONENTS)
