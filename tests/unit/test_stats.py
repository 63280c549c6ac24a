"""`make stats` and `make trace` (local/stats.py) over the lines of a known run."""
import io
import json

from local import stats
from tests.unit.test_metrics import known_run


def run_log():
    metrics, jobs = known_run()
    first = jobs[0].job_id
    lines = [
        "Serving on http://127.0.0.1:8000\n",  # a plain line among the JSON ones
        json.dumps({"component": "uploads", "job_id": first, "event": "upload_accepted",
                    "level": "info", "timestamp": "2026-07-15T10:00:00Z"}) + "\n",
        *(line + "\n" for line in metrics.lines),
        json.dumps({"component": "worker", "job_id": first, "attempt": 1, "event": "job_ready",
                    "level": "info", "timestamp": "2026-07-15T10:00:05Z"}) + "\n",
        json.dumps({"component": "worker", "job_id": "other", "event": "job_attempt_failed",
                    "level": "error", "timestamp": "2026-07-15T10:00:06Z"}) + "\n",
        "{not json\n",
    ]
    return lines, first


def test_the_summary_adds_up_the_runs_metric_lines():
    lines, _ = run_log()
    summary = stats.Summary.of(lines)
    assert summary.total(stats.Metric.JOBS_ACCEPTED) == 5
    assert summary.total(stats.Metric.JOBS_ACCEPTED, Route="uploads") == 1
    assert summary.total(stats.Metric.JOBS_FAILED, Code="invalid_image") == 1
    assert summary.total(stats.Metric.JOBS_READY) == 2
    assert summary.warnings == {("error", "job_attempt_failed"): 1}
    assert (summary.first, summary.last) == ("2026-07-15T10:00:00Z", "2026-07-15T10:00:06Z")


def test_the_table_shows_counts_and_time_percentiles():
    lines, _ = run_log()
    out = io.StringIO()
    stats.render(stats.Summary.of(lines), "runner.log", out)
    table = out.getvalue()
    rows = {line.split()[0] + " " + line.split()[1]: line.split() for line in table.splitlines()
            if line.startswith(("JobsAccepted", "EndToEnd", "JobsFailed"))}
    assert rows["JobsAccepted Route=images"][2:4] == ["4", "4"]      # n, sum
    assert rows["EndToEnd (ms)"][3:] == ["2", "5000", "5000", "5000"]  # n, p50, p95, max
    assert rows["JobsFailed Code=invalid_image"][2:4] == ["1", "1"]
    assert "job_attempt_failed" in table


def test_trace_prints_one_jobs_lines_in_order():
    lines, first = run_log()
    out = io.StringIO()
    assert stats.trace(lines, first, out) == 2
    events = [line.split()[3] for line in out.getvalue().splitlines()]
    assert events == ["upload_accepted", "job_ready"]
    assert stats.trace(lines, "nope", io.StringIO()) == 0


def test_an_empty_log_says_what_to_do():
    out = io.StringIO()
    stats.render(stats.Summary.of([]), "runner.log", out)
    assert "No metrics yet" in out.getvalue()
