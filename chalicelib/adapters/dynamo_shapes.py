"""The job item's stored shapes: which shapes a record in the table can still have, and the
one function that brings any of them to the shape this release writes (`upgrade`).

A record outlives the release that wrote it: up to the longest retention plus the TTL's lag
(DynamoDB deletes expired items late, within days), and a job that is never swept (no
`sweep_key`) lives until its TTL. So every shape a release ever wrote is read here until no
record of it can be left; docs/architecture.md, "Changing a stored shape", has the rule and
the steps. Every read of a job item goes through `upgrade` (JobItem.from_raw_data and
JobItem.deserialize), so GET, events, push, delete, cancel, the sweeper and the orphan
scan all see the same job, and the orphan scan's projection (OBJECT_ATTRIBUTES) names every
attribute of every shape that holds an object key.

Each step takes an item in DynamoDB's raw attribute form (`{"name": {"S": ...}}`), whole
or projected, and gives it back in the next shape; it leaves an item already there as it is,
since one item may have been written by one release and updated in place by another.
"""
from __future__ import annotations

from typing import Callable

# The shape this release writes. A change to what a job item stores bumps it, with a reader
# step below, a fixture folder tests/fixtures/records/<version>/ and a CHANGELOG.md line
# (tests/unit/test_stored_shapes.py holds the four together).
SHAPE_VERSION = 6

# What each shape is, by the version that first wrote it (CHANGELOG.md has the releases).
SHAPES = {
    1: "job items with `display` and `thumb` maps (key, width, height, content_type); "
       "rendition keys renditions/<id>/<name>.jpg; no `sweep_key`",
    2: "adds `sweep_key` (`<status>#<shard>`, the sharded due index's partition key); "
       "rendition keys fenced per attempt, renditions/<id>/<attempt>/<name>.jpg",
    3: "one `renditions` map keyed by rendition name replaces `display` and `thumb`; each "
       "entry may hold `variants` ({format: {key, bytes}}); adds `formats`, `placeholder`, "
       "`upload_method`, `declared_sha256`, `multipart_upload_id`, `part_size`, and `sizes` "
       "(the renditions asked for, comma-separated; absent: `display,thumb`); `renditions` "
       "may hold `thumb_512`; may carry `write_id` (the last conditional write's id) and "
       "`metadata` (JSON text); both optional, absent on items written before them: no "
       "reader step",
    4: "adds `source` (a map: w, h, f, b, t, c, a: width, height, format, bytes, "
       "captured_at, color_space, has_alpha), the original's facts once read, a ready job's `phash` (16 hex "
       "characters) and `duplicate_of` (the job whose renditions it copied); absent on items "
       "written before them and on jobs not that far yet: no reader step. A new kind of "
       "item beside the jobs, `content#<hash>` (job_id, expires_at): the duplicate index",
    5: "adds `focus` (a map: x, y, s: the fractions of the upright image and the source, "
       "`client`, `faces`, `saliency` or `centre`): the client's from the upload, then the "
       "point a ready job's squares were placed around; absent on items written before it "
       "(their squares are centre crops, and their jobs show no focus) and on jobs without a "
       "client's focus until they are ready: an item without it reads as a job without, no "
       "reader step",
    6: "an animated source's rendition entry may hold `animation` (key, width, height, frames, "
       "duration_ms, bytes; its key renditions/<id>/<attempt>/<name>.animated.webp); `source` adds "
       "n, d (frames, duration_ms); a ready job may carry `animation_skipped` (why it has no "
       "animation); absent on items written before them: no reader step (a job without reads "
       "as made before animations: no frame count, no animation)",
}

# The oldest shape a record can still have, so the oldest still read (docs/architecture.md
# says when it may rise); each shape from it to SHAPE_VERSION has its fixture folder.
OLDEST_READ = 1

# The renditions of shapes 1 and 2, each in an attribute of its own name.
_SINGLE_RENDITIONS = ("display", "thumb")

# Every attribute that names an object, in any shape read here: what the orphan scan must
# read of a job so that it never deletes an object a record still names.
OBJECT_ATTRIBUTES = ("original_key", "renditions", *_SINGLE_RENDITIONS)

Item = dict  # a job item in DynamoDB's raw attribute form


def _renditions_as_one_map(item: Item) -> Item:
    """Shapes 1 and 2 -> 3: `display` and `thumb` become entries of `renditions`, as they
    are (a rendition's map kept its attributes when it moved)."""
    single = {name: item[name] for name in _SINGLE_RENDITIONS if name in item}
    if not single:
        return item
    upgraded = {k: v for k, v in item.items() if k not in _SINGLE_RENDITIONS}
    if "renditions" not in upgraded:
        upgraded["renditions"] = {"M": single}
    return upgraded


# In order, each step bringing its shapes one step further. Shape 1 differs from 2 only by
# `sweep_key`, an attribute of the due index that no reader of a job uses, so no step; an
# item without `sizes` (every shape, and shape 3 before issue 33) reads as the two
# renditions every such job has (DynamoJobStore._to_job), so no step either.
_STEPS: tuple[Callable[[Item], Item], ...] = (
    _renditions_as_one_map,
)


def upgrade(item: Item) -> Item:
    """A job item of any shape a record can still have, in the shape SHAPE_VERSION writes."""
    for step in _STEPS:
        item = step(item)
    return item
