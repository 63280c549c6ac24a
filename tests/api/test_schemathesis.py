"""openapi.yaml is what the server does: Schemathesis against the running local stack.

Every phase (examples, coverage, fuzzing, stateful), every check, a fixed seed. The stateful
phase follows the spec's links: it creates jobs (/images with real images, /uploads), reads,
cancels and deletes them. By hand, against `make run`:

    SCHEMATHESIS_TOKEN=$(make -s token SUB=schemathesis) .venv/bin/schemathesis \\
        --config-file tests/api/schemathesis.toml run openapi.yaml \\
        --url http://127.0.0.1:8000 --checks all --seed 20260715 --max-examples 25
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest
import yaml

from chalicelib.config import Settings
from chalicelib.http.auth import SERVICE_SCOPE, mint_token
from tests.api.conftest import RUNNER_SETTINGS
from tests.conftest import ROOT

SEED = 20260715
# Per operation and phase, with a fixed seed: 12 (and 30 stateful scenarios) take 28 s on a
# quiet machine, and still take every link (asserted below); 25 and 60 took 131 s of a loaded
# CI run, the suite's slowest test. The stateful phase also runs until the links are covered.
MAX_EXAMPLES = 12
CONFIG = ROOT / "tests" / "api" / "schemathesis.toml"
OWNER = "schemathesis"
SERVICE_SUBJECT = "schemathesis-backend"
RUNNER = Settings.from_environ({**os.environ, **RUNNER_SETTINGS})
RESPONSE_LIMIT_SECONDS = RUNNER.api_timeout_seconds
READ_SLACK_SECONDS = 5


# The service principal's routes take its token alone, and every other route refuses it
# (docs/contract.md "The service principal"): two runs, each with the one token its routes take.
SERVICE_ROUTES = "^/api/v1/service/"


def run_schemathesis(api: str, report: str, service: bool = False) -> subprocess.CompletedProcess:
    secret = Settings.from_environ(os.environ).jwt_secret
    token = mint_token(SERVICE_SUBJECT, secret, 3600, int(time.time()), scope=SERVICE_SCOPE) if service \
        else mint_token(OWNER, secret, 3600, int(time.time()))
    env = dict(os.environ, SCHEMATHESIS_TOKEN=token, PYTHONPATH=str(ROOT))
    routes = ["--include-path-regex" if service else "--exclude-path-regex", SERVICE_ROUTES]
    if service:  # no link reaches these routes (a service token cannot upload): no chains
        routes += ["--phases", "examples,coverage,fuzzing"]
    command = [
        sys.executable, "-m", "schemathesis.cli", "--config-file", str(CONFIG), "--no-color",
        "run", str(ROOT / "openapi.yaml"), "--url", api, *routes,
        "--checks", "all", "--seed", str(SEED), "--max-examples", str(MAX_EXAMPLES),
        "--workers", "1", "--generation-database", "none",
        # `--checks all` holds every answer to a response time (10 s unless told): here the
        # API's own budget for a request, which a held one (Prefer: wait, at most
        # MAX_WAIT_SECONDS, validated to fit in it with time to answer) stays within; and
        # the client waits a little longer, so that a slow answer is reported with its time.
        "--max-response-time", str(RESPONSE_LIMIT_SECONDS),
        "--request-timeout", str(RESPONSE_LIMIT_SECONDS + READ_SLACK_SECONDS),
        "--report", "ndjson", "--report-ndjson-path", report,
    ]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def _json_lines(text: str) -> list[dict]:
    lines = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                lines.append(json.loads(line))
            except ValueError:
                pass
    return lines


# As long as the run itself may take (run_schemathesis): pytest.ini's 300 s is too short for
# it on a loaded machine.
@pytest.mark.timeout(900)
def test_the_server_does_what_openapi_yaml_says_under_every_schemathesis_check(api_runner, tmp_path):
    assert RESPONSE_LIMIT_SECONDS > RUNNER.max_wait_seconds  # the config validates it; held answers pass
    runner = api_runner
    start = len(runner.output)
    events = tmp_path / "events.ndjson"
    result = run_schemathesis(runner.api, str(events))
    # On failure, Schemathesis's own report: each failure with the curl line that reproduces it.
    assert result.returncode == 0, f"{result.stdout[-30000:]}\n{result.stderr[-3000:]}"

    run = Run.read(events)
    assert run.phases_passed >= {"examples", "coverage", "fuzzing", "stateful"}, run.phases_passed
    # The stateful phase followed links from new jobs to every operation on a job, and the
    # server really did the work. (Which other links it takes depends on the server's
    # timing, for example whether a job is finished by the time it is cancelled.)
    links = declared_links()
    assert run.links_taken <= links
    from_new_jobs = {link.rsplit(" -> ", 1)[1] for link in run.links_taken
                     if link.startswith(("POST /api/v1/images ", "POST /api/v1/uploads "))}
    assert from_new_jobs == {"GET /api/v1/image-jobs/{job_id}", "DELETE /api/v1/image-jobs/{job_id}",
                             "POST /api/v1/image-jobs/{job_id}/cancel"}, sorted(run.links_taken)
    print(f"links taken: {len(run.links_taken)} of {len(links)}")
    log = "".join(runner.output[start:])
    for event in ("upload_accepted", "direct_upload_created", "job_cancelled", "job_deleted"):
        assert f'"event": "{event}"' in log, f"no {event} during the run"
    # The API's access lines (app.py's middleware, LOG_EVERY_REQUEST in the runner).
    reads = [line for line in _json_lines(log) if line.get("event") == "http_request"
             and line.get("method") == "GET" and line.get("route") == "/api/v1/image-jobs/{job_id}"
             and line.get("status") == 200 and re.fullmatch(r"[0-9a-f-]{36}", line.get("job_id", ""))]
    assert reads, "no job was read"


@pytest.mark.timeout(900)
def test_the_service_routes_do_what_openapi_yaml_says_under_every_schemathesis_check(api_runner, tmp_path):
    """The service principal's routes (list by owner, GET and DELETE any job, its webhook)
    with its token. No link reaches them from an upload (a service token cannot upload), so
    the stateful phase has nothing to chain: the other phases run every check."""
    runner = api_runner
    start = len(runner.output)
    events = tmp_path / "events.ndjson"
    result = run_schemathesis(runner.api, str(events), service=True)
    assert result.returncode == 0, f"{result.stdout[-30000:]}\n{result.stderr[-3000:]}"
    run = Run.read(events)
    assert run.phases_passed >= {"examples", "coverage", "fuzzing"}, run.phases_passed
    served = {(line.get("route"), line.get("status")) for line in _json_lines("".join(runner.output[start:]))
              if line.get("event") == "http_request"}
    assert ("/api/v1/service/image-jobs", 200) in served, sorted(served)
    assert ("/api/v1/service/webhook", 200) in served, sorted(served)


def declared_links() -> set[str]:
    """Every link of openapi.yaml, named as Schemathesis names a transition."""
    spec = yaml.safe_load((ROOT / "openapi.yaml").read_text())
    by_id = {op["operationId"]: f"{method.upper()} {path}"
             for path, item in spec["paths"].items() for method, op in item.items() if "operationId" in op}
    links = set()
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method == "parameters":
                continue
            for status, response in op["responses"].items():
                if "$ref" in response:
                    continue  # the shared responses are problems, which have no links
                for name, link in response.get("links", {}).items():
                    if "$ref" in link:
                        link = spec["components"]["links"][link["$ref"].rsplit("/", 1)[1]]
                    links.add(f"{method.upper()} {path} -> [{status}] {name} -> {by_id[link['operationId']]}")
    return links


@dataclass
class Run:
    phases_passed: set[str]
    links_taken: set[str]

    @classmethod
    def read(cls, path) -> "Run":
        """What the run's event stream (--report ndjson) says it did."""
        phases, links = set(), set()
        for line in path.read_text().splitlines():
            event = json.loads(line)
            finished = event.get("PhaseFinished")
            if finished and finished["status"] == "success":
                phases.add(finished["phase"]["name"])
            scenario = event.get("ScenarioFinished") or {}
            for case in (scenario.get("recorder") or {}).get("cases", {}).values():
                if case.get("transition"):
                    links.add(case["transition"]["id"])
        return cls(phases, links)
