"""The stored shapes of a job item held together: the version the adapter writes
(dynamo_shapes.SHAPE_VERSION), a fixture folder per shape a record can still have
(tests/fixtures/records/<version>/), a CHANGELOG.md line per shape, and today's fixtures
being exactly what today's code writes (so a change to the written shape cannot go unseen).
tests/integration/test_stored_shapes.py runs the use cases over the fixtures."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from chalicelib.adapters import dynamo_shapes
from chalicelib.adapters.dynamo_jobs import _OBJECT_FIELDS, DynamoJobStore, JobItem
from chalicelib.adapters.dynamo_shapes import OLDEST_READ, SHAPE_VERSION, SHAPES, upgrade

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "tests" / "fixtures" / "records"
FOLDERS = sorted(int(p.name) for p in RECORDS.iterdir() if p.is_dir() and p.name.isdigit())
# A section of CHANGELOG.md: "## [Unreleased]" or "## [0.2.0] - 2026-11-29".
SECTION = re.compile(r"^## \[(?P<version>[^\]]+)\](?: - (?P<date>\d{4}-\d{2}-\d{2}))?$", re.M)
SHAPE_LINE = re.compile(r"\*\*Stored shape (\d+)\*\*")


def changelog() -> dict[str, set[int]]:
    """Each section of CHANGELOG.md (newest first) -> the stored shapes it introduces."""
    text = (ROOT / "CHANGELOG.md").read_text()
    heads = list(SECTION.finditer(text))
    return {head["version"]: {int(n) for n in SHAPE_LINE.findall(
                text[head.end():heads[i + 1].start() if i + 1 < len(heads) else len(text)])}
            for i, head in enumerate(heads)}


def items(version: int, prefix: str = "job-") -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text())
            for p in sorted((RECORDS / str(version) / "items").glob(f"{prefix}*.json"))}


def named_keys(value) -> set[str]:
    """Every object key an item names, found without the reader: the original, and every
    string member `key` in any map, however deep."""
    found = set()
    if isinstance(value, dict):
        for name, member in value.items():
            if name in ("key", "original_key") and isinstance(member, dict) and "S" in member:
                found.add(member["S"])
            else:
                found |= named_keys(member)
    return found


def write_back(raw: dict) -> dict:
    """The item today's code writes for the job it reads from `raw`."""
    store = DynamoJobStore.__new__(DynamoJobStore)  # only the mapping, no table
    store._model = JobItem
    return store._to_item(DynamoJobStore._to_job(JobItem.from_raw_data(raw))).serialize()


def test_every_shape_is_documented_and_still_read_has_its_fixtures():
    assert sorted(SHAPES) == list(range(1, SHAPE_VERSION + 1))
    assert FOLDERS == list(range(OLDEST_READ, SHAPE_VERSION + 1)), (
        "every stored shape a record can still have needs its folder tests/fixtures/records/<version>/; "
        "a folder goes only with its shape's reader step (docs/architecture.md)")
    for version in FOLDERS:
        assert items(version), f"tests/fixtures/records/{version}/items/ holds no job item"


def test_the_changelog_names_every_shape_once_and_the_previous_release_is_one_of_them():
    sections = changelog()
    assert list(sections)[0] == "Unreleased", "CHANGELOG.md starts with an [Unreleased] section"
    introduced = [n for shapes in sections.values() for n in shapes]
    assert sorted(introduced) == list(range(1, SHAPE_VERSION + 1)), (
        f"each stored shape is named (**Stored shape N**) in exactly one section: {sections}")
    releases = [v for v in sections if v != "Unreleased"]
    released = {n for v in releases for n in sections[v]}
    # Two unreleased shapes may stand side by side (3, then 4 from issue 50): both newer than
    # every release's, the newest the one written now.
    assert all(n > max(released) for n in sections["Unreleased"]) and \
        (not sections["Unreleased"] or max(sections["Unreleased"]) == SHAPE_VERSION), \
        "the unreleased shapes are the newest, up to the one written now"
    # The previous release is the newest one; the shape it wrote is the newest named up to it.
    previous = releases[0]
    shape = max(n for v in releases for n in sections[v])
    assert shape in FOLDERS, f"the previous release ({previous}) wrote shape {shape}: record its items"
    if not sections["Unreleased"]:
        assert shape == SHAPE_VERSION, f"SHAPE_VERSION {SHAPE_VERSION} is named in no CHANGELOG section"


def test_todays_fixtures_are_exactly_what_todays_code_writes():
    for name, raw in items(SHAPE_VERSION).items():
        # write_id is the last write's own id, never a field of the job: each write makes anew.
        raw = {attribute: value for attribute, value in raw.items() if attribute != "write_id"}
        assert write_back(raw) == raw, (
            f"{name}: the written shape changed. Bump SHAPE_VERSION with a reader step for the "
            "old shape, record tests/fixtures/records/<new>/ and add the CHANGELOG line "
            "(docs/architecture.md, \"Changing a stored shape\")")


@pytest.mark.parametrize("version", [v for v in FOLDERS if v < SHAPE_VERSION])
def test_an_older_item_is_written_back_in_todays_shape_naming_every_object(version):
    known = {a.attr_name for a in JobItem.get_attributes().values()}  # stored names, not Python's
    for name, raw in items(version).items():
        written = write_back(raw)
        assert set(written) <= known, f"{name}: {sorted(set(written) - known)}"
        assert named_keys(written) == named_keys(raw), f"shape {version} {name}"
        assert upgrade(raw) == upgrade(upgrade(raw)), name


def test_the_orphan_scan_reads_every_attribute_that_names_an_object():
    for version in FOLDERS:
        for name, raw in items(version).items():
            naming = {attribute for attribute, value in raw.items() if named_keys({attribute: value})}
            assert naming <= set(_OBJECT_FIELDS), f"shape {version} {name}: {sorted(naming - set(_OBJECT_FIELDS))}"
            projected = {a: v for a, v in raw.items() if a in _OBJECT_FIELDS}
            assert named_keys(projected) == named_keys(raw)


def test_upgrade_leaves_an_item_of_todays_shape_as_it_is():
    for raw in items(SHAPE_VERSION).values():
        assert dynamo_shapes.upgrade(raw) == raw
