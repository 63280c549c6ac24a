"""local/services.py warm_up: the runner's first request, which says why the API fails."""
from __future__ import annotations

import jwt
import pytest

from chalicelib.config import DEFAULT_JWT_SECRET
from local.services import WARM_UP_SUBJECT, warm_up
from tests.scripted_http import ScriptedServer

STORE_GONE = {"type": "about:blank", "title": "Storage unavailable", "status": 503,
              "code": "storage_unavailable", "detail": "the job store did not answer"}


def claims(headers) -> dict:
    token = headers["Authorization"].removeprefix("Bearer ")
    return jwt.decode(token, DEFAULT_JWT_SECRET, algorithms=["HS256"], options={"verify_exp": False})


def test_a_failing_store_is_reported_and_every_try_has_a_fresh_token():
    """An API whose store is gone answers 503: that is the report, never a 401 from a token
    that expired while the warm-up waited."""
    now = [1_000_000]

    def clock():
        now[0] += 30  # each try half a minute after the last: a token lives 60 s
        return now[0]

    def api(_path, headers):
        if claims(headers)["exp"] < now[0]:
            return 401, {"code": "unauthorized"}
        return 503, STORE_GONE

    with ScriptedServer(api) as server:
        with pytest.raises(RuntimeError) as raised:
            warm_up(server.url, DEFAULT_JWT_SECRET, timeout=0.3, clock=clock, interval=0.01)
    message = str(raised.value)
    assert "503 storage_unavailable: the job store did not answer" in message
    assert "401" not in message
    tried = [claims(headers) for _, headers in server.requests]
    assert len(tried) >= 3  # past the first token's life
    assert [t["iat"] for t in tried] == [1_000_000 + 30 * n for n in range(1, len(tried) + 1)]
    assert {t["sub"] for t in tried} == {WARM_UP_SUBJECT}


def test_an_api_that_never_answers_is_reported_as_such():
    with pytest.raises(RuntimeError, match=r"the API does not answer \("):
        warm_up("http://127.0.0.1:9", DEFAULT_JWT_SECRET, timeout=0.2, interval=0.01)


def test_job_not_found_means_the_api_serves():
    with ScriptedServer(lambda *_: (404, {"code": "job_not_found"})) as server:
        warm_up(server.url, DEFAULT_JWT_SECRET, timeout=5, interval=0.01)
    assert len(server.requests) == 1
