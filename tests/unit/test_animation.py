"""Animated sources (issue 51): each rendition keeps its still (the first frame) and gains an
animated WebP of every frame, with the source's delays and loop count, sized and cropped as
the still; bounded by frames, pixels, CPU and memory."""
from __future__ import annotations

import io

import pytest
from PIL import Image, ImageChops, ImageStat

from chalicelib.config import Settings
from chalicelib.domain.errors import ImageTooComplex
from chalicelib.domain.renditions import AnimationSkipped, Fit, RenditionName, rendition_specs
from chalicelib.imaging import animate, render
from chalicelib.imaging.animate import AnimationLimits, AnimationRefused, make_animations
from chalicelib.imaging.sandbox import run_limited
from chalicelib.imaging.timeline import played_ms, timeline_of
from tests import hostile
from tests.animations import animated, frames_of, panned

SPECS = rendition_specs(Settings())
MAX_PIXELS = Settings.max_pixels


def difference(a: Image.Image, b: Image.Image) -> float:
    """Mean absolute difference per channel, 0-255, of two RGB images of one size."""
    return sum(ImageStat.Stat(ImageChops.difference(a.convert("RGB"), b.convert("RGB"))).mean) / 3


@pytest.mark.parametrize("kind", ["gif", "webp", "apng"])
def test_every_rendition_of_an_animated_source_is_animated_with_its_delays_and_loop(kind):
    durations = [40, 120, 70, 200, 90, 60]
    data = animated(kind, frames=6, size=(480, 320), durations=durations, loop=3)
    out = make_animations(data, MAX_PIXELS, SPECS)
    assert list(out) == [RenditionName.DISPLAY, RenditionName.THUMB, RenditionName.THUMB_512]
    # A GIF's NETSCAPE count repeats after the first play (3: four plays); WebP and APNG count plays.
    plays = 4 if kind == "gif" else 3
    for name, a in out.items():
        with Image.open(io.BytesIO(a.data)) as coded:
            assert coded.format == "WEBP" and coded.n_frames == 6 and coded.info["loop"] == plays
            assert coded.size == (a.width, a.height)
        assert [d for _, d in frames_of(a.data)] == durations
        assert a.frames == 6 and a.duration_ms == sum(durations)
    assert (out[RenditionName.DISPLAY].width, out[RenditionName.DISPLAY].height) == (480, 320)
    assert (out[RenditionName.THUMB].width, out[RenditionName.THUMB].height) == (256, 256)
    # Never upscaled: the 512 square of a 320-high source is its 320 square (its still is 512).
    assert (out[RenditionName.THUMB_512].width, out[RenditionName.THUMB_512].height) == (320, 320)


@pytest.mark.parametrize("kind", ["gif", "webp", "apng"])
def test_the_source_says_it_is_animated_its_frames_and_one_play(kind):
    data = animated(kind, frames=5, durations=[100, 0, 50, 10, 300])
    facts = render.facts_of(data)
    # 0 and 10 ms play as 100 ms in browsers: the facts say what a viewer sees.
    assert (facts.animated, facts.frames, facts.duration_ms) == (True, 5, 100 + 100 + 50 + 100 + 300)


def test_a_still_is_no_animation():
    data = animated("gif", frames=1)
    facts = render.facts_of(data)
    assert (facts.animated, facts.frames, facts.duration_ms) == (False, 1, None)
    assert make_animations(data, MAX_PIXELS, SPECS) == {}
    png = io.BytesIO()
    Image.new("RGB", (20, 20)).save(png, "PNG")
    assert render.facts_of(png.getvalue()).frames == 1


@pytest.mark.parametrize("kind", ["gif", "webp", "apng"])
def test_each_still_is_the_first_frame_and_each_animation_starts_with_it(kind):
    data = animated(kind, frames=4, size=(400, 300))
    rendered = render.make_images(data, MAX_PIXELS, SPECS)
    stills = rendered.renditions
    # Around the stills' focus (found in the picture), as the worker asks.
    out = make_animations(data, MAX_PIXELS, SPECS, focus=rendered.focus)
    first = next(panned(4, (400, 300)))
    for spec in SPECS:
        still = Image.open(io.BytesIO(stills[spec.name].data))
        frames = frames_of(out[spec.name].data)
        # The same square; the still upscaled to its box where the animation is not (300 px high).
        side = min(spec.box, 300) if spec.fit is Fit.COVER else None
        assert frames[0][0].size == ((side, side) if side else still.size)
        assert difference(still.resize(frames[0][0].size, Image.LANCZOS), frames[0][0]) < 4
        assert difference(still, frames[-1][0]) > 8  # and the last frame is another picture
    assert difference(Image.open(io.BytesIO(stills[RenditionName.DISPLAY].data)), first) < 4


def test_square_frames_are_cropped_by_the_stills_crop(monkeypatch):
    """The square renditions' frames are cut where the still's are (render._cover_window), so a
    change of where the square sits (around a focus, say) reaches both; the 256 square is
    scaled by the still's own crop (render._cover), the 512 one is the frame's 300 square, cut."""
    data = animated("gif", frames=3, size=(600, 300))
    seen, windows = [], []
    cover, window = render._cover, render._cover_window

    def spy(im, size, *args, **kwargs):
        seen.append((im.size, size))
        return cover(im, size, *args, **kwargs)

    def spy_window(*args):
        windows.append(args[:2])
        return window(*args)

    monkeypatch.setattr(render, "_cover", spy)
    monkeypatch.setattr(render, "_cover_window", spy_window)
    out = make_animations(data, MAX_PIXELS, SPECS)
    assert seen == [((600, 300), 256)] * 3 and windows == [(600, 300)] * 6
    assert (out[RenditionName.THUMB_512].width, out[RenditionName.THUMB_512].height) == (300, 300)


def test_a_panorama_s_squares_are_the_display_s_short_side():
    """The frames are the display's (the source fitted in 1280): a 1600x400 GIF's display is
    1280x320, so its 512 square is 320 and its 256 one 256, though the source is 400 high."""
    out = make_animations(animated("gif", frames=2, size=(1600, 400)), MAX_PIXELS, SPECS)
    assert [(a.width, a.height) for a in out.values()] == [(1280, 320), (256, 256), (320, 320)]


def test_gif_frames_are_composited_with_their_disposal():
    """A GIF whose later frames hold only the pixels that change: each animation frame is the
    whole picture (Pillow's reader composites), not a patch on transparency."""
    base = Image.new("RGB", (64, 64), (200, 40, 40))
    patch = Image.new("RGB", (64, 64), (200, 40, 40))
    patch.paste((40, 40, 200), (0, 0, 16, 16))
    out = io.BytesIO()
    # optimize (the default) writes the second frame as the 16x16 box that changed.
    base.save(out, "GIF", save_all=True, append_images=[patch], duration=100, disposal=1)
    coded = make_animations(out.getvalue(), MAX_PIXELS, SPECS)[RenditionName.DISPLAY]
    second = frames_of(coded.data)[1][0]
    assert abs(second.getpixel((50, 50))[0] - 200) < 12 and second.getpixel((50, 50))[3] == 255
    assert abs(second.getpixel((4, 4))[2] - 200) < 12


def test_a_sticker_s_transparency_is_white_as_in_its_still():
    frames = [Image.new("RGBA", (120, 80), (0, 0, 0, 0)) for _ in range(3)]
    for i, frame in enumerate(frames):
        frame.paste((255, 200, 0, 255), (10 + i * 20, 20, 40 + i * 20, 60))
    raw = io.BytesIO()
    frames[0].save(raw, "GIF", save_all=True, append_images=frames[1:], duration=100, disposal=2)
    coded = make_animations(raw.getvalue(), MAX_PIXELS, SPECS)[RenditionName.DISPLAY]
    still = Image.open(io.BytesIO(render.make_images(raw.getvalue(), MAX_PIXELS, SPECS)
                                  .renditions[RenditionName.DISPLAY].data))
    first = frames_of(coded.data)[0][0]
    assert min(first.getpixel((100, 5))[:3]) > 240 and min(still.getpixel((100, 5))) > 240
    assert first.getpixel((20, 40))[2] < 30


def test_zero_delays_play_as_browsers_play_them():
    data = hostile.zero_delay_gif(frames=40)
    coded = make_animations(data, MAX_PIXELS, SPECS)[RenditionName.THUMB]
    assert {d for _, d in frames_of(coded.data)} == {100} and coded.duration_ms == 4000
    assert [played_ms(d) for d in (0, 10, 11, 20)] == [100, 100, 11, 20]


def test_past_the_frame_limit_there_is_no_animation():
    data = animated("gif", frames=12, size=(40, 30))
    with pytest.raises(AnimationRefused) as refused:
        make_animations(data, MAX_PIXELS, SPECS, animation_limits=AnimationLimits(max_frames=10))
    assert refused.value.reason is AnimationSkipped.TOO_MANY_FRAMES
    assert make_animations(data, MAX_PIXELS, SPECS, animation_limits=AnimationLimits(max_frames=12))


def test_past_the_pixel_limit_there_is_no_animation():
    data = animated("gif", frames=4, size=(100, 100))
    with pytest.raises(AnimationRefused) as refused:
        make_animations(data, MAX_PIXELS, SPECS, animation_limits=AnimationLimits(max_pixels=39_999))
    assert refused.value.reason is AnimationSkipped.TOO_MANY_PIXELS
    assert make_animations(data, MAX_PIXELS, SPECS, animation_limits=AnimationLimits(max_pixels=40_000))


def test_a_huge_logical_screen_of_tiny_frames_is_refused_by_its_pixels():
    data = hostile.huge_screen_gif(6000, 6000, frames=8)  # 223 bytes, 288 megapixels of frames
    assert len(data) < 1000
    with pytest.raises(AnimationRefused) as refused:
        make_animations(data, MAX_PIXELS, SPECS)
    assert refused.value.reason is AnimationSkipped.TOO_MANY_PIXELS


def test_thousands_of_tiny_frames_are_refused_by_the_decode_budget():
    """Past MAX_FRAMES the file is refused outright, as before; under it but past
    MAX_ANIMATION_FRAMES the stills are made and the animation is not."""
    with pytest.raises(ImageTooComplex):
        make_animations(hostile.frame_bomb(1200), MAX_PIXELS, SPECS)
    many = hostile.frame_bomb(600)
    assert render.make_images(many, MAX_PIXELS, SPECS).renditions
    with pytest.raises(AnimationRefused) as refused:
        make_animations(many, MAX_PIXELS, SPECS)
    assert refused.value.reason is AnimationSkipped.TOO_MANY_FRAMES


def test_an_animation_over_its_cpu_is_stopped_in_the_child_and_the_refusal_crosses_it():
    # About 1.7 CPU-s to animate, well past the 0.2 s asked: the limit is whole seconds of
    # the child's life, so a call may get up to 0.7 s (40 frames, 0.67 s, sometimes fitted).
    data = animated("gif", frames=100, size=(480, 360))
    with pytest.raises(ImageTooComplex):  # the kernel's CPU limit, well under this one's cost
        run_limited(make_animations, data, MAX_PIXELS, SPECS, cpu_seconds=0.2, wall_seconds=60)
    with pytest.raises(AnimationRefused) as refused:
        run_limited(make_animations, data, MAX_PIXELS, SPECS, Settings.webp_quality,
                    render.DecodeLimits(), AnimationLimits(max_frames=3), cpu_seconds=10, wall_seconds=60)
    assert refused.value.reason is AnimationSkipped.TOO_MANY_FRAMES


def test_the_timeline_is_read_from_the_structure_alone():
    gif = animated("gif", frames=3, durations=[30, 40, 50], loop=0)
    assert timeline_of(gif, "image/gif", 100).durations == (30, 40, 50)
    assert timeline_of(gif, "image/gif", 100).loop == 0
    once = io.BytesIO()
    frames = list(panned(2, (20, 20)))
    frames[0].save(once, "GIF", save_all=True, append_images=frames[1:], duration=50)  # no loop block
    assert timeline_of(once.getvalue(), "image/gif", 100).loop == 1
    assert timeline_of(gif, "image/gif", 2).frames == 2  # counting stops at the bound
    assert timeline_of(b"GIF89a" + b"\x00" * 3, "image/gif", 100).frames == 1
    assert timeline_of(animated("webp", frames=3, loop=2), "image/webp", 100).loop == 2
    assert timeline_of(animated("apng", frames=3, loop=5), "image/png", 100).loop == 5


def test_the_encoder_pillow_writes_with_is_there():
    """animate.py feeds Pillow's own animation encoder frame by frame: its signature is
    Pillow's private API, pinned here so an upgrade that changes it fails loudly."""
    assert animate._webp.WebPAnimEncoder
