"""The capacity model's per-image figures are what the code does today.

benchmarks/calls_per_job.py runs one image through the real service on moto's server and
records every AWS request; infra/capacity.py keeps the result as the model's input. If a
change to the code adds a call, a write or a log line, this fails until the model (and
docs/scale.md's tables, `python -m infra.report`) are brought up to date.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from infra import capacity as cap
from tests.conftest import ROOT

EXACT = ("calls", "wcu", "index_wcu", "rcu", "log_lines", "index_writes")


@pytest.fixture(scope="module")
def measured(moto_endpoint):
    # Its own process: it captures the service's log lines from stdout, which structlog binds once.
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "calls_per_job.py"), "--json",
                             "--endpoint", moto_endpoint], capture_output=True, text=True, timeout=120,
                            cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("phase", sorted(cap.MEASURED))
def test_each_phase_costs_what_the_model_says(measured, phase):
    model, now = cap.MEASURED[phase], measured[phase]
    assert {k: now[k] for k in EXACT} == {k: model[k] for k in EXACT}
    # Lengths vary with the digits of sizes and dimensions, and of the timings in the metric
    # lines (a float's repr is 3 to 18 characters): within 5 %, or 12 bytes.
    assert now["log_bytes"] == pytest.approx(model["log_bytes"], rel=0.05, abs=12)


def test_a_sweep_run_queries_each_status_once_and_reads_the_queue_depths(measured):
    calls = measured["expiry"]["per_run"]["calls"]
    assert calls["dynamodb:Query"] == cap.SWEEP_RUN_QUERIES
    assert calls["sqs:GetQueueAttributes"] == cap.SWEEP_RUN_QUEUE_READS
    # A queue's URL is looked up once per process, not per run.
    assert set(calls) <= {"dynamodb:Query", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}


def test_job_items_stay_under_one_write_unit(measured):
    """Every write is then one unit, as the model counts; a ready job carries the most."""
    assert set(measured["item_bytes"]) >= {"queued", "processing", "ready"}
    # Room for a Cognito subject (36 characters) where the benchmark has "alice". Since the
    # 512 px thumbnail a ready job is within 80 B of a unit: a job made with a long
    # Idempotency-Key (its scope is stored) may take two units for its last writes, which
    # docs/scale.md §10 says and the model does not count.
    # Since the focus (issue 49) the margin is a Cognito subject's alone (31 B more than
    # "alice"); a direct upload's ready item is past a unit, which the model counts.
    assert max(measured["item_bytes"].values()) < 1024 - 32
