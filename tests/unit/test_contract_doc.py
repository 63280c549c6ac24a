"""docs/contract.md is the project's contract: the shared base contract and what the project
adds to it. It must say at least everything the base says; it may say more (a section, a code).
"""
from pathlib import Path

import pytest

from tests.markdown import headings, stable_codes

ROOT = Path(__file__).resolve().parents[2]


def shared_contract() -> Path | None:
    """The base contract, `shared/CONTRACT.md` beside this checkout or beside a folder above it
    (a git worktree sits a level deeper than the checkout); a plain clone has none."""
    for folder in ROOT.parents:
        candidate = folder / "shared" / "CONTRACT.md"
        if candidate.exists():
            return candidate
    return None


SHARED = shared_contract()
NO_BASE = "no shared/CONTRACT.md beside this checkout (a plain clone): nothing to compare with"


def project_contract() -> str:
    return (ROOT / "docs" / "contract.md").read_text()


def test_the_project_contract_has_the_sections_a_client_needs():
    text = headings(project_contract())
    for heading in ("## Statuses", "## Stable error codes", "## How a client polls"):
        assert any(line.startswith(heading) for line in text), heading


@pytest.mark.skipif(SHARED is None, reason=NO_BASE)
def test_the_project_contract_has_every_section_of_the_base():
    ours = set(headings(project_contract()))
    assert [line for line in headings(SHARED.read_text()) if line not in ours] == []


@pytest.mark.skipif(SHARED is None, reason=NO_BASE)
def test_the_project_contract_has_every_stable_code_of_the_base():
    base = stable_codes(SHARED.read_text())
    assert base, "the base contract's stable codes could not be read"
    assert sorted(base - stable_codes(project_contract())) == []


def test_a_section_or_code_left_out_is_found():
    base = "# C\n## A\n```\n# not a heading\n```\n## Stable error codes\n`x`, `y`.\n- `x` note\n"
    ours = "# C\n## Stable error codes\n`x`, `z`.\n## More\n"
    assert [line for line in headings(base) if line not in set(headings(ours))] == ["## A"]
    assert stable_codes(base) - stable_codes(ours) == {"y"}
