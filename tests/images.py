"""Images made in code for tests (and scikit-image's photographs): nothing binary is committed."""
from __future__ import annotations

import functools
import io
import struct
from pathlib import Path

from PIL import Image


def jpeg(width: int = 640, height: int = 480, color=(200, 30, 30), **save) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, "JPEG", quality=90, **save)
    return out.getvalue()


def png(width: int = 64, height: int = 48, mode: str = "RGBA") -> bytes:
    out = io.BytesIO()
    Image.new(mode, (width, height), (10, 20, 30, 0) if mode == "RGBA" else (10, 20, 30)).save(out, "PNG")
    return out.getvalue()


def size_of(data: bytes) -> tuple[int, int]:
    return Image.open(io.BytesIO(data)).size


def bigtiff(width: int = 64, height: int = 48, grey: int = 128) -> bytes:
    """A BigTIFF (64-bit offsets, as scanners write for large scans) of one uncompressed
    grey strip, written directly: Pillow reads BigTIFF but does not write it."""
    import struct

    pixels = bytes([grey]) * (width * height)
    entries = [(256, 4, 1, width), (257, 4, 1, height), (258, 3, 1, 8), (259, 3, 1, 1), (262, 3, 1, 1),
               (273, 16, 1, 0), (277, 3, 1, 1), (278, 4, 1, height), (279, 16, 1, len(pixels))]
    ifd_at = 16
    pixels_at = ifd_at + 8 + 20 * len(entries) + 8
    ifd = struct.pack("<Q", len(entries))
    for tag, kind, count, value in entries:
        ifd += struct.pack("<HHQQ", tag, kind, count, pixels_at if tag == 273 else value)
    ifd += struct.pack("<Q", 0)
    return b"II+\x00" + struct.pack("<HHQ", 8, 0, ifd_at) + ifd + pixels


def jpeg_with_defect(defect: str) -> bytes:
    """A JPEG with one defect that libjpeg (and Pillow's marker parser) tolerate, as phones
    and editors write them now and then:
    - "junk_between_segments": bytes that are no marker between two header segments;
    - "junk_in_segment": a comment whose length stops short of its contents;
    - "truncated_app14": an Adobe APP14 cut to fewer bytes than its fields, and one of
      length 0;
    - "damaged_app13": a Photoshop APP13 whose resource block is cut and overwritten."""
    import struct

    base = jpeg(320, 240, progressive=True)
    app0_end = 2 + 2 + int.from_bytes(base[4:6], "big")  # SOI, then APP0 (JFIF)
    head, rest = base[:app0_end], base[app0_end:]
    if defect == "junk_between_segments":
        return head + b"\x00\x11 junk \x7f" + rest
    if defect == "junk_in_segment":  # a comment whose length stops short of its text
        return head + b"\xff\xfe" + struct.pack(">H", 6) + b"made with an editor" + rest
    if defect == "truncated_app14":  # the Adobe fields cut after the version, then an empty one
        return head + b"\xff\xee" + struct.pack(">H", 9) + b"Adobe\x00\x64" + b"\x80\x00\x00\x01" \
            + b"\xff\xee\x00\x00" + rest
    if defect == "damaged_app13":
        app13 = b"Photoshop 3.0\x008BIM\x04\x04\x00\x00\x00\x00\x01\x00" + b"\x1c\x02"
        return head + b"\xff\xed" + struct.pack(">H", 2 + len(app13)) + app13 + b"\x9a\xbc\xff\x00\x17" + rest
    raise ValueError(defect)


JPEG_DEFECTS = ("junk_between_segments", "junk_in_segment", "truncated_app14", "damaged_app13")


@functools.lru_cache(maxsize=None)
def photo(name: str = "coffee.png") -> bytes:
    """A real photograph scikit-image ships (600x400 coffee by default), as a JPEG q95 upload:
    flat images like jpeg()'s get no WebP or AVIF, whose files would not be smaller there."""
    import skimage.data

    out = io.BytesIO()
    Image.open(Path(skimage.data.__file__).parent / name).convert("RGB").save(out, "JPEG", quality=95)
    return out.getvalue()


def _s15(value: float) -> bytes:
    return struct.pack(">i", round(value * 65536))


def _xyz(x: float, y: float, z: float) -> bytes:
    return b"XYZ \0\0\0\0" + _s15(x) + _s15(y) + _s15(z)


def rgb_icc_profile(name: str, red, green, blue, gamma: float = 2.2) -> bytes:
    """A minimal ICC v2 matrix/TRC RGB display profile (the machine ships none)."""
    text = name.encode() + b"\0"
    desc = b"desc\0\0\0\0" + struct.pack(">I", len(text)) + text + b"\0" * 79
    curve = b"curv\0\0\0\0" + struct.pack(">IH", 1, round(gamma * 256)) + b"\0\0"
    d50 = (0.9642, 1.0, 0.8249)
    tags = [
        (b"desc", desc),
        (b"wtpt", _xyz(*d50)),
        (b"rXYZ", _xyz(*red)),
        (b"gXYZ", _xyz(*green)),
        (b"bXYZ", _xyz(*blue)),
        (b"rTRC", curve),
        (b"gTRC", curve),
        (b"bTRC", curve),
    ]
    offset = 128 + 4 + 12 * len(tags)
    table = body = b""
    for sig, data in tags:
        data += b"\0" * (-len(data) % 4)
        table += sig + struct.pack(">II", offset + len(body), len(data))
        body += data
    header = (
        struct.pack(">I", offset + len(body))
        + b"\0" * 4
        + struct.pack(">I", 0x02100000)
        + b"mntrRGB XYZ "
        + b"\0" * 12
        + b"acsp"
        + b"\0" * 28
        + _xyz(*d50)[8:]
        + b"\0" * 48
    )
    return header + struct.pack(">I", len(tags)) + table + body


# sRGB primaries adapted to D50, as in an sRGB ICC profile; Adobe RGB (1998) likewise.
SRGB_PRIMARIES = ((0.4361, 0.2225, 0.0139), (0.3851, 0.7169, 0.0971), (0.1431, 0.0606, 0.7141))
ADOBE_PRIMARIES = ((0.6097, 0.3111, 0.0195), (0.2053, 0.6257, 0.0609), (0.1492, 0.0632, 0.7446))


# Display P3's primaries adapted to D50, as in Apple's "Display P3" profile.
P3_PRIMARIES = ((0.5151, 0.2412, -0.0011), (0.2920, 0.6922, 0.0419), (0.1571, 0.0666, 0.7841))
DISPLAY_P3_PROFILE = rgb_icc_profile("Display P3", *P3_PRIMARIES)


@functools.lru_cache(maxsize=None)
def photo_image(name: str = "coffee.png") -> Image.Image:
    """scikit-image's photograph, decoded (RGB)."""
    import skimage.data

    return Image.open(Path(skimage.data.__file__).parent / name).convert("RGB")


def photo_as(fmt: str, name: str = "coffee.png", mode: str = "RGB", **save) -> bytes:
    """A real photograph coded in a Pillow format (JPEG, PNG, WEBP, GIF, TIFF, AVIF, HEIF),
    with the save options given (exif, icc_profile, quality...)."""
    if fmt == "HEIF":
        import pillow_heif

        pillow_heif.register_heif_opener()
    im = photo_image(name).convert(mode)
    if "A" in mode:
        im.putalpha(200)  # see-through: an encoder drops an alpha that is all opaque
    if fmt == "GIF":
        im = im.convert("P")
    out = io.BytesIO()
    im.save(out, fmt, **save)
    return out.getvalue()


def private_exif(orientation: int = 1, taken: str | None = "2024:05:01 12:34:56",
                 offset: str | None = "+02:00") -> Image.Exif:
    """An EXIF block as a phone writes it: the capture time, and what must never leave the
    service: GPS, the body's serial number, the owner's name, the artist, a maker note."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    exif[0x010F] = "SecretCam"  # Make
    exif[0x013B] = "Artist Secretname"  # Artist
    details = exif.get_ifd(0x8769)
    if taken is not None:
        details[0x9003] = taken  # DateTimeOriginal
    if offset is not None:
        details[0x9011] = offset  # OffsetTimeOriginal
    details[0xA430] = "Owner Secretname"  # CameraOwnerName
    details[0xA431] = "SERIAL-SECRET-1234"  # BodySerialNumber
    details[0x927C] = b"MAKERNOTE-SECRET"  # MakerNote
    gps = exif.get_ifd(0x8825)
    gps[1], gps[2] = "N", (51.0, 30.0, 7.0)
    gps[3], gps[4] = "W", (0.0, 7.0, 39.0)
    return exif


# What private_exif puts in a file that must never come out of the service.
PRIVATE_MARKERS = ("Secretname", "SERIAL-SECRET", "MAKERNOTE-SECRET", "SecretCam")


def as_plain_heif(heic: bytes) -> bytes:
    """A HEIC file whose brands say only `mif1` (plain HEIF, as some cameras label theirs)."""
    size = int.from_bytes(heic[:4], "big")
    return heic[:size].replace(b"heic", b"mif1").replace(b"heix", b"mif1") + heic[size:]


def unique(data: bytes, tag: str) -> bytes:
    """The same picture in other bytes: a JPEG comment after SOI, or a PNG tEXt chunk after
    IHDR, holding `tag`. Uploads that must each be processed use it: the worker copies an
    owner's exact duplicate instead of decoding it (chalicelib/usecases/duplicates.py)."""
    import struct
    import zlib

    text = tag.encode()
    if data[:2] == b"\xff\xd8":
        return data[:2] + b"\xff\xfe" + struct.pack(">H", len(text) + 2) + text + data[2:]
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        body = b"tEXt" + b"Comment\x00" + text
        chunk = struct.pack(">I", len(body) - 4) + body + struct.pack(">I", zlib.crc32(body))
        ihdr_end = 8 + 8 + 13 + 4  # signature, IHDR's length and type, its 13 bytes, its CRC
        return data[:ihdr_end] + chunk + data[ihdr_end:]
    raise ValueError("unique() takes a JPEG or a PNG")
