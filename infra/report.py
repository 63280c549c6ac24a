"""The capacity model's report: usage against every limit and what breaks (infra/capacity.py),
the stage sizes, and what 1,000 images cost (infra/prices.py), as docs/scale.md quotes it.

    python -m infra.report
"""
from infra import capacity, prices


def main() -> int:
    capacity.print_limits()
    print(prices.report())
    print()
    print(capacity.wait_report())
    print(prices.wait_report())
    print()
    print(capacity.push_report())
    print(prices.push_report())
    print()
    print(prices.list_report())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
