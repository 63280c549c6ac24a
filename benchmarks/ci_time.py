"""Where CI's time goes: pytest's JUnit XML reports, summed per test directory, side by side.

    python benchmarks/ci_time.py before.xml [after.xml ...]

Make the reports with `python -m pytest --junitxml=FILE` (a whole run, or one per directory
and several files per column: join them with commas, `a.xml,b.xml`). A test case's time in
the report is its setup, call and teardown together, so a session fixture's start-up (moto,
LocalStack, a runner) is counted in the first test that needs it. Prints per directory the
tests, the seconds, the share of the column, and each column's ratio to the first; then the
slowest test files and cases of the last column. A report: it always exits 0.
"""
from __future__ import annotations

import argparse
import collections
import xml.etree.ElementTree as ET


def cases(paths: str) -> list[tuple[str, str, str, float]]:
    """(directory, file, name, seconds) of every test case in the comma-separated reports."""
    found = []
    for path in paths.split(","):
        for case in ET.parse(path).iter("testcase"):
            module = case.get("classname", "").split(".")
            # classname is tests.<dir>.<module>[.<Class>]
            directory = module[1] if len(module) > 2 else "(top)"
            file = "/".join(module[:3])
            found.append((directory, file, f"{file}::{case.get('name')}", float(case.get("time", 0))))
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("reports", nargs="+", help="JUnit XML files; commas join files into one column")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    columns = [cases(r) for r in args.reports]
    sums = [collections.Counter() for _ in columns]
    counts = [collections.Counter() for _ in columns]
    for column, total, count in zip(columns, sums, counts):
        for directory, _, _, seconds in column:
            total[directory] += seconds
            count[directory] += 1
    directories = sorted(set().union(*sums), key=lambda d: -sums[0].get(d, 0))
    header = f"{'directory':<12}" + "".join(f"{'tests':>7}{'s':>9}{'share':>7}" for _ in columns)
    header += "".join(f"{'ratio' + str(i):>8}" for i in range(1, len(columns)))
    print(header)
    for directory in directories + ["TOTAL"]:
        row = f"{directory:<12}"
        values = []
        for total, count in zip(sums, counts):
            seconds = sum(total.values()) if directory == "TOTAL" else total.get(directory, 0)
            tests = sum(count.values()) if directory == "TOTAL" else count.get(directory, 0)
            share = seconds / (sum(total.values()) or 1)
            values.append(seconds)
            row += f"{tests:>7}{seconds:>9.1f}{share:>7.0%}"
        row += "".join(f"{(v / values[0] if values[0] else 0):>8.2f}" for v in values[1:])
        print(row)
    last = columns[-1]
    files = collections.Counter()
    for _, file, _, seconds in last:
        files[file] += seconds
    print(f"\nslowest files (last column)")
    for file, seconds in files.most_common(args.top):
        print(f"{seconds:>8.1f}  {file}")
    print(f"\nslowest cases (last column; setup + call + teardown)")
    for _, _, name, seconds in sorted(last, key=lambda c: -c[3])[:args.top]:
        print(f"{seconds:>8.1f}  {name}")


if __name__ == "__main__":
    main()
