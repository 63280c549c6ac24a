"""Decode an uploaded image and make its renditions: pure, bytes in, bytes out.

One module on purpose: the steps below form one decode pipeline whose
order matters for speed and safety (header checks, shrink-on-load decode, orientation, colour).

Safety: the format is decided by magic bytes only (chalicelib/domain/sniff.py), and the pixel
count and decode limits are checked from the header by Pillow before any pixel is decoded.
Every decoding failure becomes a DomainError with a fixed, safe detail (never a library message).

Two engines, one for each kind of file, never both on one: libvips (pyvips, with the libvips
that pyvips-binary bundles) decodes, resizes and codes as JPEG every format it reads (JPEG,
PNG, GIF, WebP, TIFF, AVIF): it decodes a JPEG shrunk on load by libjpeg (1/2 to 1/8), reduces
with a box filter before one Lanczos pass to each size, and streams the other formats, for
about two thirds of Pillow's CPU (benchmarks/worker_cpu.py). Pillow (pillow-heif) decodes
HEIC/HEIF only, which pyvips-binary's libheif cannot (it has no HEVC decoder); its decode is
then handed to libvips for the renditions. Pillow also codes the WebP and AVIF variants and
measures their SSIM (the quality search below), and makes the placeholder and the pHash.

Speed: the image is decoded once, to the largest rendition's box; all colour work (alpha,
ICC, orientation) happens on that small image, and every other rendition (the thumbnail) is
cut from it, not from the original.

Output: progressive RGB JPEG with optimised Huffman tables, 4:2:0, and the same pixels in
each extra format asked for (WebP, AVIF 4:2:0) at a quality that looks at least as good as
the JPEG (its SSIM against the uncoded pixels at least the JPEG's) where such a file is
smaller than the JPEG, with no metadata at all (no EXIF, XMP, comment or ICC profile). Pixels are converted to sRGB first, so a viewer's untagged = sRGB
assumption is right. Beside them, the placeholder (chalicelib/imaging/placeholder.py).
"""
from __future__ import annotations

import hashlib
import math
import io
import struct
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import pillow_heif
from PIL import Image, ImageCms

from chalicelib.config import Settings
from chalicelib.domain.errors import ImageTooLarge, InvalidImage, UnsupportedFormat
from chalicelib.domain.focus import Focus, focus_at, square_window
from chalicelib.domain.jobs import Placeholder
from chalicelib.domain.renditions import ALWAYS, Fit, RenditionFormat, RenditionName, RenditionSpec, rendition_specs
from chalicelib.domain.sniff import ALLOWED_TYPES, PIL_FORMATS, sniff
from chalicelib.domain.source import Source
from chalicelib.imaging.facts import read_facts
from chalicelib.imaging.limits import DecodeLimits
from chalicelib.imaging.limits import check as check_limits
from chalicelib.imaging.placeholder import make_placeholder
from chalicelib.imaging.timeline import timeline_of
from chalicelib.imaging.similarity import Reference

pillow_heif.register_heif_opener()

# EXIF Orientation value -> the transpose that displays the image upright.
_ORIENTATION_TAG = 0x0112
_TRANSPOSE: dict[int, Image.Transpose] = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}

# After libjpeg's DCT scaling the remaining downscale is small (< 2x); there BICUBIC
# matched LANCZOS against a full-decode LANCZOS reference (same RMS error) at 70% of
# the cost (benchmarks/resize.py).
_RESAMPLE = Image.Resampling.BICUBIC
# Images more than this many times larger than the target are first box-reduced by an
# integer factor (cheap), then resampled; 2.0 is Pillow's own quality/speed compromise.
_REDUCING_GAP = 2.0

# Decoding errors Pillow and its plugins raise on truncated or malformed data.
_DECODE_ERRORS = (
    OSError,
    ValueError,
    SyntaxError,
    EOFError,
    struct.error,
    IndexError,
    KeyError,
    RuntimeError,
    ZeroDivisionError,
)

_SRGB = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB"))


@dataclass(frozen=True)
class ImageInfo:
    content_type: str
    width: int
    height: int
    source: Source


@dataclass(frozen=True)
class Output:
    name: RenditionName
    data: bytes  # the JPEG
    width: int
    height: int
    content_type: str
    # The same pixels in the extra formats, each where it beats the JPEG (as_good_as).
    variants: dict[RenditionFormat, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class Rendered:
    renditions: dict[RenditionName, Output]
    placeholder: Placeholder
    phash: str  # chalicelib/imaging/phash.py, of the decoded picture
    focus: Focus  # what the square renditions were placed around (the client's, or found)


@dataclass(frozen=True)
class Coding:
    """Each format's coding (the settings of chalicelib/config.py, whose defaults are these)."""

    jpeg_quality: int = Settings.jpeg_quality
    webp_quality: int = Settings.webp_quality
    avif_quality: int = Settings.avif_quality
    avif_speed: int = Settings.avif_speed

    @classmethod
    def of(cls, settings: Settings) -> "Coding":
        return cls(settings.jpeg_quality, settings.webp_quality, settings.avif_quality, settings.avif_speed)

    def quality_of(self, fmt: RenditionFormat) -> int:
        return getattr(self, f"{fmt.value}_quality")

    def at(self, fmt: RenditionFormat, quality: int) -> "Coding":
        """This coding with fmt's quality changed."""
        return replace(self, **{f"{fmt.value}_quality": quality})


# -------------------------------------------------------------------------- inspect


def inspect(data: bytes, max_pixels: int, limits: DecodeLimits = DecodeLimits()) -> ImageInfo:
    """Sniff (UnsupportedFormat if not allowed), read only the header (InvalidImage if
    Pillow cannot), and check width*height <= max_pixels (ImageTooLarge) before any
    pixel decoding. Width/height are as stored (before EXIF orientation); TIFF and
    HEIF report them upright because their decoders apply orientation themselves
    (HEIF's 'irot'/'imir' boxes; the EXIF tag is ignored there by specification).
    The decode limits are checked from the structure too (ImageTooComplex)."""
    im, content_type = _open(data, max_pixels, limits)
    with im:
        timeline = timeline_of(data, content_type, limits.max_frames + 1)
        return ImageInfo(content_type, im.width, im.height, read_facts(im, content_type, len(data), timeline))


def facts_of(data: bytes) -> Source | None:
    """The original's facts (chalicelib/imaging/facts.py) from its header, or None when it is
    no image of an allowed type or its header cannot be read. No limit is checked: a job that
    fails on one (too many pixels, say) still says what it was sent."""
    content_type = sniff(data)
    if content_type not in ALLOWED_TYPES:
        return None
    try:
        with _decoding(), Image.open(io.BytesIO(data), formats=[PIL_FORMATS[content_type]]) as im:
            timeline = timeline_of(data, content_type, DecodeLimits().max_frames + 1)
            return read_facts(im, content_type, len(data), timeline)
    except (ImageTooLarge, InvalidImage):
        return None


@contextmanager
def _decoding() -> Iterator[None]:
    """Map every decoder failure to a DomainError with a safe, fixed detail.

    Pillow's decompression-bomb warning is escalated too, so Image.MAX_IMAGE_PIXELS
    (~89 MP) is a hard ceiling on top of max_pixels. catch_warnings is process-global:
    fine for Lambda's one request at a time.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            yield
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ImageTooLarge("The image has too many pixels.") from None
    except _DECODE_ERRORS:
        raise InvalidImage("The image could not be decoded.") from None
    except Exception as error:
        if _vips_module is None or not isinstance(error, _vips_module.Error):
            raise
        # libvips' own allocation failures (vips_tracked_malloc, libjpeg's and libspng's
        # "insufficient memory"): past the child's memory ceiling, as Pillow's MemoryError.
        if any(words in str(error).lower() for words in ("out of memory", "insufficient memory")):
            raise MemoryError from None
        raise InvalidImage("The image could not be decoded.") from None


def _open(data: bytes, max_pixels: int, limits: DecodeLimits) -> tuple[Image.Image, str]:
    """Open lazily (header only) and enforce the type, pixel and decode limits."""
    content_type = sniff(data)
    if content_type not in ALLOWED_TYPES:
        raise UnsupportedFormat("The file is not a supported image type.")
    with _decoding():
        im = Image.open(io.BytesIO(data), formats=[PIL_FORMATS[content_type]])
    width, height = im.size
    if width <= 0 or height <= 0:
        im.close()
        raise InvalidImage("The image has no pixels.")
    if width * height > max_pixels:
        im.close()
        raise ImageTooLarge(
            f"The image is {width}x{height} pixels; at most {max_pixels} pixels are allowed."
        )
    try:
        with _decoding():
            check_limits(im, data, content_type, limits)
    except Exception:
        im.close()
        raise
    return im, content_type


# ------------------------------------------------------------------------ renditions


# The renditions every job has, at the default settings; the worker passes the job's own.
_ALWAYS_SPECS = tuple(spec for spec in rendition_specs(Settings()) if spec.name in ALWAYS)


def make_renditions(
    data: bytes,
    max_pixels: int,
    specs: Sequence[RenditionSpec] = _ALWAYS_SPECS,
    quality: int = Settings.jpeg_quality,
    limits: DecodeLimits = DecodeLimits(),
) -> dict[RenditionName, Output]:
    """{name: output} for each spec, in the specs' order. Raises UnsupportedFormat /
    InvalidImage / ImageTooLarge / ImageTooComplex. Only the first frame of an animation or a
    multi-page file is decoded.

    A "contain" rendition fits inside its box and is never upscaled. A "cover" one is exactly
    its box, cut from the largest rendition around the focus (_cover); when that is smaller
    than the box on a side the crop is upscaled to fill it.
    """
    return make_images(data, max_pixels, specs, Coding(jpeg_quality=quality), limits).renditions


def make_images(
    data: bytes,
    max_pixels: int,
    specs: Sequence[RenditionSpec] = _ALWAYS_SPECS,
    coding: Coding = Coding(),
    limits: DecodeLimits = DecodeLimits(),
    formats: Sequence[RenditionFormat] = (),
    focus: Focus | None = None,
) -> Rendered:
    """make_renditions, each rendition also coded in `formats` (the extra ones), the
    placeholder, the perceptual hash and the focus: one decode for them all. `focus` is the
    client's (upright coordinates); without one it is found on the decoded, upright picture
    (chalicelib/imaging/focus.py)."""
    # Imported here: numpy is theirs alone, and the processes that only read headers (the API,
    # the worker around its decoding child) never load it (some 0.13 CPU-s of each cold start).
    # The child loads them in prepare(), before its memory is counted.
    from chalicelib.imaging import focus as focus_finder
    from chalicelib.imaging.phash import phash

    im, content_type = _open(data, max_pixels, limits)
    box = max(spec.box for spec in specs)
    with im, _decoding():
        if content_type in LIBVIPS_READS:
            icc = im.info.get("icc_profile")
            # Converted when Pillow's reading of the header finds an RGB profile that is
            # usable and not sRGB, the rule of the Pillow path (_srgb_transform).
            converts = bool(icc) and _srgb_transform(icc, "RGB") is not None
            largest = _vips_decode_within(data, box, converts)
        else:
            largest = _from_pillow(_decode_within(im, box))
        picture = pixels_of(largest)  # for what Pillow computes: the pHash of the whole picture
        small = focus_finder.small(picture)  # and a small copy: the focus, the placeholder
        if focus is None:
            found = focus_finder.find(small)
            focus = focus_at(found.x, found.y, found.source)
        hints: dict = {}  # each format's quality for the last rendition: the next one's first guess
        outputs = {spec.name: _output(spec.name, _shape(largest, spec, focus), coding, formats, hints)
                   for spec in specs}
        return Rendered(outputs, make_placeholder(small, picture.size), phash(picture), focus)


# How renditions are made, named: a change that makes other pixels or bytes of the same
# original (an engine, a resampler, an encoder's settings) takes a new one, so that the
# duplicate index (chalicelib/usecases/duplicates.py) never copies an older job's renditions.
# "libvips-1": libvips decodes, resizes and codes the JPEGs (was Pillow's, unnamed).
PIPELINE = "libvips-1"

# What libvips decodes here (pyvips-binary's loaders); every other allowed type is HEIC/HEIF,
# which its libheif cannot decode (no HEVC decoder is bundled): Pillow with pillow-heif does.
LIBVIPS_READS = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp", "image/tiff", "image/avif"})


def _shape(largest, spec: RenditionSpec, focus: Focus):
    """The spec's rendition, cut from the largest one (itself when it is the largest)."""
    if spec.fit is Fit.COVER:
        return _cover(largest, spec.box, _cover_window(largest.width, largest.height, focus))
    target = _fit((largest.width, largest.height), spec.box)
    if target == (largest.width, largest.height):
        return largest
    return _resized(largest, target)


def _cover_window(width: int, height: int, focus: Focus) -> tuple[int, int, int, int]:
    """Where a cover rendition is cut from the largest one (width x height): (left, top,
    width, height) of the square around the focus (chalicelib/domain/focus.py, square_window),
    in whole pixels."""
    left, top, right, bottom = square_window(width, height, focus)
    side = min(width, height)
    return min(width - side, round(left)), min(height - side, round(top)), side, side


def _cover(im, size: int, window: tuple[int, int, int, int]):
    """The window of im scaled to size x size (upscaled if smaller): the one place a cover
    rendition's crop is applied, to a still (libvips) or an animation's frame (Pillow)."""
    left, top, width, height = window
    if isinstance(im, Image.Image):
        return _resized_pillow(im, (size, size), (left, top, left + width, top + height))
    return _resized(im.crop(left, top, width, height), (size, size))


def _resized(im, size: tuple[int, int]):
    """im scaled to size: every resample of a rendition after the decode. libvips shrinks by
    a box filter to within twice the size, then one Lanczos-3 pass (its `gap` of 2.0); an
    animation's frames (Pillow's) the same way with Pillow's."""
    if (im.width, im.height) == size:
        return im
    if isinstance(im, Image.Image):
        return _resized_pillow(im, size)
    return im.resize(size[0] / im.width, vscale=size[1] / im.height)


# ---------------------------------------------------------------- libvips


_vips_module = None


def prepare():
    """Load libvips and set it up for the decoding child; the pyvips module. Called when the
    child starts (chalicelib/imaging/sandbox_child.py), so its libraries are loaded, its
    threads started and its first job's one-off costs paid before its memory ceiling is
    counted and before the first call."""
    global _vips_module
    if _vips_module is None:
        # One thread: the decoding child's CPU limit counts every thread, a Lambda's fraction
        # of a core gains nothing from more, and the concurrency must be set before libvips starts.
        import os

        os.environ.setdefault("VIPS_CONCURRENCY", "1")
        import pyvips

        pyvips.concurrency_set(1)
        # No operation cache: it would keep one upload's pixels for the next, and each
        # rendition is made once.
        pyvips.cache_set_max(0)
        # Only the loaders of trusted, fuzzed libraries (no ImageMagick, PDF, MATLAB...): the
        # type is sniffed before, this is the floor under it.
        pyvips.block_untrusted_set(True)
        # libvips runs a pipeline on threads of its own, started on first use and kept for
        # the next: started now, their stacks are not counted against a call's memory
        # ceiling (past it a thread cannot start, and every call would fail).
        _vips_module = pyvips
        # And a first small job through every step, so that the first real one finds each
        # operation introspected and each codec loaded (a cold Lambda's first job).
        tiny = pyvips.Image.black(96, 64, bands=3).jpegsave_buffer(Q=50)
        make_images(tiny, 96 * 64, rendition_specs(Settings()))
    return _vips_module


def _vips_decode_within(data: bytes, box: int, converts: bool = False):
    """Decode (a JPEG shrunk on load) to an upright sRGB RGB image within box x box, in
    memory; `converts`: from its embedded RGB profile to sRGB.

    Loaded and resized here step by step rather than by libvips' thumbnail_buffer, which does
    the same for some 60 % more CPU on a 12 MP JPEG (49 ms against 31, decode and resize:
    benchmarks/worker_cpu.py's yardstick is thumbnail_buffer)."""
    vips = prepare()
    # fail_on: a truncated or corrupt file fails, as Pillow's decode does, instead of being
    # padded with grey. Sequential: the loader streams rows to the resize, so a PNG or TIFF
    # is never held whole.
    image = vips.Image.new_from_buffer(data, "", access="sequential", fail_on="truncated")
    target = _fit((image.width, image.height), box)
    if image.get("vips-loader") == "jpegload_buffer":
        # libjpeg's DCT scaling: the largest 1/2, 1/4 or 1/8 still at least the target.
        shrink = next((s for s in (8, 4, 2) if image.width // s >= target[0] and image.height // s >= target[1]), 1)
        # unlimited: libvips' own cap on progressive scans stays off, so that the decode
        # limits' max_scans (chalicelib/imaging/limits.py, checked before) is the one rule,
        # and the child's CPU limit bounds what it lets through (image_too_complex).
        image = vips.Image.jpegload_buffer(data, shrink=shrink, access="sequential", fail_on="truncated",
                                           unlimited=True)
    if image.hasalpha():
        # Onto white (JPEG has no alpha), before the resample: the same as resampling
        # premultiplied pixels and flattening after.
        image = image.flatten(background=[255] * (image.bands - 1))
    # One resample to the target: a box shrink to within twice it, then Lanczos-3.
    image = _resized(image, target)
    if image.interpretation == "cmyk":
        # By its embedded profile, or libvips' own CMYK profile when it carries none;
        # relative colorimetric, as libvips' thumbnail converts CMYK (its CMYK profile's
        # perceptual tables clip a print red to (232, 0, 0)).
        image = image.icc_transform("srgb", input_profile="cmyk", embedded=True)
    elif converts and image.interpretation == "srgb":
        # Perceptual, as Pillow's ImageCms.buildTransform (the HEIC path) converts.
        image = image.icc_transform("srgb", embedded=True, intent="perceptual")
    if image.bands != 3 or image.format != "uchar" or image.interpretation != "srgb":
        image = image.colourspace("srgb")  # grey, 16 bits a channel: 8-bit RGB
    if image.bands > 3:
        image = image.extract_band(0, n=3)
    # Decoded once, here (libvips evaluates lazily, and each rendition would decode again);
    # then the EXIF orientation, on the small image in memory (a sequential read cannot turn).
    image = image.copy_memory()
    if image.get_typeof("orientation") and image.get("orientation") not in (0, 1):
        image = image.autorot().copy_memory()
    return image


def _from_pillow(im: Image.Image):
    """An RGB Pillow image as a libvips one (a copy of its pixels)."""
    vips = prepare()
    return vips.Image.new_from_memory(im.tobytes(), im.width, im.height, 3, "uchar").copy(interpretation="srgb")


def pixels_of(image) -> Image.Image:
    """A libvips RGB image's pixels as a Pillow image (a copy)."""
    return Image.frombuffer("RGB", (image.width, image.height), image.write_to_memory(), "raw", "RGB", 0, 1)


def _decode_within(im: Image.Image, box: int) -> Image.Image:
    """Decode (shrunk on load when possible) to an upright sRGB RGB image within box."""
    target = _fit(im.size, box)
    crop = None
    if target != im.size:
        # JPEG decodes at the largest 1/2^n scale still >= target; HEIF may pick an
        # embedded thumbnail that is at least as big. Other formats ignore this.
        drafted = im.draft("RGB", target)
        crop = drafted[1] if drafted else None
    im.load()
    orientation = _orientation(im)
    icc = im.info.get("icc_profile")

    small = _reduced_by_bands(im, target) if crop is None else None
    if small is not None:
        im.close()  # its decoded pixels: what follows works on the reduced copy
    small = _to_resizable_mode(small or im)
    if target != small.size:
        small = _resized_pillow(small, target, crop)
    small = _flatten(small)
    small = _to_srgb(small, icc)
    if orientation in _TRANSPOSE:
        small = small.transpose(_TRANSPOSE[orientation])
    small.info = {}  # nothing (EXIF, XMP, comment, ICC, dpi) may reach the encoder
    return small


# Rows of the reduced image made from one band of the decoded one.
_BAND_ROWS = 64


def _reduced_by_bands(im: Image.Image, target: tuple[int, int]) -> Image.Image | None:
    """What resize's reducing_gap step would make (reduce by the integer factor that leaves
    at least _REDUCING_GAP times the target), a band of rows at a time, or None when no
    reduction applies. A whole-image conversion (RGBA to premultiplied for the resampler,
    palette or 16-bit grey to 8 bits a channel) is a second full-size copy; a band's is
    small, so the decode's peak is the decoded image itself (benchmarks/decode_memory.py)."""
    width, height = im.size
    factor = int(min(width / target[0], height / target[1]) / _REDUCING_GAP)
    if factor < 2:
        return None
    band = factor * _BAND_ROWS  # a multiple of the factor: blocks never straddle two bands
    reduced = None
    for top in range(0, height, band):
        part = _to_resizable_mode(im.crop((0, top, width, min(top + band, height)))).reduce(factor)
        if reduced is None:
            reduced = Image.new(part.mode, (-(-width // factor), -(-height // factor)))
        reduced.paste(part, (0, top // factor))
    return reduced


def _fit(size: tuple[int, int], box: int) -> tuple[int, int]:
    """Largest size with the same aspect inside box x box, never bigger than size.

    The box is square, so fitting the stored size also fits the rotated one.
    """
    width, height = size
    scale = min(1.0, box / max(width, height))
    return max(1, round(width * scale)), max(1, round(height * scale))


def _orientation(im: Image.Image) -> int:
    """EXIF Orientation (1 when absent or unreadable: a broken EXIF is not fatal)."""
    try:
        value = im.getexif().get(_ORIENTATION_TAG, 1)
    except _DECODE_ERRORS:
        return 1
    return value if isinstance(value, int) else 1


def _to_resizable_mode(im: Image.Image) -> Image.Image:
    """A mode Pillow resamples correctly: RGB, RGBA, L, LA or CMYK (8 bits a channel).

    Transparency (palette, tRNS key) becomes real alpha so it can be flattened later.
    """
    mode = im.mode
    if mode in ("RGB", "L", "CMYK") and "transparency" not in im.info:
        return im
    if mode in ("RGBA", "LA"):
        return im
    if mode == "La":
        return im.convert("LA")
    if im.has_transparency_data:
        return im.convert("RGBA")
    if mode.startswith("I"):  # I;16, I;16B, I: 16-bit grey; keep the top 8 bits
        return im.convert("I").point(lambda v: v * (1 / 256)).convert("L")
    if mode in ("1", "F"):
        return im.convert("L")
    return im.convert("RGB")


def _flatten(im: Image.Image) -> Image.Image:
    """Composite alpha onto white (JPEG has no alpha)."""
    if im.mode not in ("RGBA", "LA"):
        return im
    base = Image.new(im.mode[:-1], im.size, "white")  # RGBA -> RGB, LA -> L
    base.paste(im, mask=im.getchannel("A"))
    return base


def _to_srgb(im: Image.Image, icc: bytes | None) -> Image.Image:
    """RGB pixels in sRGB. The embedded profile is honoured unless it is sRGB already
    or unusable (then the pixels are taken as they are)."""
    transform = _srgb_transform(icc, im.mode) if icc else None
    if transform is not None:
        return transform.apply(im)
    return im if im.mode == "RGB" else im.convert("RGB")


# Cameras and phones share a few small profiles; anything large or odd is built per image,
# so that one user's uploads cannot pin memory in a worker that serves everyone.
_CACHED_PROFILE_BYTES = 64 * 1024


_CACHED_PROFILES = 16
_transforms: OrderedDict[tuple[bytes, str], ImageCms.ImageCmsTransform | None] = OrderedDict()
_transforms_lock = threading.Lock()


def _srgb_transform(icc: bytes, mode: str) -> ImageCms.ImageCmsTransform | None:
    """Cached by the profile's digest, at most _CACHED_PROFILES small profiles."""
    if len(icc) > _CACHED_PROFILE_BYTES:
        return _build_srgb_transform(icc, mode)
    key = (hashlib.sha256(icc).digest(), mode)
    with _transforms_lock:
        if key in _transforms:
            _transforms.move_to_end(key)
            return _transforms[key]
    transform = _build_srgb_transform(icc, mode)
    with _transforms_lock:
        _transforms[key] = transform
        while len(_transforms) > _CACHED_PROFILES:
            _transforms.popitem(last=False)
    return transform


def _build_srgb_transform(icc: bytes, mode: str) -> ImageCms.ImageCmsTransform | None:
    """Building one costs milliseconds; None when the profile is sRGB or unusable."""
    expected_space = {"RGB": "RGB ", "L": "GRAY", "CMYK": "CMYK"}.get(mode)
    try:
        profile = ImageCms.ImageCmsProfile(io.BytesIO(icc))
        info = profile.profile
        if info.xcolor_space != expected_space:
            return None
        if mode == "RGB" and "srgb" in (info.profile_description or "").lower():
            return None  # already sRGB: skip the per-pixel work
        return ImageCms.buildTransform(profile, _SRGB, mode, "RGB")
    except (ImageCms.PyCMSError, OSError, ValueError, TypeError):
        return None


def _resized_pillow(im: Image.Image, size: tuple[int, int], box=None) -> Image.Image:
    """Pillow's resample: a HEIC/HEIF decode to the largest rendition's size (libvips
    cannot read those files; what follows is libvips'), and an animation's frames."""
    return im.resize(size, _RESAMPLE, box=box, reducing_gap=_REDUCING_GAP)


def _output(name: RenditionName, image, coding: Coding,
            formats: Sequence[RenditionFormat] = (), hints: dict | None = None) -> Output:
    """One rendition (a libvips image) coded. hints: each format's quality chosen for this
    image's previous rendition, the first guess for this one (the same picture at another
    size wants about the same); updated."""
    jpeg = _jpeg(image, coding)
    extras = [fmt for fmt in formats if fmt is not RenditionFormat.JPEG]
    variants = {}
    hints = {} if hints is None else hints
    if extras:
        im = pixels_of(image)
        reference = Reference(im)  # the uncoded pixels' statistics, once for every comparison
        target = reference.ssim(_decoded(jpeg, RenditionFormat.JPEG))
        for fmt in extras:
            chosen = as_good_as(im, fmt, coding, target, len(jpeg), reference, hints.get(fmt))
            if chosen is not None:
                variants[fmt] = chosen.data
                hints[fmt] = chosen.quality
    return Output(name, jpeg, image.width, image.height, "image/jpeg", variants)


# How much a variant's SSIM rises per quality step, about, where photos need it (WebP
# 88-96, AVIF 70-90; benchmarks/renditions.py): the first jump from a miss is the SSIM it
# lacks over this, a little less than most images need, so that it seldom overshoots.
_SSIM_PER_QUALITY = {RenditionFormat.WEBP: 0.002, RenditionFormat.AVIF: 0.0015}


# The worker's SSIM and scikit-image's (the benchmark's judge) differ by a few 1e-4: with
# qualities one apart, a variant just over the target by one was just under it by the other
# (-0.0002 on one of 35, benchmarks/renditions.py); this much over keeps both.
_MARGIN = 0.0005

# SSIM does not rise strictly with quality: a step up can lose a little (a dip), so a miss
# just below a pass may have a pass under it. A miss by less than this is such a suspect, and
# the quality under it is tried too. On benchmarks/renditions.py's photos one dip hid a pass
# (WebP, a miss by 0.0004); the deeper ones there lay far from the JPEG's SSIM.
_DIP = 0.0005

# A bound on one search's tries, never reached on the benchmark's images: it ends with the
# lowest passing quality found so far.
_MOST_ENCODES = 14


@dataclass(frozen=True)
class Choice:
    quality: int
    data: bytes
    encodes: int  # the tries it took (the floor is one)


def as_good_as(im: Image.Image, fmt: RenditionFormat, coding: Coding, target: float,
               jpeg_bytes: int, reference: Reference | None = None,
               guess: int | None = None) -> Choice | None:
    """The variant at the lowest quality, from the configured one up, that passes: its SSIM
    (chalicelib/imaging/similarity.py) at least `target`, the JPEG's, and its file smaller
    than the JPEG. No one quality does that for every image without costing more bytes than
    the JPEG on many (benchmarks/renditions.py). None when no quality passes: then the JPEG
    is the better file, and the rendition has no variant in this format.

    What it guarantees: the quality chosen passes, and the one below it was tried and fails
    (unless the chosen one is the configured one); where that one missed by less than _DIP,
    the one below it was tried and fails too. Where SSIM rises with quality, that is the
    lowest that passes; where it dips deeper just under the boundary, a lower one can pass
    too, which benchmarks/renditions.py --formats measures against a scan of every quality.

    Each try costs an encode, a decode and an SSIM, so the search aims rather than steps: it
    starts at `guess` (the previous rendition's); from a miss it jumps by what the SSIM lacks
    (_SSIM_PER_QUALITY), then by the slope of its own last two misses (a secant), and from
    two misses the growth of their bytes caps the next try (_worth_trying: most of the
    CPU went on images that end with no variant, on encodes sure to be too large); a file
    too large halves the way back down, once. From a pass it comes down by the SSIM's
    surplus over the slope of its last two tries (or between the highest miss and the
    lowest pass), until a miss lies right under the lowest pass."""
    search = _Search(coding.quality_of(fmt), target + _MARGIN, _SSIM_PER_QUALITY[fmt], jpeg_bytes)
    reference = reference or Reference(im)
    quality: int | None = min(100, max(search.lowest, guess or search.lowest))
    encodes = 0
    while quality is not None and encodes < _MOST_ENCODES:
        encodes += 1
        data = encode(im, fmt, coding.at(fmt, quality))
        score = None if len(data) >= jpeg_bytes else reference.ssim(_decoded(data, fmt))
        quality = search.next_after(quality, score, data)
    if search.passed is None:
        return None
    quality, _, data = search.passed
    return Choice(quality, data, encodes)


class _Search:
    """The state of one search: what was tried, and the quality to try next."""

    def __init__(self, lowest: int, goal: float, slope: float, jpeg_bytes: int):
        self.lowest, self._goal, self._slope, self._jpeg_bytes = lowest, goal, slope, jpeg_bytes
        self.passed: tuple[int, float, bytes] | None = None  # the lowest pass: quality, SSIM, file
        self._scored: list[tuple[int, float]] = []  # each try whose SSIM was measured, in order
        # Each quality that failed: its SSIM (None: too large, known only below a pass).
        self._misses: dict[int, float | None] = {}
        self._big = 101  # the lowest quality whose file is not smaller than the JPEG
        self._last: tuple[int, float, int] | None = None  # the last miss going up: quality, SSIM, bytes
        self._halved = False

    def next_after(self, quality: int, score: float | None, data: bytes) -> int | None:
        """Take one try's outcome (score None: the file is not smaller than the JPEG's) and
        answer the quality to try next, None when the search is over."""
        if score is not None:
            self._scored.append((quality, score))
        if score is not None and score >= self._goal:
            if self.passed is None or quality < self.passed[0]:
                self.passed = (quality, score, data)
            return self._down()
        if self.passed is not None:  # below the lowest pass: the boundary is above it
            self._misses[quality] = score
            return self._down()
        if score is None:
            return self._from_too_large(quality)
        return self._up(quality, score, len(data))

    def _fails(self, below: int = 101) -> int:
        """The highest quality known to fail under `below` (lowest - 1 when none)."""
        return max((q for q in self._misses if q < below), default=self.lowest - 1)

    def _down(self) -> int | None:
        top, top_score, _ = self.passed
        fails = self._fails(top)
        fail_score = self._misses.get(fails)
        if top - fails <= 1:
            # The boundary, unless it is a dip: a miss by less than SSIM can fall in one step
            # may have a pass just under it.
            probe = fails - 1
            if (probe >= self.lowest and probe not in self._misses and fail_score is not None
                    and self._goal - fail_score < _DIP):
                return probe
            return None
        # Down by the SSIM's surplus over the slope of the last two tries (the curve bends,
        # so the latest is the best guess), else between the miss and the pass.
        slope = self._recent_slope()
        if slope is None:
            slope = self._slope if fail_score is None else (top_score - fail_score) / (top - fails)
        guess = top - math.floor((top_score - self._goal) / slope)
        return min(top - 1, max(fails + 1, guess))

    def _recent_slope(self) -> float | None:
        """The SSIM per quality step between the last two tries scored, if it rose."""
        if len(self._scored) < 2:
            return None
        (q0, s0), (q1, s1) = self._scored[-2:]
        slope = (s1 - s0) / (q1 - q0) if q1 != q0 else 0.0
        return slope if slope > 0 else None

    def _from_too_large(self, quality: int) -> int | None:
        # Higher qualities are larger still. A guess above the configured quality may come
        # down; after a miss, one halving back is tried, no more: a variant that is just
        # under the JPEG's size is seldom worth the encodes to find it.
        fails = self._fails()
        if self._halved or (self._last is None and quality == self.lowest):
            return None
        self._halved, self._big = self._last is not None, quality
        quality = self.lowest if self._last is None else (fails + self._big) // 2
        return None if quality <= fails else quality

    def _up(self, quality: int, score: float, size: int) -> int | None:
        miss = (quality, score, size)
        slope, cap = self._slope, 100
        last = self._last
        if last is not None and score > last[1] and quality > last[0]:
            slope = (score - last[1]) / (quality - last[0])
            cap = _worth_trying(last, miss, self._jpeg_bytes)
            if cap <= quality:
                return None
        self._last = miss
        self._misses[quality] = score
        quality = min(cap, quality + max(1, math.ceil((self._goal - score) / slope)))
        if quality >= self._big:
            quality = (self._fails() + self._big) // 2
        return None if quality <= self._fails() else quality


def _worth_trying(low: tuple, high: tuple, jpeg_bytes: int) -> int:
    """The highest quality whose file may still be smaller than the JPEG, by the growth of
    the bytes between two misses, (quality, SSIM, bytes) each: bytes grow ever faster with
    quality (benchmarks/renditions.py), so at a higher one they are at least what that
    growth gives. 100 where a step left the bytes as they were (AVIF's are coarse)."""
    (q0, _, b0), (q1, _, b1) = low, high
    if b1 <= b0:
        return 100
    per_step = math.log(b1 / b0) / (q1 - q0)
    return min(100, q1 + math.floor(math.log(jpeg_bytes / b1) / per_step))


def _decoded(data: bytes, fmt: RenditionFormat) -> Image.Image:
    with Image.open(io.BytesIO(data), formats=[fmt.name]) as coded:
        return coded.convert("RGB")


def _jpeg(image, coding: Coding) -> bytes:
    """A libvips RGB image as the rendition's JPEG: libvips' jpegsave, with no metadata."""
    vips = prepare()
    # Progressive scans with optimised Huffman tables code the very same quantised
    # coefficients (identical pixels) in 6-7 % fewer bytes on photos, and clients can show
    # the image while it loads. Coding costs ~4x baseline's, some 10-15 ms of a job
    # (benchmarks/renditions.py): a rendition is coded once and downloaded many times.
    # subsample_mode on: 4:2:0 at every quality (libvips' auto keeps 4:4:4 from 90 up).
    return image.jpegsave_buffer(Q=coding.jpeg_quality, optimize_coding=True, interlace=True,
                                 subsample_mode="on", keep=vips.enums.ForeignKeep.NONE)


def encode(im: Image.Image, fmt: RenditionFormat, coding: Coding) -> bytes:
    """One rendition's pixels (RGB) in one format. No exif/icc_profile/comment/xmp arguments
    and an empty info: nothing is copied into any of them."""
    buf = io.BytesIO()
    if fmt is RenditionFormat.JPEG:
        return _jpeg(_from_pillow(im.convert("RGB")), coding)
    elif fmt is RenditionFormat.WEBP:
        # method 4 is libwebp's default: 6 saves ~1 % for twice the CPU (benchmarks/renditions.py).
        im.save(buf, "WEBP", quality=coding.webp_quality, method=4)
    else:
        # One thread: the decoding child's CPU limit counts every thread, and a worker's
        # fraction of a core gains nothing from more.
        im.save(buf, "AVIF", quality=coding.avif_quality, speed=coding.avif_speed,
                subsampling="4:2:0", max_threads=1)
    return buf.getvalue()
