"""The rules both SDKs keep (tests/sdk_rules.json, which clients/js/test/unit/sdk-rules.test.mjs
runs too), run on the Python SDK: each case's scripted answers behind httpx.MockTransport on a
fake clock, and the outcome the table names."""
from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import httpx
import image_jobs
import pytest
from image_jobs import Client, Job

from tests.client.fakes import FakeTime

TABLE = json.loads((Path(__file__).resolve().parents[1] / "sdk_rules.json").read_text())
API = "http://api.test"
JPEG_START = b"\xff\xd8\xff\xe0"


class Scripted:
    """Answers each request by its name ('METHOD /path' on the API, 'METHOD http://host/path'
    elsewhere) from the case's answers in order, the last repeating; sets `stop` once
    `stop_after` answers were given."""

    def __init__(self, answers: Dict[str, List[Dict[str, Any]]], stop: threading.Event,
                 stop_after: Optional[int]):
        self.answers = {name: list(script) for name, script in answers.items()}
        self.sent: List[Tuple[str, httpx.Request]] = []
        self.stop, self.stop_after = stop, stop_after
        self.lock = threading.Lock()

    def handle(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        origin = f"{url.scheme}://{url.host}"
        name = f"{request.method} {url.path if origin == API else origin + url.path}"
        with self.lock:
            self.sent.append((name, request))
            script = self.answers.get(name)
            assert script, f"no answer scripted for {name}"
            answer = script.pop(0) if len(script) > 1 else script[0]
            if self.stop_after is not None and len(self.sent) >= self.stop_after:
                self.stop.set()
        if answer.get("lost"):
            raise httpx.ConnectError("connection refused", request=request)
        if answer.get("hang"):  # what a try that hangs ends with: its own read timeout
            raise httpx.ReadTimeout("timed out", request=request)
        body = answer.get("body")
        content = b"" if body is None else body.encode() if isinstance(body, str) else json.dumps(body).encode()
        return httpx.Response(answer.get("status", 200), headers=answer.get("headers", {}), content=content)


def run(case: Dict[str, Any]) -> Tuple[Optional[Job], Optional[Exception], Scripted]:
    stop = threading.Event()
    scripted = Scripted(case["answers"], stop, case.get("stop_after"))
    if case.get("stop_after") == 0:
        stop.set()
    time_ = FakeTime()
    client = Client(API, "tok", http=httpx.Client(transport=httpx.MockTransport(scripted.handle)),
                    clock=time_.clock, sleep=time_.sleep, random=lambda: 0.5, **case.get("client", {}))
    job: Optional[Job] = None
    try:
        for step in case["steps"]:
            job = perform(client, step, job, stop)
    except Exception as exc:  # the outcome says which class it must be
        return job, exc, scripted
    return job, None, scripted


def perform(client: Client, step: Dict[str, Any], job: Optional[Job], stop: threading.Event) -> Job:
    do = step["do"]
    if "job" in step:
        job = client.job(step["job"])
    keep = step.get("keep_stopped", False)
    if do == "upload":
        data = JPEG_START + bytes(step["size"] - len(JPEG_START))
        saved = step.get("saved") or {}
        # What the CLI does with what it saved of a file (clients/python/README.md).
        if saved.get("location"):
            resumed = client.resume_saved(saved["location"], data, stop=stop, keep_stopped=keep)
            if resumed is not None:
                return resumed
            saved = {}  # nothing to go on with: a new upload, with a new key
        return client.upload(data, idempotency_key=saved.get("idempotency_key"), stop=stop, keep_stopped=keep)
    assert job is not None, f"{do} needs a job"
    if do == "resume":
        return client.resume(job, JPEG_START + bytes(step["size"] - len(JPEG_START)), stop=stop, keep_stopped=keep)
    if do == "refresh":
        return job.refresh()
    if do == "cancel":
        return job.cancel()
    if do == "delete":
        job.delete()
        return job
    if do == "wait":
        return job.wait(deadline=60)
    raise AssertionError(f"unknown step {do}")


def renditions(job: Job) -> Dict[str, Any]:
    shown = {}
    for name, rendition in job.renditions.items():
        fields = dataclasses.asdict(rendition)
        del fields["name"]
        if fields["animation"] is None:  # a still's (the table's renditions are stills)
            del fields["animation"]
        shown[name] = fields
    return shown


@pytest.mark.parametrize("case", TABLE["cases"], ids=[c["name"] for c in TABLE["cases"]])
def test_the_rule(case):
    job, error, scripted = run(case)
    outcome = case["outcome"]
    if "error" in outcome:
        assert error is not None, f"expected {outcome['error']}, got {job}"
        assert isinstance(error, getattr(image_jobs, outcome["error"])), repr(error)
        if "error_job" in outcome:
            carried = getattr(error, "job", None)
            assert (carried.job_id if carried is not None else None) == outcome["error_job"]
    else:
        assert error is None, repr(error)
        expected = outcome["job"]
        assert job.job_id == expected["job_id"]
        if "status" in expected:
            assert job.status == expected["status"]
        if "error_code" in expected:
            assert job.error is not None and job.error.code == expected["error_code"]
    names = [name for name, _ in scripted.sent]
    for name, count in outcome.get("sent", {}).items():
        assert names.count(name) == count, (name, names)
    saved_key = next((s["saved"].get("idempotency_key") for s in case["steps"] if s.get("saved")), None)
    for name, rule in outcome.get("idempotency", {}).items():
        keys = [r.headers.get("Idempotency-Key") for n, r in scripted.sent if n == name]
        assert keys and all((k == saved_key) == (rule == "stored") for k in keys), (name, keys, saved_key)
    if "same_key" in outcome:
        keys = {r.headers.get("Idempotency-Key") for n, r in scripted.sent if n in outcome["same_key"]}
        assert len(keys) == 1 and None not in keys, keys
    if "renditions" in outcome:
        assert renditions(job) == outcome["renditions"]
    for name, seconds in outcome.get("timeouts", {}).items():
        held = [r.extensions["timeout"] for n, r in scripted.sent if n == name]
        assert held and all(max(t.values()) == seconds for t in held), (name, held)
