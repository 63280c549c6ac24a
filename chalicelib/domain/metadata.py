"""A job's metadata: the app's own flat map of strings, kept and shown exactly as given and
never interpreted (docs/contract.md "Metadata"). The bounds are here, once."""
from __future__ import annotations

import json
import re
from typing import Optional

from chalicelib.domain.errors import InvalidRequest

MAX_KEYS = 16
MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 512
# Keys and values together, UTF-8: it keeps a job's item within a few write units.
MAX_TOTAL_BYTES = 2048
# ASCII letters, digits and `_ - . :`: safe in every log, query and language's identifiers.
KEY = re.compile(r"[A-Za-z0-9_.:-]{1,%d}" % MAX_KEY_CHARS)
# Control characters (C0, DEL, C1) and lone surrogates are refused in values: what is left
# shows the same in every log line and terminal. Everything else of Unicode is taken.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def check(value: object) -> dict[str, str]:
    """The metadata as given, or InvalidRequest naming the bound it breaks."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidRequest("metadata must be a JSON object of strings")
    if len(value) > MAX_KEYS:
        raise InvalidRequest(f"metadata has more than {MAX_KEYS} keys")
    total = 0
    for key, item in value.items():
        if not isinstance(key, str) or not KEY.fullmatch(key):
            raise InvalidRequest(f"metadata keys are 1-{MAX_KEY_CHARS} of A-Z a-z 0-9 _ - . :")
        if not isinstance(item, str):
            raise InvalidRequest(f"metadata value of '{key}' must be a string")
        if len(item) > MAX_VALUE_CHARS:
            raise InvalidRequest(f"metadata value of '{key}' is longer than {MAX_VALUE_CHARS} characters")
        if _CONTROL.search(item):
            raise InvalidRequest(f"metadata value of '{key}' has a control character")
        total += len(key) + len(item.encode("utf-8"))
    if total > MAX_TOTAL_BYTES:
        raise InvalidRequest(f"metadata is larger than {MAX_TOTAL_BYTES} bytes (keys and values, UTF-8)")
    return dict(value)


def parse_header(value: Optional[str]) -> dict[str, str]:
    """The `Image-Jobs-Metadata` header: the JSON object (non-ASCII as \\u escapes)."""
    if value is None or not value.strip():
        return {}
    if len(value) > 8 * MAX_TOTAL_BYTES:
        raise InvalidRequest("The Image-Jobs-Metadata header is too long")
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        raise InvalidRequest("The Image-Jobs-Metadata header is not a JSON object") from None
    if parsed is None:  # `null` is not an object: what the spec says, and the JSON route too
        raise InvalidRequest("The Image-Jobs-Metadata header is not a JSON object")
    return check(parsed)


def canonical(metadata: dict[str, str]) -> bytes:
    """The same metadata, whatever its keys' order, as the fingerprint takes it."""
    return json.dumps(metadata, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def to_text(metadata: dict[str, str]) -> Optional[str]:
    """As stored: the JSON text in the order given (a map attribute would lose the order)."""
    return json.dumps(metadata, ensure_ascii=False, separators=(",", ":")) if metadata else None


def from_text(text: Optional[str]) -> dict[str, str]:
    """A stored job's metadata; none for the jobs made before metadata existed."""
    return json.loads(text) if text else {}
