"""Verify a webhook the service sent (Standard Webhooks, https://www.standardwebhooks.com):

    from image_jobs import verify_webhook

    event = verify_webhook(secret, request.headers, request.body)  # the job, or a webhook.test

The signature is base64(HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<body>")), key
the base64 after `whsec_`; `webhook-signature` holds one `v1,<signature>` per secret the
service signed with, space-separated (two for a day after a rotation). Pass every secret you
accept during your own switch-over; any one matching is enough.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from typing import Any, Mapping, Optional, Sequence, Union

from .errors import WebhookVerificationError

SECRET_PREFIX = "whsec_"
# How far the sender's timestamp may be from this clock, either way (the spec's default).
TOLERANCE_SECONDS = 300


def verify_webhook(secret: Union[str, Sequence[str]], headers: Mapping[str, str],
                   body: Union[bytes, str], *, tolerance: float = TOLERANCE_SECONDS,
                   now: Optional[float] = None) -> Any:
    """The event's JSON body, once its signature matches one of `secret` and its timestamp
    is within `tolerance` seconds of `now` (default: this clock). WebhookVerificationError
    otherwise. `body`: the raw bytes as received (a re-serialised JSON would not match)."""
    found = {k.lower(): v for k, v in headers.items()}
    webhook_id = found.get("webhook-id")
    timestamp = found.get("webhook-timestamp")
    signatures = found.get("webhook-signature")
    if not (webhook_id and timestamp and signatures):
        raise WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature")
    try:
        sent_at = int(timestamp)
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp is not a number") from None
    if abs((time.time() if now is None else now) - sent_at) > tolerance:
        raise WebhookVerificationError("webhook-timestamp is too old or too new")
    raw = body.encode() if isinstance(body, str) else bytes(body)
    signed = f"{webhook_id}.{sent_at}.".encode() + raw
    expected = [_signature(key, signed) for key in _keys(secret)]
    given = [part.split(",", 1)[1].encode() for part in signatures.split() if part.startswith("v1,")]
    if not any(hmac.compare_digest(g, e) for g in given for e in expected):
        raise WebhookVerificationError("no signature matches")
    try:
        return json.loads(raw)
    except ValueError:
        raise WebhookVerificationError("the body is not JSON") from None


def _keys(secret: Union[str, Sequence[str]]) -> list:
    secrets = [secret] if isinstance(secret, str) else list(secret)
    if not secrets:
        raise ValueError("verify_webhook needs at least one secret")
    keys = []
    for one in secrets:
        text = one[len(SECRET_PREFIX):] if one.startswith(SECRET_PREFIX) else one
        try:
            keys.append(base64.b64decode(text, validate=True))
        except (binascii.Error, ValueError):
            raise ValueError("a webhook secret is whsec_ followed by base64") from None
    return keys


def _signature(key: bytes, signed: bytes) -> bytes:
    return base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
