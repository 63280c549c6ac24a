"""Near-duplicates by the `phash` of ready jobs (docs/contract.md "The photo's facts")."""
from __future__ import annotations

# At most this many bits apart: the same photo re-encoded, resized or converted
# (benchmarks/phash.py); different photos lie 20 and more apart.
NEAR = 8


def phash_distance(a: str, b: str) -> int:
    """How many of the 64 bits of two `phash` values differ (0: the same picture)."""
    return bin(int(a, 16) ^ int(b, 16)).count("1")
