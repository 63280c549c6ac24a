"""The headers of a held read: RFC 7240's `Prefer: wait=N` and `Preference-Applied`, and the
job's version as an `ETag` that `If-None-Match` names back."""
from __future__ import annotations

import re
from typing import Optional

from chalicelib.domain.jobs import Job

# One preference: a token, optionally `=` and a token or quoted string, then parameters.
_PREFERENCE = re.compile(r'\s*([!#$%&\'*+\-.^_`|~0-9A-Za-z]+)\s*(?:=\s*("(?:[^"\\]|\\.)*"|[^\s;,]*))?')
_ENTITY_TAG = re.compile(r'\s*(?:W/)?"([^"]*)"\s*')


def requested_wait(header: Optional[str], max_wait_seconds: int) -> Optional[int]:
    """The seconds of the first valid `wait` preference, or None: also when the stage's
    MAX_WAIT_SECONDS is 0 (waits off). A malformed one is ignored, as RFC 7240 asks of a
    preference the server cannot honour."""
    if not header or not max_wait_seconds:
        return None
    for preference in _split(header):
        match = _PREFERENCE.match(preference)
        if match is None or match.group(1).lower() != "wait":
            continue
        value = (match.group(2) or "").strip('"')
        if value.isascii() and value.isdigit() and len(value) <= 6:
            return int(value)
    return None


def applied(seconds: int) -> str:
    return f"wait={seconds}"


def etag(job: Job) -> str:
    """Weak: two answers with one tag say the same state, not the same bytes (each carries
    freshly presigned URLs)."""
    return f'W/"{job.version}"'


def known_versions(header: Optional[str]) -> Optional[frozenset[str]]:
    """The versions an `If-None-Match` names (weak or strong, compared weakly); None when
    there is none, or only `*` (which names no particular state)."""
    if not header:
        return None
    versions = set()
    for part in header.split(","):
        match = _ENTITY_TAG.fullmatch(part)
        if match is not None:
            versions.add(match.group(1))
    return frozenset(versions) or None


def _split(header: str) -> list[str]:
    """Comma-separated preferences; a comma inside a quoted string does not split."""
    parts, current, quoted, escaped = [], [], False, False
    for char in header:
        if escaped:
            escaped = False
        elif char == "\\" and quoted:
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return parts
