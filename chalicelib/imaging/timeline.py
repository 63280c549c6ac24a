"""An animation's timeline (its frames, how long each shows, how often it plays), read from the
file's structure: GIF blocks, WebP's RIFF chunks, APNG's chunks. No pixel is decoded, and no
decoder is imported: the header read (chalicelib/imaging/facts.py) and the decode budget use it.

Delays are as browsers play them: Chromium and Firefox show a frame whose delay is 10 ms or
less (zero included: a GIF with no delay, a WebP or APNG frame of 0 ms) for 100 ms, so a file
of zero delays is no faster, nor a busier loop, than one of 100 ms frames. The animation
made from it states those 100 ms in its own frames, so every player (not only browsers)
plays it as the browsers played the original.
"""
from __future__ import annotations

from dataclasses import dataclass

from chalicelib.imaging.limits import skip_sub_blocks

# Browsers' rule (see above): a delay at or under this is played as _CLAMPED_MS.
_FASTEST_MS = 10
_CLAMPED_MS = 100


def played_ms(delay_ms: int) -> int:
    """A frame's delay as browsers play it."""
    return _CLAMPED_MS if delay_ms <= _FASTEST_MS else delay_ms


@dataclass(frozen=True)
class Timeline:
    """frames counted up to the walk's stop (a file with more says stop_after); durations of
    those frames, in ms as played; loop: plays in all, 0 for forever (WebP's and APNG's
    meaning; a GIF without a NETSCAPE loop plays once)."""

    frames: int
    durations: tuple[int, ...]
    loop: int = 0

    @property
    def animated(self) -> bool:
        return self.frames > 1

    @property
    def duration_ms(self) -> int:
        return sum(self.durations)


STILL = Timeline(1, (0,), 1)


def timeline_of(data: bytes, content_type: str, stop_after: int) -> Timeline:
    """The timeline of a GIF, WebP or PNG (STILL for any other type, and for a file the walk
    cannot read: the decoder then says what is wrong with it). Stops counting at stop_after."""
    reader = _READERS.get(content_type)
    if reader is None:
        return STILL
    try:
        found = reader(data, stop_after)
    except (IndexError, ValueError):
        return STILL
    return found if found.frames > 1 else STILL


def _gif(data: bytes, stop_after: int) -> Timeline:
    end = len(data)
    if end < 13:
        return STILL
    pos = 13
    flags = data[10]
    if flags & 0x80:
        pos += 3 << ((flags & 0x07) + 1)
    durations: list[int] = []
    delay, loop = 0, 1  # no NETSCAPE block: browsers play it once
    while pos < end and len(durations) < stop_after:
        block = data[pos]
        if block == 0x3B:
            break
        if block == 0x21:
            label = data[pos + 1]
            if label == 0xF9 and data[pos + 2] >= 4:  # graphic control: the next frame's delay
                delay = int.from_bytes(data[pos + 4:pos + 6], "little") * 10
            elif label == 0xFF and data[pos + 2] == 11 and data[pos + 3:pos + 14] in (b"NETSCAPE2.0", b"ANIMEXTS1.0"):
                sub = pos + 14
                if data[sub] >= 3 and data[sub + 1] == 1:
                    count = int.from_bytes(data[sub + 2:sub + 4], "little")
                    loop = 0 if count == 0 else count + 1  # NETSCAPE counts repeats after the first play
            pos = skip_sub_blocks(data, pos + 2)
        elif block == 0x2C:
            durations.append(played_ms(delay))
            delay = 0
            if pos + 10 > end:
                break
            local = data[pos + 9]
            pos += 10
            if local & 0x80:
                pos += 3 << ((local & 0x07) + 1)
            pos = skip_sub_blocks(data, pos + 1)
        else:
            break
    return Timeline(len(durations), tuple(durations), loop)


def _webp(data: bytes, stop_after: int) -> Timeline:
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        return STILL
    pos, end = 12, min(len(data), 8 + int.from_bytes(data[4:8], "little"))
    durations: list[int] = []
    loop = 0
    while pos + 8 <= end and len(durations) < stop_after:
        fourcc, size = data[pos:pos + 4], int.from_bytes(data[pos + 4:pos + 8], "little")
        body = pos + 8
        if fourcc == b"ANIM":
            loop = int.from_bytes(data[body + 4:body + 6], "little")
        elif fourcc == b"ANMF":
            durations.append(played_ms(int.from_bytes(data[body + 12:body + 15], "little")))
        pos = body + size + (size & 1)
    return Timeline(len(durations), tuple(durations), loop)


def _png(data: bytes, stop_after: int) -> Timeline:
    pos, end = 8, len(data)
    durations: list[int] = []
    declared, loop = 0, 0
    while pos + 8 <= end and len(durations) < stop_after:
        size = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], pos + 8
        if kind == b"acTL":
            declared = int.from_bytes(data[body:body + 4], "big")
            loop = int.from_bytes(data[body + 4:body + 8], "big")
        elif kind == b"fcTL":
            numerator = int.from_bytes(data[body + 20:body + 22], "big")
            denominator = int.from_bytes(data[body + 22:body + 24], "big") or 100
            durations.append(played_ms(round(1000 * numerator / denominator)))
        elif kind == b"IEND":
            break
        pos = body + size + 4  # the CRC
    if not declared:  # a PNG, not an APNG: an fcTL without acTL is ignored by every reader
        return STILL
    return Timeline(len(durations), tuple(durations), loop)


_READERS = {"image/gif": _gif, "image/webp": _webp, "image/png": _png}
