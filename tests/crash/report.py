"""The table of crash points and their outcomes.

    python -m tests.crash.report --json after.json        # run the harness on this code
    python -m tests.crash.report --render before.json after.json > docs/crash-points.md

The first form runs on whichever `chalicelib` is first on sys.path, so the same harness can
be run on an older checkout of it (docs/crash-points.md says how the "before" was made).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter

KINDS = [  # violation text -> the invariant it breaks
    ("stuck", "1 terminal"), ("left", "1 terminal"), ("removed job", "1 terminal"),
    ("renditions", "2 renditions"), ("without a job", "3 orphans"), ("key", "4 keys"),
    ("original stored", "5 processed"),
]


def run() -> dict:
    import logging

    import structlog

    from tests.crash.harness import SCENARIOS, points_of, run_point

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    results = {}
    for scenario in SCENARIOS:
        baseline = run_point(scenario, None)
        rows = [{"point": "no crash", "violations": baseline.violations}]
        for point in points_of(scenario):
            outcome = run_point(scenario, point)
            rows.append({"point": point.label(), "violations": outcome.violations})
        results[scenario.name] = {"path": scenario.path, "rows": rows}
    return results


def kinds(violations: list[str]) -> list[str]:
    return sorted({kind for text in violations for needle, kind in KINDS if needle in text})


def render(before: dict, after: dict) -> str:
    lines = ["| path | scenario | runs before | broken before (by invariant) | runs after | broken after |",
             "|---|---|---|---|---|---|"]
    for name in after:
        b = before.get(name, {"rows": [], "path": after[name]["path"]})
        a = after[name]
        bad_b = [r for r in b["rows"] if r["violations"]]
        bad_a = [r for r in a["rows"] if r["violations"]]
        inv_b = Counter(k for r in bad_b for k in kinds(r["violations"]))
        lines.append(f"| {a['path']} | {name} | {len(b['rows'])} | {len(bad_b)} "
                     f"({', '.join(f'{k}: {n}' for k, n in sorted(inv_b.items())) or '-'}) | "
                     f"{len(a['rows'])} | {len(bad_a)} |")
    total_b = sum(len(v["rows"]) for v in before.values())
    total_a = sum(len(v["rows"]) for v in after.values())
    broken_b = sum(1 for v in before.values() for r in v["rows"] if r["violations"])
    broken_a = sum(1 for v in after.values() for r in v["rows"] if r["violations"])
    lines.append(f"| | **total** | {total_b} | {broken_b} | {total_a} | {broken_a} |")
    details = ["", "## Every point that broke an invariant", "",
               "| code | scenario | what was wrong afterwards | at these crash points |", "|---|---|---|---|"]
    for label, results in (("before", before), ("after", after)):
        for name, result in results.items():
            grouped: dict[str, list[str]] = {}
            for row in result["rows"]:
                if row["violations"]:
                    what = "; ".join(sorted({_anonymous(v) for v in row["violations"]}))
                    grouped.setdefault(what, []).append(row["point"])
            for what, points in grouped.items():
                where = (f"all {len(points)}, the run without a crash included"
                         if len(points) == len(result["rows"]) else ", ".join(points))
                details.append(f"| {label} | {name} | {what} | {where} |")
    return "\n".join(lines + details) + "\n"


def _anonymous(violation: str) -> str:
    """Without the job ids, so that the same breakage at many points reads as one line."""
    return re.sub(r"\b[0-9a-f]{8}\b", "<job>", violation)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="run the harness and write its results here")
    parser.add_argument("--render", nargs=2, metavar=("BEFORE", "AFTER"), help="two results -> Markdown")
    args = parser.parse_args(argv)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(run(), out, indent=1)
    if args.render:
        before, after = (json.load(open(path)) for path in args.render)
        sys.stdout.write(render(before, after))
    return 0


if __name__ == "__main__":
    sys.exit(main())
