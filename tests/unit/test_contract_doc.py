"""docs/contract.md is the repo's own copy of the contract: it must not drift from the shared one."""
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "CONTRACT.md"


def repo_copy() -> str:
    text = (ROOT / "docs" / "contract.md").read_text()
    return text.split("-->\n", 1)[1]


def test_the_repo_copy_has_the_contract_sections():
    text = repo_copy()
    for heading in ("## Statuses", "## Stable error codes", "## How a client polls"):
        assert heading in text


@pytest.mark.skipif(not SHARED.exists(), reason="no shared CONTRACT.md beside this checkout")
def test_the_repo_copy_is_the_shared_contract():
    assert repo_copy() == SHARED.read_text()
