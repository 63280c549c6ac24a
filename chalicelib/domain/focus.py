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
