"""A registered webhook, its breaker, one event to deliver, and a vetted address to dial
(chalicelib/usecases/webhooks.py delivers them)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from chalicelib.domain.jobs import JobStatus


@dataclass(frozen=True)
class Breaker:
    """The owner's endpoint as deliveries last found it (usecases/webhooks.py says when it
    opens). While it is open, the owner's events wait until `failing_until` without calling."""

    failing_until: datetime | None = None
    failures: int = 0                 # the endpoint's failures in a row: the step of its backoff
    suspect_event: str | None = None  # the last event answered 5xx while the breaker was closed

    def is_open(self, now: datetime) -> bool:
        return self.failing_until is not None and now < self.failing_until


# The service webhook's receiver, where an owner's webhook has the owner: not a subject any
# token can carry (chalicelib/http/auth.py refuses it), so no owner can take its place.
SERVICE_RECEIVER = "@service"


@dataclass(frozen=True)
class Webhook:
    """A registered endpoint: an owner's (`owner` is the owner) or the service webhook
    (`owner` is SERVICE_RECEIVER). `secret` signs deliveries (whsec_ + base64); after a
    rotation the previous secret also signs until `previous_until`, so a receiver can switch
    over without rejecting anything. `events`: the statuses the service webhook is sent
    (an owner's has none and is sent the terminal ones)."""

    owner: str
    url: str
    secret: str
    created_at: datetime
    previous_secret: str | None = None
    previous_until: datetime | None = None
    breaker: Breaker = Breaker()
    events: tuple[JobStatus, ...] = ()

    def sent(self, status: JobStatus) -> bool:
        return status in self.events if self.events else status.terminal


@dataclass(frozen=True)
class WebhookEvent:
    """One event to deliver: `event_id` is the webhook-id, the same on every retry.
    `attempts` counts the attempts made so far; `not_before` is when the next may be made.
    `owner` is the job's owner; `service`: for the service webhook, not the owner's, and
    then `status` is the one it announces (a terminal one when absent)."""

    event_id: str
    owner: str
    job_id: str
    attempts: int = 0
    not_before: datetime | None = None
    service: bool = False
    status: str | None = None

    @property
    def receiver(self) -> str:
        """Whose endpoint it goes to: the key of its webhook, its breaker and its share of
        the deliveries in flight."""
        return SERVICE_RECEIVER if self.service else self.owner

    def to_json(self) -> str:
        data = {"event_id": self.event_id, "owner": self.owner, "job_id": self.job_id}
        if self.service:
            data["service"] = True
        if self.status is not None:
            data["status"] = self.status
        if self.attempts:
            data["attempts"] = self.attempts
        if self.not_before is not None:
            data["not_before"] = self.not_before.isoformat()
        return json.dumps(data)

    @classmethod
    def from_json(cls, body: str) -> "WebhookEvent":
        """ValueError for a body that is no webhook event."""
        data = json.loads(body)
        if not isinstance(data, dict) or not all(
                isinstance(data.get(k), str) and data[k] for k in ("event_id", "owner", "job_id")):
            raise ValueError("not a webhook event")
        attempts = data.get("attempts", 0)
        if type(attempts) is not int or attempts < 0:
            raise ValueError("not a webhook event")
        not_before = data.get("not_before")
        if not_before is not None:
            if not isinstance(not_before, str):
                raise ValueError("not a webhook event")
            not_before = datetime.fromisoformat(not_before)
            if not_before.tzinfo is None:
                raise ValueError("not a webhook event")
        service, status = data.get("service", False), data.get("status")
        if type(service) is not bool or not (status is None or isinstance(status, str)):
            raise ValueError("not a webhook event")
        return cls(event_id=data["event_id"], owner=data["owner"], job_id=data["job_id"],
                   attempts=attempts, not_before=not_before, service=service, status=status)


# What an attempt that got no answer (or was never made) is called where clients see it
# (GET /webhook's `deliveries`), the words of docs/contract.md "Notifications".
UNANSWERED = ("tls", "dns", "timeout", "refused", "blocked", "protocol", "error")
TEST_EVENT = "webhook.test"
DELIVERY_LOG_SIZE = 20  # the attempts kept per receiver


@dataclass(frozen=True)
class Attempt:
    """One delivery attempt as GET /webhook shows it. `event`: the status the event announces
    (or TEST_EVENT); `status_code`: the receiver's answer, `reason` (one of UNANSWERED) when
    it gave none; `breaker`: the receiver's breaker after it, "open" or "closed";
    `next_attempt_at`: when the event is tried again (None: delivered, or given up)."""

    at: datetime
    webhook_id: str
    event: str
    job_id: str | None
    attempt: int
    ms: int
    outcome: str  # delivered, retrying, dead_lettered; a test event's: delivered or failed
    status_code: int | None = None
    reason: str | None = None
    breaker: str = "closed"
    next_attempt_at: datetime | None = None


@dataclass(frozen=True)
class Address:
    """A resolved address to connect to: what the SSRF guard vetted is what is dialled."""

    ip: str
    port: int
