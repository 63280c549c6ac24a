"""Webhooks signed by the server's own code (chalicelib/usecases/webhooks.py signature_headers),
printed as JSON for the JavaScript package's verifyWebhook test (clients/js/test/unit/
webhooks.test.mjs runs this with the repository's Python)."""
from __future__ import annotations

import dataclasses
import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from chalicelib.domain.webhooks import Webhook  # noqa: E402
from chalicelib.usecases.webhooks import new_secret, signature_headers  # noqa: E402


def main() -> None:
    now = datetime.now(timezone.utc).replace(microsecond=0)
    hook = Webhook(owner="alice", url="https://hooks.example.com/h", secret=new_secret(), created_at=now)
    rotated = dataclasses.replace(hook, secret=new_secret(), previous_secret=hook.secret,
                                  previous_until=now + timedelta(hours=24))
    body = json.dumps({"job_id": "6a0e3f5c-1", "status": "ready", "note": "ünï"}, separators=(",", ":"))
    print(json.dumps({
        "now": int(now.timestamp()),
        "body": body,
        "secret": hook.secret,
        "signed": signature_headers(hook, "msg_one", now, body.encode()),
        "rotated_secret": rotated.secret,
        "rotated": signature_headers(rotated, "msg_two", now, body.encode()),
        "stranger": new_secret(),
    }))


if __name__ == "__main__":
    main()
