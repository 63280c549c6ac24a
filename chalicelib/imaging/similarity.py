"""SSIM of a coded rendition against its uncoded pixels, with Pillow alone (no numpy in Lambda).

Windows of 8x8 pixels every 4 pixels, as libaom and libvpx compute SSIM, per RGB channel,
averaged: each window's means, variances and covariance come from 4x4 block means
(Image.reduce on float images, exact sums in C), four neighbouring blocks making a window.
scikit-image's 7x7 sliding windows (the benchmark's judge) give close figures; the worker
uses this one because it runs inside the decode child, in milliseconds, without numpy.
"""
from __future__ import annotations

from PIL import Image, ImageMath

# Wang et al.'s constants for 8-bit samples: (0.01 * 255)^2, (0.03 * 255)^2.
_C1 = (0.01 * 255) ** 2
_C2 = (0.03 * 255) ** 2
_BLOCK = 4  # a window is 2x2 blocks: 8x8 pixels, one every 4


def ssim(reference: Image.Image, coded: Image.Image) -> float:
    """Mean SSIM of two RGB images of one size, 1.0 when identical."""
    if reference.size != coded.size:
        raise ValueError("SSIM compares images of one size")
    channels = zip(reference.convert("RGB").split(), coded.convert("RGB").split())
    return sum(_channel(x.convert("F"), y.convert("F")) for x, y in channels) / 3


def _channel(x: Image.Image, y: Image.Image) -> float:
    width, height = x.size
    blocks = (max(1, width // _BLOCK), max(1, height // _BLOCK))
    if min(blocks) < 2:  # too small for two windows: the whole image is the one window
        stats = [_mean(im) for im in _moments(x, y)]
        return _formula(*stats).getpixel((0, 0))
    box = (0, 0, blocks[0] * _BLOCK, blocks[1] * _BLOCK)
    x, y = x.crop(box), y.crop(box)
    means = [im.reduce(_BLOCK) for im in _moments(x, y)]
    windows = [_windows(im) for im in means]
    ssim_map = _formula(*windows)
    return _mean(ssim_map).getpixel((0, 0))


def _moments(x: Image.Image, y: Image.Image) -> list[Image.Image]:
    """x, y, x², y², xy: their block means make a window's statistics."""
    return [x, y] + [ImageMath.lambda_eval(lambda a: a["p"] * a["q"], p=p, q=q)
                     for p, q in ((x, x), (y, y), (x, y))]


def _windows(blocks: Image.Image) -> Image.Image:
    """The mean of each 2x2 group of neighbouring block means: one 8x8 window each."""
    width, height = blocks.size
    parts = [blocks.crop((dx, dy, width - 1 + dx, height - 1 + dy)) for dx in (0, 1) for dy in (0, 1)]
    return ImageMath.lambda_eval(lambda a: (a["a"] + a["b"] + a["c"] + a["d"]) / 4,
                                 a=parts[0], b=parts[1], c=parts[2], d=parts[3])


def _mean(im: Image.Image) -> Image.Image:
    """One pixel: the image's mean."""
    return im.reduce(im.size)


def _formula(mx, my, mxx, myy, mxy) -> Image.Image:
    return ImageMath.lambda_eval(
        lambda a: ((2 * a["mx"] * a["my"] + _C1) * (2 * (a["mxy"] - a["mx"] * a["my"]) + _C2))
        / ((a["mx"] * a["mx"] + a["my"] * a["my"] + _C1)
           * (a["mxx"] - a["mx"] * a["mx"] + a["myy"] - a["my"] * a["my"] + _C2)),
        mx=mx, my=my, mxx=mxx, myy=myy, mxy=mxy)
