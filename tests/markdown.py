"""Reading the project's Markdown docs in tests: sections, headings, back-quoted words."""
from __future__ import annotations

import re


def section(markdown: str, heading: str) -> str:
    """The text under `## heading`, up to the next heading of that level."""
    return markdown.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def headings(markdown: str) -> list[str]:
    """Its heading lines, outside fenced code blocks."""
    found, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.append(line.strip())
    return found


def backquoted(text: str) -> set[str]:
    """The lower-case words in back quotes: how the docs write a code."""
    return set(re.findall(r"`([a-z_]+)`", text))


def stable_codes(contract: str) -> set[str]:
    """The codes a contract lists: the first paragraph of "Stable error codes", before its notes."""
    return backquoted(section(contract, "Stable error codes").strip().split("\n- ", 1)[0])
