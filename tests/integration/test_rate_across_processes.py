"""The per-owner request rate holds across API processes: several Python processes, each with
the service's composition root, calling the admission use case against one table on moto's
server (benchmarks/rate_limit.py runs them)."""
import json
import subprocess
import sys

from tests.conftest import ROOT

RATE, BURST, SECONDS, PROCESSES = 2, 5, 3, 4


def test_an_owner_stays_within_its_rate_across_processes_while_another_is_served(moto_endpoint):
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "rate_limit.py"), "--json", "--endpoint", moto_endpoint,
         "--processes", str(PROCESSES), "--seconds", str(SECONDS), "--rate", str(RATE), "--burst", str(BURST)],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    runs = {r["mode"]: r for r in json.loads(result.stdout)}
    limit = BURST + RATE * SECONDS
    shared, alone = runs["shared"], runs["per_process"]
    assert shared["sent"] > 2 * limit  # the owner asked for far more than its limit
    assert BURST <= shared["accepted"] <= limit
    assert shared["other_accepted"] == shared["other_sent"] > 0
    # Each process's own bucket, as before: every process lets the whole limit through.
    assert alone["accepted"] > 2 * limit
