"""A fake clock and a scripted API behind httpx.MockTransport, for the schedule and the retries."""
from __future__ import annotations

import json
from typing import Callable, Optional, Union

import httpx

from image_jobs import Client

API = "http://api.test"
JOB_PATH = "/api/v1/image-jobs/j-1"
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 60  # only the magic matters to the client


class FakeTime:
    """clock() and sleep() of one fake timeline: sleeping moves the clock, nothing else does."""

    def __init__(self, start: float = 1000.0):
        self.now = start
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds


Answer = Union[httpx.Response, Exception, Callable[[httpx.Request], httpx.Response]]


def job_answer(status: str, retry_after: Optional[str] = "2", code: int = 200, **fields) -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return httpx.Response(code, headers=headers, json={"job_id": "j-1", "status": status, **fields})


def accepted(status: str = "queued", retry_after: str = "2", **fields) -> httpx.Response:
    return httpx.Response(202, headers={"Location": JOB_PATH, "Retry-After": retry_after},
                          json={"job_id": "j-1", "status": status, "created_at": "2026-07-15T10:00:00Z",
                                **fields})


def problem(status: int, code: str, retry_after: Optional[str] = None) -> httpx.Response:
    headers = {"Content-Type": "application/problem+json"}
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    return httpx.Response(status, headers=headers, content=json.dumps(
        {"type": f"urn:image-jobs:problem:{code}", "title": code, "status": status, "detail": code,
         "code": code}).encode())


class FakeApi:
    """Answers each (method, path) from its own script, in order; records every request and when."""

    def __init__(self, time: FakeTime):
        self.time = time
        self.scripts: dict[tuple[str, str], list[Answer]] = {}
        self.requests: list[tuple[float, httpx.Request]] = []

    def on(self, method: str, path: str, *answers: Answer) -> "FakeApi":
        self.scripts.setdefault((method, path), []).extend(answers)
        return self

    def handle(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append((self.time.now, request))
        key = (request.method, request.url.path)
        script = self.scripts.get(key)
        assert script, f"unexpected {key}"
        answer = script.pop(0) if len(script) > 1 else script[0]  # the last answer repeats
        if isinstance(answer, Exception):
            raise answer
        return answer(request) if callable(answer) else answer

    def sent(self, method: Optional[str] = None, path: Optional[str] = None) -> list[httpx.Request]:
        return [r for _, r in self.requests
                if (method is None or r.method == method) and (path is None or r.url.path == path)]

    def times(self, method: str, path: str) -> list[float]:
        return [t for t, r in self.requests if r.method == method and r.url.path == path]

    def client(self, random: Callable[[], float] = lambda: 0.5, waits: bool = False, **options) -> Client:
        """A client of this fake; `waits` off unless a test is about them, so the schedule
        tests see the contract's schedule alone."""
        timeout = options.pop("timeout", 30.0)
        return Client(API, "tok", http=httpx.Client(transport=httpx.MockTransport(self.handle), timeout=timeout),
                      clock=self.time.clock, sleep=self.time.sleep, random=random, waits=waits, **options)
