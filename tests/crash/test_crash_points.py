"""Every crash point of the upload, worker, sweeper and API paths, on the fakes: a kill or an
error before and after each external call, then the client's retries, redeliveries and the
sweeper; the four invariants must hold (tests/crash/harness.py)."""
from __future__ import annotations

import pytest

from chalicelib.domain.jobs import JobStatus
from chalicelib.domain.renditions import RenditionName
from tests.crash.harness import IMAGE, SCENARIOS, Injector, Scenario, World, check, points_of, run_point

CASES = [(scenario, point) for scenario in SCENARIOS for point in points_of(scenario)]


def test_every_path_has_crash_points():
    """Guards the enumeration: each scenario's step makes external calls to crash."""
    for scenario in SCENARIOS:
        assert points_of(scenario), scenario.name


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_without_a_crash_the_invariants_hold(scenario):
    outcome = run_point(scenario, None)
    assert not outcome.step_failed and outcome.ok, outcome.violations


@pytest.mark.parametrize("scenario, point", CASES, ids=[f"{s.name} | {p.label()}" for s, p in CASES])
def test_a_crash_at_any_point_leaves_the_invariants_holding(scenario, point):
    outcome = run_point(scenario, point)
    assert outcome.ok, outcome.violations


def test_the_checks_see_a_broken_world():
    """The invariants are not vacuous: each kind of breakage the harness looks for is found."""
    world = World(Injector())
    world.sweep = lambda: None  # no sweeper: nothing heals what follows
    ready = world.use_cases.uploads.accept_upload("alice", IMAGE).job
    world.deliver()
    done = world.jobs.items[ready.job_id]
    del world.objects.objects[done.renditions[RenditionName.DISPLAY].key]  # a ready job pointing at a missing object
    stuck = world.use_cases.uploads.accept_upload("bob", IMAGE).job
    world.queue.waiting.clear()  # its event lost, and no sweeper
    world.jobs.history.append((ready.job_id, JobStatus.FAILED))  # a terminal status left
    world.objects.put("elsewhere/x", b"x", "image/jpeg")  # outside the swept prefixes
    doomed = Scenario("doomed", "test", final=lambda w, s: [stuck.job_id])
    found = check(world, doomed, {})
    assert f"ready job {ready.job_id[:8]} points at missing renditions" in found, found
    assert f"job {stuck.job_id[:8]} stuck queued" in found, found
    assert f"job {ready.job_id[:8]} left ready for failed" in found, found
    assert f"key replays {stuck.job_id[:8]} (queued)" in found, found
    assert "object without a job: elsewhere/?" in found, found


def test_the_crash_points_are_the_same_in_every_process():
    """pytest-xdist's workers must collect the same points, whatever their hash seeds (a sweep
    once went through the terminal statuses in a set's order)."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    script = ("from tests.crash.harness import SCENARIOS, points_of\n"
              "print([p.label() for s in SCENARIOS for p in points_of(s)])")
    seen = {subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout.splitlines()[-1]  # after the logs
            for seed in ("1", "2", "3")}
    assert len(seen) == 1
