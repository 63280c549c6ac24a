"""Log lines and metric lines from many threads at once stay whole: one JSON object a line
(Lambda's log and the runner's log file are read line by line)."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# In a process of its own: the logs' set-up is once a process, on the first line. Its stdout
# yields the CPU inside each write, so threads switch mid-line wherever a line is two writes.
SCRIPT = textwrap.dedent("""
    import io, sys, threading, time

    class Yielding(io.TextIOBase):
        def __init__(self, out):
            self._out = out
        def write(self, text):
            time.sleep(0.0002)
            return self._out.write(text)
        def flush(self):
            self._out.flush()

    sys.stdout = Yielding(sys.__stdout__)
    from chalicelib.runtime.logs import get_logger
    from chalicelib.runtime.metrics import EmfMetrics, Metric

    log, metrics = get_logger("lines"), EmfMetrics("image-jobs-test")

    def logs(n):
        for i in range(150):
            log.info("line", thread=n, i=i)

    def emits():
        for _ in range(150):
            metrics.emit({Metric.JOBS_ACCEPTED: 1})

    threads = [threading.Thread(target=logs, args=(n,)) for n in range(3)]
    threads += [threading.Thread(target=emits) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
""")


def test_log_and_metric_lines_from_many_threads_are_each_one_json_object():
    run = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.split("\n")
    assert lines.pop() == ""
    records = [json.loads(line) for line in lines]  # "Extra data" if two shared a line
    assert sum(1 for r in records if r.get("event") == "line") == 450
    assert sum(1 for r in records if "_aws" in r) == 450
