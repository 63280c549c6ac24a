"""The invocation's time budget (chalicelib/runtime/deadline.py) inside botocore.

Every client gets timeouts and an attempt count from SdkLimits, and a `before-send` hook
that refuses an attempt the budget cannot afford. botocore emits `before-send` once per
attempt, retries included, and treats our exception as not retryable, so a call stops at
once instead of sleeping and retrying past the deadline.
"""
from __future__ import annotations

from botocore.config import Config
from botocore.exceptions import BotoCoreError

from chalicelib.runtime import deadline
from chalicelib.runtime.deadline import SdkLimits


class BudgetSpent(BotoCoreError):
    """An SDK-level error, so the adapters turn it into TransientError like any outage."""

    fmt = "Not enough time left in this invocation for another attempt"


def client_config(limits: SdkLimits, **extra) -> Config:
    return Config(connect_timeout=limits.connect_timeout, read_timeout=limits.read_timeout,
                  retries={"mode": "standard", "max_attempts": limits.max_attempts}, **extra)


def pynamodb_connection(limits: SdkLimits) -> dict:
    """The same limits in PynamoDB's terms (it counts retries, not attempts)."""
    return {"connect_timeout_seconds": limits.connect_timeout,
            "read_timeout_seconds": limits.read_timeout,
            "max_retry_attempts": limits.max_attempts - 1}


def guard(client, limits: SdkLimits):
    """Install the per-attempt budget check on a botocore client; returns the client."""

    def before_send(**_):
        current = deadline.current()
        if current is not None and not current.allows(limits.attempt_seconds):
            raise BudgetSpent()

    # `before-send` alone matches every service and operation (botocore's events nest).
    client.meta.events.register_first("before-send", before_send, unique_id="image-jobs-budget")
    return client
