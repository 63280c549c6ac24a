"""Unit tests for chalicelib.imaging.render. All inputs are generated here; no binary fixtures."""
from __future__ import annotations

import io
import resource
import struct
import time
import zlib

import pytest
from PIL import Image, ImageCms, ImageStat, JpegImagePlugin

from chalicelib.config import Settings
from chalicelib.domain.errors import ImageTooLarge, InvalidImage, UnsupportedFormat
from chalicelib.domain.focus import Focus, FocusSource
from chalicelib.domain.renditions import RenditionName, rendition_specs
from chalicelib.domain.sniff import ALLOWED_TYPES, sniff
from chalicelib.imaging import render
from chalicelib.imaging.render import inspect, make_renditions
from tests.images import ADOBE_PRIMARIES, SRGB_PRIMARIES, rgb_icc_profile

LIMIT = 50_000_000
RED, GREEN, BLUE, WHITE = (255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255)


# ------------------------------------------------------------------------- helpers


def encode(im: Image.Image, fmt: str, **options) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **options)
    return buf.getvalue()


def solid(colour, size=(64, 48), mode="RGB") -> Image.Image:
    return Image.new(mode, size, colour)


def sized(display_box: int, thumb_box: int):
    """The display and the thumb at these boxes."""
    return rendition_specs(Settings(display_box=display_box, thumb_box=thumb_box))[:2]


def decoded(data: bytes) -> Image.Image:
    im = Image.open(io.BytesIO(data))
    im.load()
    return im


def mean(im: Image.Image) -> tuple[float, ...]:
    return tuple(ImageStat.Stat(im.convert("RGB")).mean)


def close(actual, expected, tolerance=12) -> bool:
    return all(abs(a - e) <= tolerance for a, e in zip(actual, expected, strict=True))


def ftyp(major: bytes, *compatible: bytes) -> bytes:
    body = major + b"\0\0\0\0" + b"".join(compatible)
    return struct.pack(">I", 8 + len(body)) + b"ftyp" + body + b"\0" * 16


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_header_only(width: int, height: int) -> bytes:
    """A valid PNG header claiming width x height RGB over a few bytes of pixel data."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", ihdr)
        + png_chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + png_chunk(b"IEND", b"")
    )


# --------------------------------------------------------------------------- sniff

SOURCE = solid((200, 120, 40))


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("JPEG", "image/jpeg"),
        ("PNG", "image/png"),
        ("GIF", "image/gif"),
        ("WEBP", "image/webp"),
        ("TIFF", "image/tiff"),
        ("AVIF", "image/avif"),
        ("HEIF", "image/heic"),  # pillow_heif writes HEVC-coded HEIC
    ],
)
def test_sniff_real_files(fmt, expected):
    assert sniff(encode(SOURCE, fmt)) == expected
    assert expected in ALLOWED_TYPES


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"GIF87a" + b"\0" * 10, "image/gif"),
        (b"MM\x00*" + b"\0" * 10, "image/tiff"),
        (b"II*\x00" + b"\0" * 10, "image/tiff"),
        (ftyp(b"avis", b"msf1"), "image/avif"),
        (ftyp(b"mif1", b"mif1", b"avif"), "image/avif"),
        (ftyp(b"mif1", b"heic"), "image/heic"),
        (ftyp(b"heix", b"mif1"), "image/heic"),
        (ftyp(b"msf1", b"hevc"), "image/heic"),
        (ftyp(b"mif1", b"mif1"), "image/heif"),
        (ftyp(b"msf1", b"iso8"), "image/heif"),
    ],
)
def test_sniff_crafted_headers(data, expected):
    assert sniff(data) == expected


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xff\xd8",  # too short to be a JPEG
        b"hello, this is text, not an image\n",
        b"<svg xmlns='http://www.w3.org/2000/svg'/>",
        bytes(range(256)),
        b"RIFF\0\0\0\0WAVEfmt ",  # RIFF but not WebP
        ftyp(b"isom", b"mp41"),  # an MP4 video
        b"\0\0\0\x10ftyp",  # truncated box
        encode(SOURCE, "BMP"),  # a real image, but not an allowed type
    ],
)
def test_sniff_rejects_other_bytes(data):
    assert sniff(data) is None


# ------------------------------------------------------------------------- inspect


def test_inspect_reads_type_and_stored_size():
    exif = Image.Exif()
    exif[0x0112] = 6
    data = encode(solid(RED, (300, 100)), "JPEG", exif=exif.tobytes())
    info = inspect(data, LIMIT)
    assert (info.content_type, info.width, info.height) == ("image/jpeg", 300, 100)


@pytest.mark.parametrize("data", [b"", b"plain text", encode(SOURCE, "BMP")])
def test_inspect_unsupported(data):
    with pytest.raises(UnsupportedFormat):
        inspect(data, LIMIT)
    with pytest.raises(UnsupportedFormat):
        make_renditions(data, LIMIT)


@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xd8\xff" + b"\x13\x37" * 100,
        b"\x89PNG\r\n\x1a\n" + b"garbage" * 20,
        b"RIFF\0\0\0\0WEBPVP8 garbage",
        ftyp(b"heic", b"mif1"),
    ],
)
def test_inspect_garbage_behind_magic_is_invalid(data):
    with pytest.raises(InvalidImage) as caught:
        inspect(data, LIMIT)
    assert caught.value.code == "invalid_image"


def test_pixel_limit_checked_from_header_before_decoding():
    data = png_header_only(8000, 8000)  # 64 MP claimed over ~100 bytes
    # Under a big enough limit the header alone is read: no decode, so no error yet.
    info = inspect(data, 100_000_000)
    assert (info.content_type, info.width, info.height) == ("image/png", 8000, 8000)
    with pytest.raises(ImageTooLarge) as caught:
        inspect(data, 10_000_000)
    assert "8000x8000" in caught.value.detail
    # If make_renditions decoded first it would fail on the missing pixels (InvalidImage).
    with pytest.raises(ImageTooLarge):
        make_renditions(data, 10_000_000)


def test_decompression_bomb_rejected_fast_without_memory_blow_up():
    bomb = png_header_only(100_000, 100_000)  # 10 gigapixels = 30 GB of RGB
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    for _ in range(3):
        with pytest.raises(ImageTooLarge):
            inspect(bomb, LIMIT)
        with pytest.raises(ImageTooLarge):
            make_renditions(bomb, 10**12)  # Pillow's own bomb guard still applies
    assert time.perf_counter() - start < 1.0
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 50 * 1024


@pytest.mark.parametrize("side", [40, 120])  # 1600 px: Pillow warns; 14400 px: Pillow errors
def test_pillow_bomb_warning_and_error_become_image_too_large(monkeypatch, side):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    data = encode(solid(RED, (side, side)), "PNG")
    with pytest.raises(ImageTooLarge):
        make_renditions(data, LIMIT)


# ---------------------------------------------------------------- invalid pixel data


def test_truncated_jpeg_is_invalid_with_safe_detail():
    full = encode(Image.effect_noise((400, 300), 50).convert("RGB"), "JPEG")
    with pytest.raises(InvalidImage) as caught:
        make_renditions(full[: len(full) // 2], LIMIT)
    error = caught.value
    assert error.code == "invalid_image"
    assert error.detail and "truncated" not in error.detail.lower()
    assert error.__suppress_context__  # the library exception is not chained


@pytest.mark.parametrize("fmt", ["PNG", "WEBP", "HEIF", "AVIF"])
def test_truncated_other_formats_are_invalid(fmt):
    full = encode(Image.effect_noise((200, 150), 50).convert("RGB"), fmt)
    with pytest.raises(InvalidImage):
        make_renditions(full[: len(full) * 2 // 3], LIMIT)


# ---------------------------------------------------------------------- renditions


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "GIF", "TIFF", "AVIF", "HEIF"])
def test_every_input_format_gives_display_and_thumb_jpegs(fmt):
    colour = (200, 120, 40)
    display, thumb = make_renditions(encode(solid(colour, (1600, 800)), fmt), LIMIT).values()

    assert (display.name, display.width, display.height) == ("display", 1280, 640)
    assert (thumb.name, thumb.width, thumb.height) == ("thumb", 256, 256)
    for out in (display, thumb):
        assert out.content_type == "image/jpeg"
        assert sniff(out.data) == "image/jpeg"
        im = decoded(out.data)
        assert (im.format, im.mode, im.size) == ("JPEG", "RGB", (out.width, out.height))
        assert close(mean(im), colour, tolerance=16), (fmt, mean(im))


@pytest.mark.parametrize(
    ("size", "display_size"),
    [
        ((800, 600), (800, 600)),  # fits already: never upscaled
        ((1280, 1280), (1280, 1280)),
        ((3000, 1000), (1280, 427)),
        ((1000, 3000), (427, 1280)),
        ((100, 50), (100, 50)),
    ],
)
def test_display_fits_box_keeps_aspect_never_upscales(size, display_size):
    display, thumb = make_renditions(encode(solid(BLUE, size), "PNG"), LIMIT).values()
    assert (display.width, display.height) == display_size
    assert decoded(display.data).size == display_size
    # The thumb is always exactly thumb_box square, upscaled for tiny sources.
    assert (thumb.width, thumb.height) == (256, 256)
    assert decoded(thumb.data).size == (256, 256)


def test_custom_sizes_and_quality():
    data = encode(Image.effect_noise((900, 600), 60).convert("RGB"), "PNG")
    display, thumb = make_renditions(data, LIMIT, specs=sized(300, 64), quality=95).values()
    assert (display.width, display.height, thumb.width, thumb.height) == (300, 200, 64, 64)
    low, _ = make_renditions(data, LIMIT, specs=sized(300, 64), quality=30).values()
    assert len(low.data) < len(display.data)


@pytest.mark.parametrize("size", [(1200, 400), (400, 1200)])
def test_thumb_around_a_centre_focus_is_a_centre_crop(size):
    """Red outer thirds, green middle third: the square around the centre is all green
    (tests/unit/test_focus_in_jobs.py places squares around other points)."""
    im = solid(RED, size)
    width, height = size
    if width > height:
        band = (width // 3, 0, 2 * width // 3, height)
    else:
        band = (0, height // 3, width, 2 * height // 3)
    im.paste(GREEN, band)
    centre = Focus(0.5, 0.5, FocusSource.CLIENT)
    thumb = render.make_images(encode(im, "PNG"), LIMIT, focus=centre).renditions[RenditionName.THUMB]
    out = decoded(thumb.data)
    assert close(mean(out), GREEN, tolerance=10)
    for corner in [(2, 2), (253, 2), (2, 253), (253, 253)]:
        assert close(out.getpixel(corner), GREEN, tolerance=40)


def test_thumb_is_cut_from_display_not_original(monkeypatch):
    seen: list[tuple[int, int]] = []
    real_cover = render._cover

    def spy(im, size, focus):
        seen.append(im.size)
        return real_cover(im, size, focus)

    monkeypatch.setattr(render, "_cover", spy)
    display, _ = make_renditions(encode(solid(RED, (2400, 1600)), "JPEG"), LIMIT).values()
    assert seen == [(display.width, display.height)] == [(1280, 853)]


def _draft_sizes(monkeypatch) -> list[tuple[int, int]]:
    sizes: list[tuple[int, int]] = []
    real_draft = JpegImagePlugin.JpegImageFile.draft

    def spy(self, mode, size):
        result = real_draft(self, mode, size)
        sizes.append(self.size)
        return result

    monkeypatch.setattr(JpegImagePlugin.JpegImageFile, "draft", spy)
    return sizes


@pytest.mark.parametrize(
    ("size", "decoded_size"),
    [
        ((2600, 1300), (1300, 650)),  # 1/2 scale still covers 1280x640
        ((8000, 6000), (2000, 1500)),  # 48 MP decoded at 1/4 scale: ~9 MB, not 144 MB
        ((1000, 800), None),  # no shrink needed: no draft
    ],
)
def test_jpeg_is_shrunk_on_load(monkeypatch, size, decoded_size):
    sizes = _draft_sizes(monkeypatch)
    data = encode(solid((90, 160, 220), size), "JPEG", quality=50)
    display, _ = make_renditions(data, LIMIT).values()
    assert sizes == ([decoded_size] if decoded_size else [])
    assert max(display.width, display.height) == min(1280, max(size))


# --------------------------------------------------------------------- orientation


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "TIFF", "AVIF", "HEIF"])
def test_exif_orientation_6_is_applied(fmt):
    """Stored landscape with a red marker top-left; Orientation=6 means 'rotate 90° CW
    to view', so the output is portrait with the marker top-right."""
    im = solid(BLUE, (400, 200))
    im.paste(RED, (0, 0, 60, 60))
    exif = Image.Exif()
    exif[0x0112] = 6
    # As bytes: pillow_heif then writes the rotation as an 'irot' box, which is what
    # HEIF readers (libheif) honour; HEIF ignores the EXIF tag by specification.
    display, _ = make_renditions(encode(im, fmt, exif=exif.tobytes()), LIMIT).values()
    assert (display.width, display.height) == (200, 400)
    out = decoded(display.data)
    assert out.size == (200, 400)
    assert close(out.getpixel((190, 10)), RED, tolerance=30)
    assert close(out.getpixel((10, 10)), BLUE, tolerance=30)
    assert close(out.getpixel((190, 390)), BLUE, tolerance=30)
    assert 0x0112 not in out.getexif()


# ------------------------------------------------------------------------ metadata


def test_all_metadata_is_stripped():
    exif = Image.Exif()
    exif[0x0112] = 1
    exif[0x010F] = "SecretCam"  # Make
    gps = exif.get_ifd(0x8825)
    gps[1], gps[2] = "N", (51.0, 30.0, 0.0)
    srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    data = encode(
        solid(RED, (320, 240)),
        "JPEG",
        exif=exif,
        icc_profile=srgb,
        comment=b"secret comment",
        xmp=b"<x:xmpmeta xmlns:x='adobe:ns:meta/'>secret</x:xmpmeta>",
    )
    source = decoded(data)
    assert source.getexif().get_ifd(0x8825) and "comment" in source.info  # sanity

    for out in make_renditions(data, LIMIT).values():
        im = decoded(out.data)
        assert not im.getexif()
        assert not im.getexif().get_ifd(0x8825)
        for key in ("exif", "icc_profile", "comment", "xmp"):
            assert key not in im.info
        markers = (b"Exif\0\0", b"ICC_PROFILE", b"http://ns.adobe.com/xap", b"secret", b"SecretCam")
        for marker in markers:
            assert marker not in out.data
        assert close(im.getpixel((5, 5)), RED)


def test_non_srgb_icc_profile_is_converted():
    """A profile whose red and green primaries are swapped: pixels stored as pure red
    mean sRGB green, so a converter must output green (an ignorer outputs red)."""
    swapped = rgb_icc_profile("Swapped RG", SRGB_PRIMARIES[1], SRGB_PRIMARIES[0], SRGB_PRIMARIES[2])
    data = encode(solid(RED, (200, 100)), "PNG", icc_profile=swapped)
    for out in make_renditions(data, LIMIT).values():
        im = decoded(out.data)
        assert "icc_profile" not in im.info
        assert close(mean(im), GREEN, tolerance=10)


def test_adobe_rgb_like_profile_matches_littlecms_conversion():
    adobe = rgb_icc_profile("Adobe RGB-like", *ADOBE_PRIMARIES)
    colour = (60, 160, 90)
    source = solid(colour, (200, 100))
    source.info["icc_profile"] = adobe
    expected = ImageCms.profileToProfile(
        source, ImageCms.ImageCmsProfile(io.BytesIO(adobe)), ImageCms.createProfile("sRGB")
    ).getpixel((0, 0))
    assert not close(expected, colour, tolerance=15)  # the conversion is visible

    display, _ = make_renditions(encode(source, "JPEG", quality=95, icc_profile=adobe), LIMIT).values()
    assert close(mean(decoded(display.data)), expected, tolerance=6)


@pytest.mark.parametrize(
    "icc",
    [ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes(), b"not an icc profile"],
    ids=["srgb", "corrupt"],
)
def test_srgb_or_unusable_profile_keeps_pixels(icc):
    data = encode(solid((200, 120, 40), (200, 100)), "JPEG", quality=95, icc_profile=icc)
    display, _ = make_renditions(data, LIMIT).values()
    im = decoded(display.data)
    assert "icc_profile" not in im.info
    assert close(mean(im), (200, 120, 40), tolerance=4)


# ---------------------------------------------------------------- modes and alpha


def _half_transparent(mode: str) -> Image.Image:
    """Left half transparent *black*, right half opaque blue."""
    if mode == "P":  # palette index 0 is the transparent colour
        im = Image.new("P", (200, 100), 0)
        im.putpalette([0, 0, 0, 0, 0, 255])
        im.paste(1, (100, 0, 200, 100))
        im.info["transparency"] = 0
        return im
    im = Image.new("RGBA", (200, 100), (0, 0, 0, 0))
    im.paste((0, 0, 255, 255), (100, 0, 200, 100))
    return im.convert(mode)


@pytest.mark.parametrize(
    ("mode", "fmt", "opaque"),
    [
        ("RGBA", "PNG", BLUE),
        ("RGBA", "WEBP", BLUE),
        ("RGBA", "AVIF", BLUE),
        ("LA", "PNG", (18, 18, 18)),  # blue as grey
        ("P", "PNG", BLUE),
        ("P", "GIF", BLUE),
    ],
)
def test_transparency_is_flattened_on_white(mode, fmt, opaque):
    data = encode(_half_transparent(mode), fmt)
    assert Image.open(io.BytesIO(data)).has_transparency_data  # sanity
    for out in make_renditions(data, LIMIT, specs=sized(200, 100)).values():
        im = decoded(out.data)
        width, height = im.size
        assert close(im.getpixel((3, height // 2)), WHITE, tolerance=20), (mode, fmt)
        assert close(im.getpixel((width - 4, height // 2)), opaque, tolerance=30), (mode, fmt)


def test_animated_gif_uses_first_frame():
    frames = [solid(RED, (120, 80)), solid(BLUE, (120, 80)), solid(GREEN, (120, 80))]
    data = encode(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    assert Image.open(io.BytesIO(data)).n_frames == 3  # sanity
    for out in make_renditions(data, LIMIT).values():
        assert close(mean(decoded(out.data)), RED)


def test_cmyk_jpeg_becomes_rgb():
    data = encode(solid((0, 255, 255, 0), (300, 200), "CMYK"), "JPEG", quality=95)
    assert Image.open(io.BytesIO(data)).mode == "CMYK"  # sanity
    display, _ = make_renditions(data, LIMIT).values()
    im = decoded(display.data)
    assert im.mode == "RGB"
    assert close(mean(im), RED)


@pytest.mark.parametrize(
    ("im", "fmt", "expected"),
    [
        (solid(128, mode="L"), "JPEG", (128, 128, 128)),
        (solid(1, mode="1"), "PNG", WHITE),
        (solid(200 * 256, mode="I;16"), "PNG", (200, 200, 200)),  # 16-bit grey scaled down
        (solid(200 * 256, mode="I;16"), "TIFF", (200, 200, 200)),
        (solid((200, 120, 40), mode="RGB").convert("P"), "PNG", (200, 120, 40)),
        (solid((200, 120, 40), mode="RGB").convert("YCbCr"), "JPEG", (200, 120, 40)),
    ],
    ids=["L", "1", "I;16-png", "I;16-tiff", "P", "YCbCr"],
)
def test_other_modes_become_rgb(im, fmt, expected):
    for out in make_renditions(encode(im, fmt), LIMIT).values():
        out_im = decoded(out.data)
        assert out_im.mode == "RGB"
        assert close(mean(out_im), expected, tolerance=8), mean(out_im)


@pytest.mark.parametrize("mode", ["RGBA", "LA", "P", "I;16", "RGB"])
def test_the_banded_reduction_matches_reducing_the_whole_image(mode):
    from PIL import ImageChops

    from chalicelib.imaging.render import _reduced_by_bands, _to_resizable_mode

    noise = Image.effect_noise((1500, 1100), 90).convert("L")
    if mode in ("RGBA", "LA"):
        im = Image.merge("RGBA", [noise, noise.rotate(90), noise.transpose(Image.Transpose.FLIP_LEFT_RIGHT),
                                  noise.rotate(180)]).convert(mode)
    elif mode == "P":
        im = noise.convert("RGB").convert("P")
        im.info["transparency"] = 3
    else:
        im = noise.convert(mode)
    banded = _reduced_by_bands(im, (256, 188))
    whole = _to_resizable_mode(im).reduce(2)
    assert banded.mode == whole.mode and banded.size == whole.size
    assert ImageChops.difference(banded, whole).getbbox() is None


def test_no_banded_reduction_when_the_image_is_near_its_target():
    from chalicelib.imaging.render import _reduced_by_bands

    assert _reduced_by_bands(Image.new("RGBA", (1500, 1000)), (1280, 853)) is None


def test_a_bigtiff_scan_is_sniffed_as_tiff_and_decoded():
    from tests.images import bigtiff

    data = bigtiff(640, 480, grey=200)
    assert sniff(data) == "image/tiff"
    assert sniff(b"MM\x00+" + b"\0" * 12) == "image/tiff"
    assert render.inspect(data, 50_000_000).content_type == "image/tiff"
    display, thumb = render.make_renditions(data, 50_000_000).values()
    assert (display.width, display.height) == (640, 480)
    assert Image.open(io.BytesIO(display.data)).convert("L").getpixel((10, 10)) in range(195, 206)
