"""The SDK's verify_webhook (clients/python/src/image_jobs/webhooks.py) against the server's own
signing (chalicelib/usecases/webhooks.py signature_headers) and the standardwebhooks package."""
from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta, timezone

import pytest
from standardwebhooks import Webhook as StandardWebhook

from chalicelib.domain.webhooks import Webhook
from chalicelib.usecases.webhooks import new_secret, signature_headers
from image_jobs import WebhookVerificationError, verify_webhook

# Collected minutes before it runs under xdist: a signature's time is taken when it is made.
NOW = datetime.now(timezone.utc).replace(microsecond=0)
BODY = json.dumps({"job_id": "6a0e3f5c-1", "status": "ready"}, separators=(",", ":")).encode()


def signed(hook: Webhook, body: bytes = BODY, at: datetime | None = None) -> dict:
    return signature_headers(hook, "msg_2Lh3", at or datetime.now(timezone.utc).replace(microsecond=0), body)


@pytest.fixture
def hook() -> Webhook:
    return Webhook(owner="alice", url="https://hooks.example.com/h", secret=new_secret(), created_at=NOW)


def test_an_event_signed_by_the_server_verifies_and_its_body_is_returned(hook):
    headers = {k.title(): v for k, v in signed(hook).items()}  # as a framework hands them over
    assert verify_webhook(hook.secret, headers, BODY) == json.loads(BODY)
    assert verify_webhook(hook.secret, headers, BODY.decode()) == json.loads(BODY)


@pytest.mark.parametrize("change", ["body", "secret", "id", "signature", "headers"])
def test_anything_changed_is_refused(hook, change):
    headers, body, secret = signed(hook), BODY, hook.secret
    if change == "body":
        body = BODY.replace(b"ready", b"failed")
    elif change == "secret":
        secret = new_secret()
    elif change == "id":
        headers["webhook-id"] = "msg_other"
    elif change == "signature":
        headers["webhook-signature"] = "v2," + headers["webhook-signature"].split(",", 1)[1]
    else:
        del headers["webhook-timestamp"]
    with pytest.raises(WebhookVerificationError):
        verify_webhook(secret, headers, body)


def test_the_timestamp_must_be_within_five_minutes_either_way(hook):
    headers = signed(hook)
    sent = int(headers["webhook-timestamp"])
    for now in (sent - 300, sent + 300):
        verify_webhook(hook.secret, headers, BODY, now=now)
    for now in (sent - 301, sent + 301):
        with pytest.raises(WebhookVerificationError):
            verify_webhook(hook.secret, headers, BODY, now=now)
    verify_webhook(hook.secret, headers, BODY, now=sent + 3600, tolerance=3601)


def test_during_a_rotation_either_secret_verifies_and_several_may_be_given(hook):
    old = hook.secret
    rotated = dataclasses.replace(hook, secret=new_secret(), previous_secret=old,
                                  previous_until=NOW + timedelta(hours=24))
    headers = signed(rotated)
    assert len(headers["webhook-signature"].split()) == 2
    for secret in (old, rotated.secret, [new_secret(), rotated.secret]):
        verify_webhook(secret, headers, BODY)
    with pytest.raises(WebhookVerificationError):
        verify_webhook([new_secret(), new_secret()], headers, BODY)


def test_it_agrees_with_the_standardwebhooks_package(hook):
    at = datetime.now(timezone.utc).replace(microsecond=0)
    signature = StandardWebhook(hook.secret).sign("msg_x", at, BODY.decode())
    headers = {"webhook-id": "msg_x", "webhook-timestamp": str(int(at.timestamp())),
               "webhook-signature": signature}
    assert verify_webhook(hook.secret, headers, BODY) == json.loads(BODY)
    assert StandardWebhook(hook.secret).verify(BODY, signed(hook)) == json.loads(BODY)


def test_a_secret_that_is_no_whsec_base64_is_a_programming_error(hook):
    with pytest.raises(ValueError):
        verify_webhook("whsec_not base64!", signed(hook), BODY)
    with pytest.raises(ValueError):
        verify_webhook([], signed(hook), BODY)
