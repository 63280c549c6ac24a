"""The decode budget against hostile files, and what it costs honest ones.

    python benchmarks/hostile.py            # about a minute on one core
    python benchmarks/hostile.py --runs 1 --scans 300 --cpu-limit 1 --honest-scale 0.1
        # CI's short run: each honest image once each way, at a tenth of its sides, a scan bomb
        # a tenth as deep, bypassed bombs stopped at 1 s

Prints, measured side by side in one run:
- per hostile file: the CPU an unbounded decode spends on it (before), the CPU the API
  spends refusing it from its structure (after), and the CPU the worker's child may spend
  when the structure check is bypassed (the CPU limit);
- how long an honest job waits behind ten hostile uploads on one worker, before and after;
- the overhead of the budget (structure check + decoding child) on honest 12 MP and 48 MP
  JPEGs (--honest-scale F multiplies their sides by F): median wall and CPU of --runs runs
  each way (5 unless told).
"""
from __future__ import annotations

import argparse
import io
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.resize import photo_like  # noqa: E402
from chalicelib.config import Settings  # noqa: E402
from chalicelib.domain.errors import DomainError  # noqa: E402
from chalicelib.domain.renditions import rendition_specs  # noqa: E402
from chalicelib.imaging import (
    render,  # noqa: E402
    sandbox,
)
from chalicelib.imaging.limits import DecodeLimits  # noqa: E402
from chalicelib.imaging.sandbox import run_limited  # noqa: E402
from tests import hostile  # noqa: E402

MAX_PIXELS = Settings.max_pixels
UNBOUNDED = DecodeLimits(max_scans=10**9, max_frames=10**9, max_metadata_bytes=10**12)
BUDGET = DecodeLimits()
CPU_LIMIT = Settings.decode_cpu_seconds
SPECS = rendition_specs(Settings())


def cpu() -> float:
    """This process, the children it reaped, and the decoding children still alive (the
    sandbox reuses them, so their CPU is not in RUSAGE_CHILDREN yet)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime + sum(map(live_cpu, sandbox._pool._live))


def live_cpu(child) -> float:
    try:
        fields = Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(call) -> tuple[float, float, str]:
    """(wall s, CPU s of this process and its children, outcome)."""
    wall, used = time.perf_counter(), cpu()
    try:
        call()
        outcome = "ok"
    except DomainError as error:
        outcome = error.code.value
    return time.perf_counter() - wall, cpu() - used, outcome


def hostile_rows(scans: int):
    corpus = {
        f"scan bomb ({scans} scans, 12 MP)": hostile.scan_bomb(4000, 3000, scans),
        "frame bomb (1200 GIF frames)": hostile.frame_bomb(1200),
        "page bomb (1500 TIFF pages)": hostile.page_bomb(1500),
        "huge ICC profile (2 MiB)": hostile.huge_profile_jpeg(2 * 1024 * 1024),
    }
    rows = []
    for name, data in corpus.items():
        _, before, _ = measure(lambda: render.make_renditions(data, MAX_PIXELS, limits=UNBOUNDED))
        _, refuse, outcome = measure(lambda: render.inspect(data, MAX_PIXELS, BUDGET))
        _, limited, limited_outcome = measure(lambda: run_limited(
            render.make_renditions, data, MAX_PIXELS, SPECS, 85, UNBOUNDED,
            cpu_seconds=CPU_LIMIT, wall_seconds=4 * CPU_LIMIT + 5))
        rows.append((name, len(data), before, refuse, outcome, limited, limited_outcome))
    return rows


def honest_rows(runs: int, scale: float = 1.0):
    rows = []
    for width, height in ((4000, 3000), (8000, 6000)):
        size = (round(width * scale), round(height * scale))
        label = f"{size[0] * size[1] / 1e6:.2g} MP JPEG"
        out = io.BytesIO()
        photo_like(size).save(out, "JPEG", quality=92)
        data = out.getvalue()
        plain, budgeted = [], []
        for _ in range(runs):
            plain.append(measure(lambda: render.make_renditions(data, MAX_PIXELS, limits=UNBOUNDED)))
            budgeted.append(measure(lambda: run_limited(
                render.make_renditions, data, MAX_PIXELS, SPECS, 85, BUDGET,
                cpu_seconds=CPU_LIMIT, wall_seconds=60)))
        rows.append((label, *(statistics.median(r[i] for r in runs) for runs in (plain, budgeted) for i in (0, 1))))
    return rows


def main() -> None:
    global CPU_LIMIT
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5, help="runs of each honest image each way")
    parser.add_argument("--scans", type=int, default=3000,
                        help="the scan bomb's scans (its unbounded decode takes about 6 ms of CPU each)")
    parser.add_argument("--cpu-limit", type=int, default=CPU_LIMIT,
                        help=f"the worker child's CPU seconds a decode (the service's: {CPU_LIMIT})")
    parser.add_argument("--honest-scale", type=float, default=1.0,
                        help="multiply the honest photos' sides by this (default 1: 12 MP and 48 MP)")
    args = parser.parse_args()
    CPU_LIMIT = args.cpu_limit
    hostile_table = hostile_rows(args.scans)
    print("| hostile file | bytes | CPU s unbounded (before) | CPU s at upload (after) | answer | "
          "CPU s in the worker's child if the check is bypassed | outcome |")
    print("|---|---|---|---|---|---|---|")
    for name, size, before, refuse, outcome, limited, limited_outcome in hostile_table:
        print(f"| {name} | {size} | {before:.2f} | {refuse:.4f} | {outcome} | {limited:.2f} | {limited_outcome} |")
    worst_before = max(r[2] for r in hostile_table)
    worst_after = max(max(r[3], r[5]) for r in hostile_table)
    print(f"\nworst CPU on one hostile file: before {worst_before:.2f} s, after {worst_after:.2f} s "
          f"(at most the {CPU_LIMIT} s limit)")

    honest = honest_rows(args.runs, args.honest_scale)
    honest_cpu = honest[0][2]
    ten_before = 10 * worst_before + honest_cpu
    ten_after_refused = 10 * max(r[3] for r in hostile_table) + honest_cpu
    ten_after_bypassed = 10 * min(CPU_LIMIT, worst_before) + honest_cpu
    print(f"\n| honest {honest[0][0].removesuffix(' JPEG')} job behind ten hostile uploads, one worker | wait s |")
    print("|---|---|")
    print(f"| before (ten worst files decoded in full) | {ten_before:.1f} |")
    print(f"| after, refused at upload (never queued) | {ten_after_refused:.2f} |")
    print(f"| after, structure bypassed (each stopped by the CPU limit) | {ten_after_bypassed:.1f} |")

    print("\n| honest image | wall ms in-process | CPU ms in-process | wall ms budget + child | "
          "CPU ms budget + child | overhead wall | overhead CPU |")
    print("|---|---|---|---|---|---|---|")
    for label, wall_a, cpu_a, wall_b, cpu_b in honest:
        print(f"| {label} | {wall_a * 1000:.0f} | {cpu_a * 1000:.0f} | {wall_b * 1000:.0f} | "
              f"{cpu_b * 1000:.0f} | {wall_b / wall_a:.2f}x | {cpu_b / cpu_a:.2f}x |")


if __name__ == "__main__":
    main()
