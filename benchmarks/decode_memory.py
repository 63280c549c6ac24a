"""Peak memory of one decode (make_renditions) for the files that cost the most memory.

    python benchmarks/decode_memory.py [--side 7000]     # about half a minute on one core

Each file is made in code and decoded in a fresh Python process of its own, so that one
file's peak cannot hide another's. The figure is the process's peak resident memory
(VmHWM) less what it held just before the decode (the interpreter, Pillow and the file's
bytes): what a decode adds, which is what the decoding child's memory ceiling
(DECODE_MEMORY_MB) has to hold. The last column is the outcome under that ceiling, in
the sandbox as the worker runs it. --side N makes the files N x N pixels instead (CI's short
run takes a small side: every kind, decoded both ways).
"""
from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chalicelib.config import Settings  # noqa: E402

MAX_PIXELS = Settings.max_pixels
SIDE = 7000  # 49 MP, under the default MAX_PIXELS


def make(kind: str, side: int = SIDE) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    if kind == "png-rgba":
        Image.new("RGBA", (side, side), (10, 20, 30, 128)).save(out, "PNG")
    elif kind == "png-rgb":
        Image.new("RGB", (side, side), (10, 20, 30)).save(out, "PNG")
    elif kind == "png-la":
        Image.new("LA", (side, side), (10, 128)).save(out, "PNG")
    elif kind == "png-grey16":
        Image.new("I;16", (side, side), 1000).save(out, "PNG")
    elif kind == "png-palette-transparent":
        Image.new("P", (side, side), 3).save(out, "PNG", transparency=3)
    elif kind == "jpeg-rgb":
        Image.new("RGB", (side, side), (10, 20, 30)).save(out, "JPEG", quality=90)
    else:
        raise ValueError(kind)
    return out.getvalue()


KINDS = ("png-rgba", "png-la", "png-palette-transparent", "png-grey16", "png-rgb", "jpeg-rgb")


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def measure_one(kind: str, side: int = SIDE) -> dict:
    """In this (fresh) process: the decode's peak over the resident memory before it."""
    from chalicelib.config import Settings
    from chalicelib.domain.errors import DomainError
    from chalicelib.imaging import render
    from chalicelib.imaging.sandbox import run_limited

    data = make(kind, side)
    # VmHWM only rises: reset it to the current size (Linux 4.0+), so the peak is the decode's.
    Path("/proc/self/clear_refs").write_text("5")
    before = _status("VmRSS")
    started = time.perf_counter()
    render.make_renditions(data, MAX_PIXELS)
    seconds = time.perf_counter() - started
    peak = _status("VmHWM") - before
    ceiling = getattr(Settings(), "decode_memory_mb", None)
    try:
        if ceiling:
            run_limited(render.make_renditions, data, MAX_PIXELS, cpu_seconds=20, wall_seconds=120,
                        memory_bytes=ceiling * 1024 * 1024)
        else:
            run_limited(render.make_renditions, data, MAX_PIXELS, cpu_seconds=20, wall_seconds=120)
        outcome = "ready"
    except DomainError as error:
        outcome = error.code.value if hasattr(error, "code") else type(error).__name__
    return {"kind": kind, "bytes": len(data), "peak": peak, "seconds": seconds,
            "ceiling": ceiling, "outcome": outcome}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=SIDE,
                        help=f"each file's width and height in pixels (default {SIDE}: 49 MP)")
    side = parser.parse_args().side
    print(f"{f'file ({side}x{side}, {side * side / 1e6:.2g} MP)':<26}{'file KiB':>10}{'peak MiB':>10}"
          f"{'decode s':>10}{'ceiling MiB':>13}  outcome")
    for kind in KINDS:
        done = subprocess.run([sys.executable, __file__, "--one", kind, str(side)], capture_output=True,
                              text=True, cwd=ROOT, check=True)
        row = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{row['kind']:<26}{row['bytes'] / 1024:>10.0f}{row['peak'] / 2**20:>10.0f}"
              f"{row['seconds']:>10.2f}{row['ceiling'] or '-':>13}  {row['outcome']}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(measure_one(sys.argv[2], int(sys.argv[3]))))
    else:
        main()
