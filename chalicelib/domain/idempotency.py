"""The Idempotency-Key's alphabet, as docs/contract.md and openapi.yaml's IdempotencyKey say,
and the record a key leaves behind."""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Optional

from chalicelib.domain.errors import InvalidRequest

# 1-255 printable ASCII characters, less a space at either end: HTTP drops those from a
# header's value, so such a key could never arrive as it was sent.
IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]{0,253}[\x21-\x7e])?")


def check_idempotency_key(value: Optional[str]) -> Optional[str]:
    """The key itself, or None for no key; 400 invalid_request for any other."""
    if value is not None and not IDEMPOTENCY_KEY.fullmatch(value):
        raise InvalidRequest("Idempotency-Key must be 1-255 printable ASCII characters, "
                             "not starting or ending with a space")
    return value


@dataclass(frozen=True)
class IdempotencyRecord:
    scope: str          # a hash of owner + operation + key
    fingerprint: str    # SHA-256 of the file bytes and the options
    job_id: str
    expires_at: datetime
