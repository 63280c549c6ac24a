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
    return Reference(reference).ssim(coded)


class Reference:
    """The uncoded image's own window statistics, made once: each coding compared with it
    (the JPEG, then each try of a variant) computes only its own and the joint ones."""

    def __init__(self, im: Image.Image):
        self.size = im.size
        width, height = im.size
        self._blocks = (max(1, width // _BLOCK), max(1, height // _BLOCK))
        self._channels = [self._prepare(x.convert("F")) for x in im.convert("RGB").split()]

    def ssim(self, coded: Image.Image) -> float:
        if coded.size != self.size:
            raise ValueError("SSIM compares images of one size")
        planes = coded.convert("RGB").split()
        return sum(self._channel(x, stats, self._prepare_coded(y.convert("F")))
                   for (x, stats), y in zip(self._channels, planes)) / 3

    def _prepare_coded(self, y: Image.Image) -> Image.Image:
        if min(self._blocks) < 2:
            return y
        return y.crop((0, 0, self._blocks[0] * _BLOCK, self._blocks[1] * _BLOCK))

    def _prepare(self, x: Image.Image) -> tuple[Image.Image, list[Image.Image]]:
        """The plane (cropped to whole blocks) and the statistics of x and x²."""
        if min(self._blocks) < 2:
            return x, [_mean(x), _mean(_product(x, x))]
        x = x.crop((0, 0, self._blocks[0] * _BLOCK, self._blocks[1] * _BLOCK))
        return x, [_windows(im.reduce(_BLOCK)) for im in (x, _product(x, x))]

    def _channel(self, x: Image.Image, stats: list[Image.Image], y: Image.Image) -> float:
        if min(self._blocks) < 2:  # too small for two windows: the whole image is the one window
            mx, mxx = stats
            moments = [_mean(y), _mean(_product(y, y)), _mean(_product(x, y))]
            return _formula(mx, moments[0], mxx, moments[1], moments[2]).getpixel((0, 0))
        my, myy, mxy = [_windows(im.reduce(_BLOCK)) for im in (y, _product(y, y), _product(x, y))]
        return _mean(_formula(stats[0], my, stats[1], myy, mxy)).getpixel((0, 0))


def _product(p: Image.Image, q: Image.Image) -> Image.Image:
    return ImageMath.lambda_eval(lambda a: a["p"] * a["q"], p=p, q=q)


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
