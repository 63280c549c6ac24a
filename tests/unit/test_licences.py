"""The project is Apache-2.0 (LICENSE): what the Lambda package ships must allow that.

Read from the installed distributions' own metadata, requirements.txt and everything they
require, so a new dependency under a licence we cannot ship fails here, not in a review.
"""
from __future__ import annotations

import importlib.metadata as metadata
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Licences that let Apache-2.0 code be combined with them and shipped (SPDX ids, or the words
# an older package's classifiers use for them).
PERMISSIVE = {"Apache-2.0", "MIT", "MIT-0", "MIT-CMU", "BSD-2-Clause", "BSD-3-Clause",
              "PSF-2.0", "ISC", "HPND", "Apache Software License", "MIT License",
              "BSD License", "MIT No Attribution License (MIT-0)",
              "Historical Permission Notice and Disclaimer (HPND)"}
# The one known exception, and why it is acceptable (docs/deploy.md says so too): pillow-heif's
# own code is BSD-3-Clause (its License field), but its binary wheel bundles libheif and
# libde265 (LGPL-3.0) and libx265 (GPL-2.0, an encoder the service never calls), so its
# classifier says GPLv2. Running the package in one's own AWS
# account distributes nothing; whoever redistributes a built package must meet those terms.
# pyvips-binary is libvips itself (LGPL-2.1+, its wheel says LGPLv3+ for what it bundles),
# loaded as a shared library by pyvips (MIT): the LGPL's terms for a library used unchanged.
BUNDLES_COPYLEFT = {"pillow-heif", "pyvips-binary"}


def shipped() -> set[str]:
    """requirements.txt's distributions and every distribution they require, by name."""
    names = {re.split(r"[=<>\[ ;]", line.strip())[0].lower()
             for line in (ROOT / "requirements.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")}
    seen: set[str] = set()
    while names:
        name = names.pop()
        if name in seen:
            continue
        seen.add(name)
        for requirement in metadata.requires(name) or []:
            if "extra ==" in requirement:
                continue
            names.add(re.split(r"[=<>!~\[ ;(]", requirement)[0].lower().replace("_", "-"))
    return seen


def licences(name: str) -> set[str]:
    meta = metadata.metadata(name)
    found = set()
    expression = meta.get("License-Expression")
    if expression:
        found.update(part.strip("() ") for part in re.split(r" OR | AND ", expression))
    for classifier in meta.get_all("Classifier") or []:
        if classifier.startswith("License :: OSI Approved :: "):
            found.add(classifier.rsplit(" :: ", 1)[1])
    if not found and meta.get("License"):
        found.add(meta["License"].strip().splitlines()[0])
    return found


def test_every_shipped_distribution_allows_apache_2():
    refused = {}
    for name in sorted(shipped() - BUNDLES_COPYLEFT):
        found = licences(name)
        # Dual-licensed packages need one permissive choice; a missing licence is a refusal.
        if not found & PERMISSIVE and not any("BSD" in f or "Apache" in f for f in found):
            refused[name] = found
    assert refused == {}, f"a shipped dependency's licence does not allow Apache-2.0: {refused}"


def test_the_known_copyleft_bundle_is_still_there_and_still_named():
    # If pillow-heif stops declaring GPL (or leaves the package), the exception goes too.
    assert BUNDLES_COPYLEFT <= shipped()
    assert not licences("pillow-heif") & PERMISSIVE
    assert metadata.metadata("pillow-heif")["License"].startswith("BSD-3-Clause")
    assert licences("pyvips-binary") == {"GNU Lesser General Public License v3 or later (LGPLv3+)"}
    assert licences("pyvips") & PERMISSIVE


def test_the_repository_carries_the_apache_licence():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
