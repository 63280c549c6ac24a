"""The decode budget and the hostile corpus, in process (tests/e2e has them through HTTP)."""
import io

import pytest
from PIL import Image

from chalicelib.domain.errors import ImageTooComplex
from chalicelib.imaging import render
from tests.images import JPEG_DEFECTS
from chalicelib.imaging.limits import DecodeLimits, gif_frames, jpeg_segments, tiff_pages
from tests import hostile
from tests.images import jpeg

BUDGET = DecodeLimits()


def progressive_jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (320, 240), (1, 2, 3)).save(out, "JPEG", progressive=True)
    return out.getvalue()


def test_an_ordinary_progressive_jpeg_has_a_handful_of_scans_and_passes():
    scans, _ = jpeg_segments(progressive_jpeg(), stop_after_scans=10_000)
    assert 2 < scans <= 12
    assert render.inspect(progressive_jpeg(), 50_000_000).content_type == "image/jpeg"


def test_a_baseline_jpeg_has_one_scan():
    assert jpeg_segments(jpeg(), stop_after_scans=100)[0] == 1


def test_a_scan_bomb_is_refused_from_its_structure():
    bomb = hostile.scan_bomb(320, 240, 500)
    assert jpeg_segments(bomb, stop_after_scans=10_000)[0] >= 500
    with pytest.raises(ImageTooComplex):
        render.inspect(bomb, 50_000_000)
    with pytest.raises(ImageTooComplex):  # the worker checks too: direct uploads skip the API
        render.make_renditions(bomb, 50_000_000)


def test_frame_and_page_bombs_are_refused_and_small_animations_pass():
    assert gif_frames(hostile.frame_bomb(1200), stop_after=10_000) == 1200
    assert tiff_pages(hostile.page_bomb(1500), stop_after=10_000) == 1500
    for bomb in (hostile.frame_bomb(1200), hostile.page_bomb(1500)):
        with pytest.raises(ImageTooComplex):
            render.inspect(bomb, 50_000_000)
    assert render.inspect(hostile.frame_bomb(30), 50_000_000).content_type == "image/gif"
    display, _ = render.make_renditions(hostile.frame_bomb(30), 50_000_000).values()
    assert display.width == 4  # the first frame, never upscaled


def test_a_tiff_whose_directories_loop_counts_as_over_the_budget():
    data = bytearray(hostile.page_bomb(2))
    # Point the last directory back at the first one.
    last = data.rindex(b"\x00\x00\x00\x00", 0, len(data) - 1)
    data[last:last + 4] = (8).to_bytes(4, "little")
    assert tiff_pages(bytes(data), stop_after=1001) == 1001


def test_huge_metadata_is_refused_and_ordinary_metadata_passes():
    with pytest.raises(ImageTooComplex):
        render.inspect(hostile.huge_profile_jpeg(2 * 1024 * 1024), 50_000_000)
    render.inspect(hostile.huge_profile_jpeg(100 * 1024), 50_000_000)


def test_the_budget_is_configurable():
    bomb = hostile.scan_bomb(64, 64, 100)
    render.inspect(bomb, 50_000_000, DecodeLimits(max_scans=200))
    with pytest.raises(ImageTooComplex):
        render.inspect(hostile.frame_bomb(30), 50_000_000, DecodeLimits(max_frames=10))


def test_profiles_are_cached_by_digest_and_large_ones_not_at_all(monkeypatch):
    from chalicelib.imaging import render as im

    built = []
    monkeypatch.setattr(im, "_build_srgb_transform", lambda icc, mode: built.append(len(icc)))
    im._transforms.clear()
    for i in range(40):
        im._srgb_transform(bytes([i]) * 1000, "RGB")
    assert len(im._transforms) == im._CACHED_PROFILES  # bounded, whatever is sent
    assert all(len(key[0]) == 32 for key in im._transforms)  # keyed by a digest, not the bytes
    im._srgb_transform(b"x" * (im._CACHED_PROFILE_BYTES + 1), "RGB")
    im._srgb_transform(b"x" * (im._CACHED_PROFILE_BYTES + 1), "RGB")
    assert built[-2:] == [im._CACHED_PROFILE_BYTES + 1] * 2  # built each time, never kept
    im._transforms.clear()


def test_an_image_whose_decode_needs_more_than_the_memory_ceiling_is_image_too_complex():
    from chalicelib.domain.errors import ImageTooComplex
    from chalicelib.imaging.sandbox import run_limited
    from tests.images import png

    wide = png(3000, 3000)  # 34 MiB of RGBA pixels in a few KiB
    with pytest.raises(ImageTooComplex):
        run_limited(render.make_renditions, wide, 50_000_000, cpu_seconds=10, wall_seconds=60,
                    memory_bytes=16 * 1024 * 1024)
    display, _ = run_limited(render.make_renditions, wide, 50_000_000, cpu_seconds=10, wall_seconds=60,
                             memory_bytes=512 * 1024 * 1024).values()
    assert display.width == 1280


def test_a_lower_ceiling_after_a_large_decode_still_holds_and_one_ceiling_keeps_one_child():
    """Memory a large decode freed stays in its child's heap, where RLIMIT_DATA does not
    count it as new: a call with a lower ceiling gets a fresh child; calls with the same
    ceiling (the worker's) keep theirs."""
    import os

    from chalicelib.domain.errors import ImageTooComplex
    from chalicelib.imaging.sandbox import run_limited
    from tests.images import png

    big = 512 * 1024 * 1024
    run_limited(render.make_renditions, png(6000, 4000), 50_000_000, cpu_seconds=30, wall_seconds=60,
                memory_bytes=big)
    with pytest.raises(ImageTooComplex):
        run_limited(render.make_renditions, png(3000, 3000), 50_000_000, cpu_seconds=10, wall_seconds=60,
                    memory_bytes=16 * 1024 * 1024)
    pids = {run_limited(os.getpid, cpu_seconds=5, wall_seconds=30, memory_bytes=big) for _ in range(4)}
    assert len(pids) == 1


@pytest.mark.parametrize("defect", JPEG_DEFECTS)
def test_a_jpeg_libjpeg_tolerates_is_accepted_with_its_scans_counted(defect):
    from tests.images import jpeg_with_defect

    data = jpeg_with_defect(defect)
    Image.open(io.BytesIO(data)).load()  # the decoder takes it
    assert jpeg_segments(data, stop_after_scans=65)[0] == 10  # libjpeg's colour progressive scans
    assert render.inspect(data, 50_000_000).width == 320
    display, _ = render.make_renditions(data, 50_000_000).values()
    assert display.width == 320


def test_junk_between_segments_hides_no_scan_from_the_limit():
    from tests.hostile import scan_bomb

    bomb = scan_bomb(64, 64, scans=300)
    app0_end = 4 + int.from_bytes(bomb[4:6], "big")
    hidden = bomb[:app0_end] + b"\x00junk\x00" + bomb[app0_end:]
    Image.open(io.BytesIO(hidden))  # Pillow's parser skips the junk too
    with pytest.raises(ImageTooComplex):
        render.inspect(hidden, 50_000_000)
