"""Bring a table's job items within reach of today's sweeper, once, after an upgrade:
`python -m infra.upgrade_records <table> [--region R] [--endpoint-url URL]`.

Items written by the first release (stored shape 1, CHANGELOG.md) have no `sweep_key`, and
the sweeper reads only the sharded due index: without it they would wait for their TTL
instead of being swept (their renditions are read either way). It scans the whole table
once, so it is a step of the upgrade, never a schedule; running it again writes nothing.
"""
from __future__ import annotations

import argparse

from chalicelib.adapters.dynamo_jobs import add_missing_sweep_keys, job_model
from chalicelib.adapters.dynamo_table import DynamoTable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", help="the jobs table (the stack output JobsTable)")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--endpoint-url", default=None, help="an emulator's endpoint; none for AWS")
    args = parser.parse_args(argv)
    written = add_missing_sweep_keys(job_model(DynamoTable(args.table, args.region, args.endpoint_url)))
    print(f"{written} job items given their sweep_key")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
