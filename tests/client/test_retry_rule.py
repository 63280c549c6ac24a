"""The statuses the SDK retries are the contract's ("Which answers a client retries"), read
from docs/contract.md itself, and a request that is not safe to repeat meets only the first set."""
from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from image_jobs import ConnectionFailed, client as sdk_client
from image_jobs.errors import ApiError

from tests.client.fakes import FakeApi, FakeTime, job_answer, problem

CONTRACT = Path(__file__).resolve().parents[2] / "docs" / "contract.md"
ROTATE = "/api/v1/service/webhook/rotate-secret"


def contract_retry_sets() -> tuple[frozenset[int], frozenset[int]]:
    """(retried on any request, retried only on one safe to repeat), from the contract's list."""
    section = CONTRACT.read_text().split("## Which answers a client retries", 1)[1].split("\n## ", 1)[0]

    def statuses(lead: str) -> frozenset[int]:
        line = re.search(rf"^- {re.escape(lead)}, on ([^:]*):", section, re.M)
        assert line, f"the contract's retry rule has no line starting {lead!r}"
        return frozenset(int(n) for n in re.findall(r"\b\d{3}\b", line.group(1)))

    return statuses("Any request"), statuses("A request that is safe to repeat")


def test_the_sdk_retries_the_contracts_statuses():
    always, if_repeatable = contract_retry_sets()
    assert always == {429, 503} and if_repeatable == {502, 504}  # the parse found the rule
    assert sdk_client.RETRY_ALWAYS == always
    assert sdk_client.RETRY_IF_REPEATABLE == if_repeatable


@pytest.mark.parametrize("status", [502, 504])
def test_a_gateway_error_is_retried_on_a_get_but_not_on_a_rotation(status):
    time_ = FakeTime()
    api = FakeApi(time_).on("GET", "/api/v1/image-jobs/j-1", problem(status, "bad_gateway"), job_answer("queued"))
    api.on("POST", ROTATE, problem(status, "bad_gateway"))
    c = api.client()
    c.request("GET", "/api/v1/image-jobs/j-1")
    assert len(api.sent("GET")) == 2
    with pytest.raises(ApiError):
        c.rotate_service_webhook_secret()
    assert len(api.sent("POST", ROTATE)) == 1


def test_a_rotation_is_retried_on_429_and_503_but_not_after_a_lost_connection():
    time_ = FakeTime()
    api = FakeApi(time_).on("POST", ROTATE, problem(429, "rate_limited", retry_after="1"),
                            problem(503, "overloaded", retry_after="1"),
                            httpx.Response(200, json={"secret": "whsec_x"}))
    assert api.client().rotate_service_webhook_secret() == {"secret": "whsec_x"}
    assert len(api.sent()) == 3
    lost = FakeApi(time_).on("POST", ROTATE, httpx.ReadError("reset"))
    with pytest.raises(ConnectionFailed):
        lost.client().rotate_service_webhook_secret()
    assert len(lost.sent()) == 1
