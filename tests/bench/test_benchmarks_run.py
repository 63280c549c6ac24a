"""Every benchmark under benchmarks/ runs once, in a short mode, so that one that rots (reads an
old record shape, calls a renamed function) fails CI. No target is asserted: they are reports;
a non-zero exit or a run past its timeout fails. Each runs as a person would run it: its own
process, from the checkout, with this venv's Python."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
LIBRARIES = {"stack.py"}  # imported by the others, not run

# script -> (arguments for a round or two, seconds allowed)
SHORT = {
    "api.py": (["--rounds", "1", "--cold", "1", "--size", "800x600"], 600),
    # The three animations at a quarter of their sides, one run each.
    "animation.py": (["--runs", "1", "--scale", "0.25"], 300),
    "calls_per_job.py": ([], 300),
    "capacity_sim.py": ([], 300),
    "ci_time.py": (["{junit}", "--top", "3"], 60),
    # Its short run is tests/deploy/test_package.py's, on the package those tests build once.
    "cold_package.py": None,
    "decode_memory.py": (["--side", "700"], 300),  # every kind of file, a hundredth of the pixels
    "delivery.py": (["--jobs", "3", "--hours", "0.2"], 300),
    # Every kind of hostile file (its point), each honest image once each way at a tenth of its
    # sides; a scan bomb a tenth as deep (its unbounded decode took 18 s of CPU) and a bypassed
    # bomb stopped at 1 s (the least RLIMIT_CPU holds): 300 scans keep it past that second.
    # The scenes at a third of the worker's size, one timed job on a small photo.
    "focus.py": (["--scale", "0.3", "--runs", "1", "--size", "800x600"], 300),
    "hostile.py": (["--runs", "1", "--scans", "300", "--cpu-limit", "1", "--honest-scale", "0.1"], 600),
    "list_jobs.py": (["--jobs", "30", "--repeat", "1"], 300),
    # Small photos (no 12 MP ones to make), and the second row with 2 workers as by default.
    "load.py": (["--uploads", "4", "--clients", "2", "--workers", "2", "--backends", "sqs",
                 "--deadline", "120", "--sizes", "640x480,800x600"], 300),
    # One round at 800x600 (the 12 MP photo's encodes are its cost).
    "duplicates.py": (["--size", "800x600", "--runs", "1"], 120),
    # Three photos, a small one for the CPU share (the 12 MP job is its cost).
    "phash.py": (["--photos", "3", "--size", "800x600", "--runs", "1"], 120),
    "push_trigger.py": (["--changes", "5", "--connections", "1"], 300),
    # Each API process is an interpreter importing the service: one of the owner's, one other's.
    "rate_limit.py": (["--processes", "1", "--seconds", "0.2"], 300),
    # One of scikit-image's photos and two small photo-like ones (SSIM on the 12 MP ones'
    # renditions was its cost).
    "renditions.py": (["--runs", "1", "--photos", "1", "--size", "640x480"], 300),
    # Every image (the PNG too) and variant, one timed run each, at a tenth of the side.
    "resize.py": (["--runs", "1", "--scale", "0.1"], 300),
    # A soak always finishes one job; the rest is the two stacks' start (Ceph's daemons).
    "rgw.py": (["--minutes", "0.01", "--embedded-minutes", "0.01"], 300),
    # Its cost is six sweeps' queries of all 64 shards, whatever the jobs; 2 orphan threads: the
    # pool's row.
    # Three uploads a source and a route to a sink: its rounds are its cost.
    "sdk_progress.py": (["--rounds", "1"], 120),
    "sweeper.py": (["--jobs", "4", "--threads", "2", "--orphan-jobs", "4", "--orphan-threads", "2"], 300),
    "time_budget.py": (["--short"], 300),
    # Every row, on 0.48 MP photos and with 2 sockets beside the push client's instead of 99.
    "time_to_know.py": (["--rounds", "1", "--concurrency", "1", "--push-jobs", "1", "--size", "800x600",
                         "--crowd", "2"], 300),
    "webhook_fairness.py": (["--good", "3"], 300),
    "webhook_test_event.py": (["--tests", "3"], 120),
    # Two jobs, one with the variants (their AVIF encodes are its cost), on one small photo.
    "worker_cpu.py": (["--jobs", "2", "--runs", "1", "--format-jobs", "1", "--size", "400x300", "--images", "1"], 300),
}
JUNIT = """<?xml version="1.0"?><testsuite name="pytest" tests="1"><testcase classname="tests.x"
 name="test_one" time="0.5"/></testsuite>"""


def test_the_benchmarks_share_one_harness():
    """A free port, a median and a percentile come from benchmarks/stack.py, never a copy."""
    import re

    for path in BENCHMARKS.glob("*.py"):
        if path.name != "stack.py":
            copies = re.findall(r"^def _?(free_port|percentile|median)\b", path.read_text(), re.M)
            assert not copies, f"{path.name} defines its own {copies}: use benchmarks/stack.py's"


def test_every_benchmark_has_a_short_mode():
    scripts = {p.name for p in BENCHMARKS.glob("*.py")} - LIBRARIES
    assert scripts == set(SHORT)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("script", sorted(s for s, short in SHORT.items() if short))
def test_a_benchmark_runs_to_its_end(script, tmp_path):
    arguments, seconds = SHORT[script]
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    run_benchmark(script, [a.replace("{junit}", str(junit)) for a in arguments], seconds)


def run_benchmark(script: str, arguments: list[str], seconds: float) -> None:
    try:
        done = subprocess.run([sys.executable, str(BENCHMARKS / script), *arguments], cwd=ROOT,
                              capture_output=True, text=True, timeout=seconds, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as late:
        pytest.fail(f"{script} ran past {seconds} s:\n{(late.stdout or b'')[-2000:]!r}")
    # The traceback, not the noise after it (asyncio's "Task was destroyed" lines at exit).
    error = done.stderr[done.stderr.rfind("Traceback"):][:4000] if "Traceback" in done.stderr else done.stderr[-4000:]
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stdout[-2000:]}\n{error}"
