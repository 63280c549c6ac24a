"""`make stats`: what a local run did, from its log (LOG_FILE, .local/runner.log by default).

    python -m local.stats                  # the metrics of the run, then its warnings
    python -m local.stats other.log
    python -m local.stats --job <job_id>   # one job's log lines, in order: its trace

The metrics are the EMF lines that the API, the worker, the sweeper and the webhook
deliveries print (chalicelib/runtime/metrics.py), the very lines CloudWatch reads in the cloud.
Counts are summed; times (ms) show the median, the 95th percentile and the maximum; queue
depths show the last and the largest value seen.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Optional, TextIO

from chalicelib.runtime.metrics import Metric, unit_of

DEFAULT_LOG = ".local/runner.log"
GAUGES = {Metric.QUEUE_DEPTH.value, Metric.DEAD_LETTERS.value}


@dataclass
class Series:
    values: list[float] = field(default_factory=list)

    def add(self, value: float) -> None:
        self.values.append(value)


def json_lines(lines: Iterable[str]) -> Iterator[dict]:
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue  # a plain line: chalice's banner, say
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record


def metric_points(record: dict) -> Iterator[tuple[str, tuple[tuple[str, str], ...], float]]:
    """(metric, its dimensions but `service`, value) for each value of one EMF line."""
    meta = record.get("_aws")
    if not isinstance(meta, dict):
        return
    for directive in meta.get("CloudWatchMetrics", []):
        names = {name for dims in directive.get("Dimensions", []) for name in dims}
        dims = tuple(sorted((name, str(record[name])) for name in names
                            if name != "service" and name in record))
        for metric in directive.get("Metrics", []):
            values = record.get(metric["Name"])
            for value in values if isinstance(values, list) else [values]:
                if isinstance(value, (int, float)):
                    yield metric["Name"], dims, float(value)


@dataclass
class Summary:
    lines: int = 0
    series: dict = field(default_factory=lambda: defaultdict(Series))
    warnings: Counter = field(default_factory=Counter)
    first: Optional[str] = None
    last: Optional[str] = None

    @classmethod
    def of(cls, lines: Iterable[str]) -> "Summary":
        summary = cls()
        for record in json_lines(lines):
            summary.lines += 1
            stamp = record.get("timestamp")
            if isinstance(stamp, str):
                summary.first = summary.first or stamp
                summary.last = stamp
            for name, dims, value in metric_points(record):
                summary.series[(name, dims)].add(value)
                if dims and name not in GAUGES:  # depths of different queues do not add up
                    summary.series[(name, ())].add(value)
            if record.get("level") in ("warning", "error", "critical"):
                summary.warnings[(record["level"], str(record.get("event")))] += 1
        return summary

    def total(self, metric: Metric, **dims: str) -> float:
        series = self.series.get((metric.value, tuple(sorted(dims.items()))))
        return sum(series.values) if series else 0.0


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _unit(name: str) -> str:
    try:
        return unit_of(Metric(name))
    except ValueError:
        return "Count"


def render(summary: Summary, source: str, out: TextIO) -> None:
    span = f", {summary.first} to {summary.last}" if summary.first else ""
    out.write(f"image-jobs run: {source} ({summary.lines} JSON lines{span})\n\n")
    if not summary.series:
        out.write("No metrics yet: upload something (README, 'Try it'), then run this again.\n")
    else:
        header = f"{'metric':<20} {'dimensions':<24} {'n':>6} {'sum/last':>10} {'p50':>9} {'p95':>9} {'max':>9}\n"
        out.write(header + "-" * (len(header) - 1) + "\n")
        for (name, dims), series in sorted(summary.series.items()):
            label = ",".join(f"{k}={v}" for k, v in dims) or "(all)"
            n, values = len(series.values), series.values
            if name in GAUGES:
                cells = (f"{values[-1]:>10g}", "", "", f"{max(values):>9g}")
            elif _unit(name) == "Milliseconds":
                cells = ("", f"{quantile(values, .5):>9.0f}", f"{quantile(values, .95):>9.0f}",
                         f"{max(values):>9.0f}")
                name = f"{name} (ms)"
            else:
                cells = (f"{sum(values):>10g}", "", "", "")
            row = f"{name:<20} {label:<24} {n:>6} {cells[0]:>10} {cells[1]:>9} {cells[2]:>9} {cells[3]:>9}"
            out.write(row.rstrip() + "\n")
    if summary.warnings:
        out.write("\nWarnings and errors (make trace JOB=<job_id> shows one job's lines):\n")
        for (level, event), count in summary.warnings.most_common():
            out.write(f"  {count:>5}  {level:<8} {event}\n")


def trace(lines: Iterable[str], job_id: str, out: TextIO) -> int:
    found = 0
    for record in json_lines(lines):
        if record.get("job_id") != job_id:
            continue
        found += 1
        rest = {k: v for k, v in record.items()
                if k not in ("timestamp", "level", "event", "component", "job_id")}
        details = " ".join(f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in rest.items())
        out.write(f"{record.get('timestamp', ''):<28} {record.get('component', ''):<10} "
                  f"{record.get('level', ''):<8} {record.get('event', '')}  {details}\n")
    return found


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", nargs="?", default=DEFAULT_LOG, help=f"default {DEFAULT_LOG}")
    parser.add_argument("--job", help="print this job's log lines instead")
    args = parser.parse_args(argv)
    path = Path(args.log)
    if not path.exists():
        print(f"stats: no {path}: start the service with `make run` first", file=sys.stderr)
        return 1
    with open(path, encoding="utf-8", errors="replace") as lines:
        if args.job:
            if not trace(lines, args.job, sys.stdout):
                print(f"stats: no line of job {args.job} in {path}", file=sys.stderr)
                return 1
            return 0
        render(Summary.of(lines), str(path), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
