"""Object keys spread over S3's partitions: docs/scale.md relies on it at 10M+ images a day.

S3 serves 3,500 writes and 5,500 reads a second per partitioned prefix and splits a busy
prefix on the characters that follow it. Our keys put the job id's random hex right after
the fixed `originals/` and `renditions/`, so S3 can split both prefixes 16 ways, then 256.
A time-ordered id (a ULID, uuid7) there would send every new upload to one partition.
"""
from __future__ import annotations

from collections import Counter

from chalicelib.config import Settings
from chalicelib.domain.objectkeys import ObjectKeys
from chalicelib.domain.renditions import RenditionName
from chalicelib.usecases.context import new_job_id

HEX = set("0123456789abcdef")


def test_the_character_after_each_fixed_prefix_is_uniformly_random_hex():
    settings = Settings()
    object_keys = ObjectKeys(settings.originals_prefix, settings.renditions_prefix)
    ids = [new_job_id() for _ in range(16_000)]
    keys = {
        settings.originals_prefix: [object_keys.original(i) for i in ids],
        settings.renditions_prefix: [object_keys.rendition(i, 1, RenditionName.DISPLAY) for i in ids],
    }
    for prefix, names in keys.items():
        first = Counter(name[len(prefix)] for name in names)
        assert set(first) == HEX, prefix
        # 1,000 expected per digit; a time-ordered id would give a handful of digits.
        assert max(first.values()) < 1_200 and min(first.values()) > 800, first  # 6.5 sd
        second = Counter(name[len(prefix): len(prefix) + 2] for name in names)
        assert len(second) == 256, prefix


def test_ids_made_in_a_row_do_not_share_a_prefix():
    """Consecutive uploads land on different partitions, not on the newest one."""
    ids = [new_job_id() for _ in range(64)]
    assert len({i[:2] for i in ids}) > 32
