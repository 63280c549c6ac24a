"""The photo's facts (`source`): chalicelib/imaging/facts.py, through render.facts_of and
render.inspect, on real photographs (scikit-image's) coded in every allowed format."""
from __future__ import annotations

import io
import json
from dataclasses import asdict

import pytest
from PIL import Image, ImageCms

from chalicelib.domain.source import ColorSpace
from chalicelib.imaging import render
from chalicelib.imaging.facts import color_space
from tests.images import (
    ADOBE_PRIMARIES, DISPLAY_P3_PROFILE, P3_PRIMARIES, PRIVATE_MARKERS, SRGB_PRIMARIES, as_plain_heif, photo_as, private_exif,
    rgb_icc_profile,
)

LIMIT = 50_000_000
# coffee.png is 600x400.
EXIF_FORMATS = ["JPEG", "PNG", "WEBP", "TIFF", "AVIF", "HEIF"]
FORMAT_NAMES = {"JPEG": "jpeg", "PNG": "png", "WEBP": "webp", "GIF": "gif", "TIFF": "tiff",
                "AVIF": "avif", "HEIF": "heic"}
SRGB = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
DISPLAY_P3 = DISPLAY_P3_PROFILE
ADOBE_RGB = rgb_icc_profile("Adobe RGB (1998)", *ADOBE_PRIMARIES)


def exif_bytes(**kwargs) -> bytes:
    # As bytes: pillow_heif then writes the rotation as an 'irot' box, as phones do.
    return private_exif(**kwargs).tobytes()


@pytest.mark.parametrize("fmt", [*EXIF_FORMATS, "GIF"])
def test_every_format_gives_its_facts(fmt):
    save = {} if fmt == "GIF" else {"exif": exif_bytes()}
    data = photo_as(fmt, **save)
    source = render.facts_of(data)
    assert (source.width, source.height) == (600, 400)
    assert source.format == FORMAT_NAMES[fmt]
    assert source.bytes == len(data)
    assert source.color_space is ColorSpace.SRGB  # untagged
    assert source.has_alpha is False
    assert source.captured_at == (None if fmt == "GIF" else "2024-05-01T12:34:56+02:00")
    assert render.inspect(data, LIMIT).source == source  # what the API reads at upload


def test_plain_heif_is_named_heif():
    data = as_plain_heif(photo_as("HEIF", exif=exif_bytes()))
    source = render.facts_of(data)
    assert (source.format, source.captured_at) == ("heif", "2024-05-01T12:34:56+02:00")


@pytest.mark.parametrize("fmt", EXIF_FORMATS)
@pytest.mark.parametrize("orientation", [6, 8, 5, 7])
def test_a_turned_photo_gives_its_upright_size(fmt, orientation):
    data = photo_as(fmt, exif=exif_bytes(orientation=orientation))
    source = render.facts_of(data)
    assert (source.width, source.height) == (400, 600)
    display = render.make_renditions(data, LIMIT)["display"]
    assert display.width < display.height  # as the renditions show it


@pytest.mark.parametrize("orientation", [1, 2, 3, 4])
def test_a_photo_not_turned_keeps_its_size(orientation):
    source = render.facts_of(photo_as("JPEG", exif=exif_bytes(orientation=orientation)))
    assert (source.width, source.height) == (600, 400)


@pytest.mark.parametrize(
    ("offset", "expected"),
    [("+02:00", "2024-05-01T12:34:56+02:00"), ("-07:30", "2024-05-01T12:34:56-07:30"),
     ("+00:00", "2024-05-01T12:34:56+00:00"),
     # No offset, or one that is no offset: the camera's local time, with no zone invented.
     (None, "2024-05-01T12:34:56"), ("   :  ", "2024-05-01T12:34:56"), ("+25:00", "2024-05-01T12:34:56")],
)
def test_captured_at_with_and_without_an_offset(offset, expected):
    source = render.facts_of(photo_as("JPEG", exif=exif_bytes(offset=offset)))
    assert source.captured_at == expected


@pytest.mark.parametrize("taken", [None, "0000:00:00 00:00:00", "    :  :     :  :  ", "yesterday"])
def test_no_or_a_blank_capture_time_is_none(taken):
    assert render.facts_of(photo_as("JPEG", exif=exif_bytes(taken=taken))).captured_at is None


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "TIFF", "AVIF", "HEIF"])
@pytest.mark.parametrize(("profile", "expected"), [
    (SRGB, ColorSpace.SRGB), (DISPLAY_P3, ColorSpace.DISPLAY_P3), (ADOBE_RGB, ColorSpace.ADOBE_RGB),
    (rgb_icc_profile("Swapped RG", SRGB_PRIMARIES[1], SRGB_PRIMARIES[0], SRGB_PRIMARIES[2]), ColorSpace.OTHER),
    (rgb_icc_profile("DCI-P3", *P3_PRIMARIES), ColorSpace.OTHER),
    (b"not an icc profile", ColorSpace.OTHER),
], ids=["srgb", "display-p3", "adobe-rgb", "other", "dci-p3", "corrupt"])
def test_the_embedded_profile_names_the_color_space(fmt, profile, expected):
    assert render.facts_of(photo_as(fmt, icc_profile=profile)).color_space is expected


@pytest.mark.parametrize(("primaries", "expected"), [(1, ColorSpace.SRGB), (12, ColorSpace.DISPLAY_P3),
                                                     (9, ColorSpace.OTHER)])
def test_a_heics_nclx_primaries_name_the_color_space_without_a_profile(primaries, expected):
    data = photo_as("HEIF", save_nclx_profile=True, color_primaries=primaries, transfer_characteristics=13,
                    matrix_coefficients=6, full_range_flag=1)
    assert render.facts_of(data).color_space is expected


def test_a_grey_profile_is_other():
    grey = ImageCms.ImageCmsProfile(ImageCms.createProfile("LAB")).tobytes()
    assert color_space(grey) is ColorSpace.OTHER
    assert color_space(None) is ColorSpace.SRGB


@pytest.mark.parametrize("fmt", ["PNG", "WEBP", "TIFF", "AVIF", "HEIF"])
def test_alpha_is_reported(fmt):
    assert render.facts_of(photo_as(fmt, mode="RGBA")).has_alpha is True


def test_a_gif_with_a_transparent_colour_has_alpha():
    out = io.BytesIO()
    Image.new("P", (40, 30), 3).save(out, "GIF", transparency=3)
    assert render.facts_of(out.getvalue()).has_alpha is True


@pytest.mark.parametrize("fmt", EXIF_FORMATS)
def test_nothing_private_is_in_the_facts(fmt):
    source = render.facts_of(photo_as(fmt, exif=exif_bytes()))
    text = json.dumps(asdict(source))
    assert not [marker for marker in PRIVATE_MARKERS if marker in text]


def test_a_photo_over_the_pixel_limit_still_gives_its_facts():
    data = photo_as("JPEG", exif=exif_bytes())
    with pytest.raises(Exception):
        render.inspect(data, 1000)
    assert render.facts_of(data).width == 600


@pytest.mark.parametrize("data", [b"", b"not an image at all", b"\xff\xd8\xff\xe0" + b"\0" * 40])
def test_no_facts_without_a_readable_header(data):
    assert render.facts_of(data) is None


@pytest.mark.parametrize("fmt", EXIF_FORMATS)
def test_no_rendition_of_any_format_carries_the_metadata(fmt):
    from chalicelib.domain.renditions import RenditionFormat

    data = photo_as(fmt, exif=exif_bytes(), icc_profile=DISPLAY_P3)
    rendered = render.make_images(data, LIMIT, formats=(RenditionFormat.WEBP, RenditionFormat.AVIF))
    files = [file for out in rendered.renditions.values() for file in (out.data, *out.variants.values())]
    assert len(files) > 2  # a variant at least
    for file in files:
        assert not [marker for marker in PRIVATE_MARKERS if marker.encode() in file]
        with Image.open(io.BytesIO(file)) as im:
            assert not im.getexif()
            assert not {"exif", "icc_profile", "xmp"} & set(im.info)
