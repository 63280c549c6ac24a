"""Where a picture's subject is: the point its square renditions are placed around. No I/O."""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FocusSource(StrEnum):
    CLIENT = "client"
    FACES = "faces"
    SALIENCY = "saliency"
    CENTRE = "centre"


@dataclass(frozen=True)
class Focus:
    x: float  # 0..1 of the upright image's width, from the left
    y: float  # 0..1 of its height, from the top
    source: FocusSource


# The client's focus, and the window of a square rendition. (Imported here, not at the top:
# the text above is the detector's too, word for word.)
import math  # noqa: E402
import re  # noqa: E402

from chalicelib.domain.errors import InvalidRequest  # noqa: E402

# A focus's x and y are kept to this many decimal places: a ten-thousandth of a side, under
# a pixel on any image up to 10,000 px, and short in JSON. The window is placed by the
# rounded point, so what a job shows is exactly what its squares were placed around.
PLACES = 4

CENTRE = Focus(0.5, 0.5, FocusSource.CENTRE)

# A fraction 0..1 in plain decimals: 0, 1, 0.31, 1.0 (no sign, exponent, "nan", "inf" or
# "1_0", which float() takes). The pattern is the whole rule, as openapi.yaml's Focus says.
_FRACTION = r"0(?:\.[0-9]+)?|1(?:\.0+)?"
_QUERY = re.compile(rf" *({_FRACTION}) *, *({_FRACTION}) *", re.ASCII)

_QUERY_FORM = "focus must be two fractions of the upright image, x,y from its top left, each 0..1 (e.g. focus=0.31,0.22)"
_BODY_FORM = 'focus must be {"x": <0..1>, "y": <0..1>}: fractions of the upright image from its top left'


def focus_at(x: float, y: float, source: FocusSource) -> Focus:
    """The focus at (x, y), each clamped to 0..1 and rounded to PLACES: how every focus a job
    keeps is made, the client's and the one found."""
    return Focus(_kept(x), _kept(y), FocusSource(source))


def _kept(value: float) -> float:
    value = float(value)
    if not math.isfinite(value):
        return 0.5
    return round(min(1.0, max(0.0, value)), PLACES) + 0.0  # + 0.0: never -0.0


def parse_query(text: object) -> Focus:
    """`focus=x,y` on POST /images -> the client's Focus; 400 invalid_request for anything
    but two fractions 0..1 in plain decimals separated by a comma."""
    # Whitespace around it is no part of it (as around the names of ?formats=).
    match = _QUERY.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise InvalidRequest(_QUERY_FORM)
    return _client(float(match.group(1)), float(match.group(2)), _QUERY_FORM)


def parse_object(value: object) -> Focus:
    """`"focus": {"x": ..., "y": ...}` in POST /uploads -> the client's Focus; 400
    invalid_request for anything else: not an object, a member missing or extra, a value
    that is no number (a boolean, text, null), or outside 0..1."""
    if not isinstance(value, dict) or set(value) != {"x", "y"}:
        raise InvalidRequest(_BODY_FORM)
    x, y = value["x"], value["y"]
    for number in (x, y):
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise InvalidRequest(_BODY_FORM)
    return _client(x, y, _BODY_FORM)


def _client(x: float, y: float, form: str) -> Focus:
    for name, number in (("x", x), ("y", y)):
        if not math.isfinite(number) or not 0.0 <= number <= 1.0:
            raise InvalidRequest(f"focus {name} is {str(number)[:24]}, outside 0..1: {form}")
    return focus_at(x, y, FocusSource.CLIENT)


def canonical(focus: Focus) -> bytes:
    """The client's focus as the idempotency fingerprint and the duplicate key take it: the
    same point whatever its spelling (0.5, 0.50, 5e-1)."""
    return f"{focus.x:.{PLACES}f},{focus.y:.{PLACES}f}".encode()


def square_window(width: int, height: int, focus: Focus) -> tuple[float, float, float, float]:
    """The part of a width x height (upright) image a square rendition shows, as (left, top,
    right, bottom) in its pixels: the whole short side, slid along the long side so that the
    focus is as near its centre as the image allows (clamped at either end). A square image
    is all of itself; the centre focus gives the centre crop."""
    side = min(width, height)
    left = _slide(width, side, focus.x)
    top = _slide(height, side, focus.y)
    return left, top, left + side, top + side


def _slide(length: int, side: int, at: float) -> float:
    """Where a window of `side` starts along `length` to centre `at` (0..1 of it) within it."""
    return min(float(length - side), max(0.0, at * length - side / 2))
