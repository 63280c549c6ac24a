"""An animated source's renditions as animated WebPs: every frame, sized and cropped as its
rendition's still (chalicelib/imaging/render.py), with the source's delays and loop count.

Bounded: frames are decoded, resized and coded one at a time. Each source frame is decoded
(composited onto the canvas by Pillow's reader: GIF disposal and transparency, APNG's dispose
and blend ops, WebP's own), reduced to the largest rendition's size at once, and each
rendition's frame is cut from that and handed to its encoder (libwebp's WebPAnimEncoder, one per
rendition, all open together), which keeps only what it needs to code the next frame. So
a call holds the decoder's canvas or two, the reduced frame and the encoders' output, never
all frames; the limits of chalicelib/domain/renditions.py (animation_skipped) bound the
total work, and the decoding child (chalicelib/imaging/sandbox.py) its CPU and memory.

Pillow's public writer (`save(save_all=True, append_images=...)`) lists its frames first;
its encoder, fed here frame by frame, is what that writer itself calls (WebPImagePlugin._save_all).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image, features

from chalicelib.config import Settings
from chalicelib.domain.focus import CENTRE, Focus
from chalicelib.domain.renditions import Fit, RenditionName, RenditionSpec, animation_skipped
from chalicelib.imaging import render
from chalicelib.imaging.limits import DecodeLimits
from chalicelib.imaging.timeline import played_ms, timeline_of

# What features.check("webp") needs for the encoder below; _webp is Pillow's own module.
assert features.check("webp")
from PIL import _webp  # noqa: E402

# libwebp's key-frame insertion, off (kmax 0): with it on (gif2webp's and Pillow's 3 and 5)
# every frame is coded twice, as a key frame and as a change on the last, and the smaller
# kept; 12 frames of 480x360 took 18 % more CPU for 1 % fewer bytes. Key frames serve seeking,
# and players play an animation from its first frame (always a key frame) on.
_KMIN, _KMAX = 0, 0
# libwebp's method (effort), 0 to 6: stills use 4. An animation codes every frame of every
# size, so it is most of an animated job's time: 0 takes about 3/4 of 2's CPU for about 1/4
# more bytes (12 frames of 480x360: 0.33 s against 0.44 s; 150 of 640x480: 5.5 s against
# 7.5 s), and even so the animations are a fraction of the GIF's bytes (benchmarks/animation.py).
_METHOD = 0
_TRANSPARENT = 0  # the canvas's background, ARGB: transparent, as browsers show a GIF's


@dataclass(frozen=True)
class AnimationLimits:
    """What is animated; its defaults are Settings' (stated there once)."""

    max_frames: int = Settings.max_animation_frames
    max_pixels: int = Settings.max_animation_pixels

    @classmethod
    def of(cls, settings: Settings) -> "AnimationLimits":
        return cls(settings.max_animation_frames, settings.max_animation_pixels)


@dataclass(frozen=True)
class AnimationOutput:
    name: RenditionName
    data: bytes
    width: int
    height: int
    frames: int
    duration_ms: int


class AnimationRefused(Exception):
    """The source is past an animation limit: `reason` is the AnimationSkipped code."""

    def __init__(self, reason):
        super().__init__(reason.value)
        self.reason = reason

    def __reduce__(self):  # sent back from the decoding child
        return (AnimationRefused, (self.reason,))


def make_animations(data: bytes, max_pixels: int, specs: Sequence[RenditionSpec],
                    quality: int = Settings.webp_quality, limits: DecodeLimits = DecodeLimits(),
                    animation_limits: AnimationLimits = AnimationLimits(),
                    focus: Focus = CENTRE) -> dict[RenditionName, AnimationOutput]:
    """{name: animation} for each spec, in the specs' order; {} for a still. Raises what
    render.make_images raises for the same bytes, and AnimationRefused past a limit. The
    square ones are cut around `focus`, as their stills were (render.make_images' Rendered.focus)."""
    im, content_type = render._open(data, max_pixels, limits)
    with im, render._decoding():
        timeline = timeline_of(data, content_type, animation_limits.max_frames + 1)
        frames = int(getattr(im, "n_frames", 1) or 1)
        if frames < 2:
            return {}
        # Pillow's count, the frames it will give (the structure's may stop short on junk).
        reason = animation_skipped(max(frames, timeline.frames), im.width, im.height,
                                   animation_limits.max_frames, animation_limits.max_pixels)
        if reason is not None:
            raise AnimationRefused(reason)
        target = render._fit(im.size, max(spec.box for spec in specs))
        orientation = render._orientation(im)
        icc = im.info.get("icc_profile")
        encoders: dict[RenditionName, tuple] = {}
        timestamp = 0
        for index in range(frames):
            im.seek(index)
            im.load()
            frame = _frame(im, target, orientation, icc)
            for spec in specs:
                shaped = _shape(frame, spec, focus)
                if spec.name not in encoders:
                    encoder = _webp.WebPAnimEncoder(shaped.size, _TRANSPARENT, timeline.loop, False,
                                                    _KMIN, _KMAX, False, False)
                    encoders[spec.name] = (encoder, shaped.size)
                encoders[spec.name][0].add(shaped.getim(), timestamp, False, quality, 100, _METHOD)
            # The frame's own delay, as the reader gives it once the frame is loaded.
            timestamp += played_ms(int(im.info.get("duration") or 0))
            del frame
        outputs = {}
        for spec in specs:
            encoder, (width, height) = encoders[spec.name]
            encoder.add(None, timestamp, False, quality, 100, 0)  # the last frame's end
            coded = encoder.assemble(b"", b"", b"")  # no ICC, EXIF or XMP: nothing is copied
            if coded is None:
                raise OSError("the WebP encoder made no file")
            outputs[spec.name] = AnimationOutput(spec.name, bytes(coded), width, height, frames, timestamp)
        return outputs


def _shape(frame: Image.Image, spec: RenditionSpec, focus: Focus) -> Image.Image:
    """The spec's frame, cut as its still is but never upscaled: a square past the frame's
    short side (the frame is the display's, the source fitted in its box) is that side's square. A still is upscaled to its box so every client's layout
    gets the size it asked for; an animation upscaled is every frame's bytes and encode time
    (libwebp's is most of an animated job's CPU) for no detail, and its width and height say
    its size."""
    if spec.fit is Fit.COVER and spec.box > min(frame.size):
        left, top, side, _ = render._cover_window(frame.width, frame.height, focus)
        return frame.crop((left, top, left + side, top + side))  # a crop: no resample at 1:1
    return render._shape(frame, spec, focus)


def _frame(im: Image.Image, target: tuple[int, int], orientation: int, icc: bytes | None) -> Image.Image:
    """The decoded canvas as the largest rendition's frame: upright, sRGB, and on white
    where it is transparent, as its still is. Pillow 12.2's animated WebP encoder (its own
    save_all too) writes no alpha, so transparent pixels would show whatever colour they
    hide (black, in most GIFs); on white, every frame looks as the still does."""
    alpha = im.has_transparency_data or im.mode in ("RGBA", "LA", "PA")
    frame = im.convert("RGBA" if alpha else "RGB")
    if frame.size != target:
        frame = render._resized(frame, target)
    frame = render._to_srgb(render._flatten(frame), icc)
    if orientation in render._TRANSPOSE:
        frame = frame.transpose(render._TRANSPOSE[orientation])
    frame.info = {}
    return frame
