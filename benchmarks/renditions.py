"""Rendition bytes at the same visual quality: how make_renditions codes its JPEGs.

    python benchmarks/renditions.py [--runs 5]

For each test image it runs make_renditions and catches the two rendition images just
before they are coded, then codes each of them both ways at the same quality (85):

  baseline      what the renditions were before issue 11 (no Huffman optimisation)
  optimised     baseline (sequential) scans with optimised Huffman tables
  progressive   what render._output does now: progressive scans, optimised tables

and reports bytes, the CPU time of the coding, and SSIM (scikit-image's
structural_similarity, all three channels) of the decoded JPEG against the uncoded pixels.
Test images: the real photographs scikit-image ships (astronaut, coffee, chelsea, rocket,
motorcycle, hubble, retina...) saved as JPEG q95, plus 12 MP photo-like images made in code.
"""
from __future__ import annotations

import argparse
import io
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import skimage.data  # noqa: E402
from load import photo_like  # noqa: E402
from PIL import Image  # noqa: E402
from skimage.metrics import structural_similarity  # noqa: E402

from chalicelib.config import Settings  # noqa: E402
from chalicelib.domain.renditions import rendition_specs  # noqa: E402
from chalicelib.imaging import render  # noqa: E402

PHOTOS = ("astronaut.png", "coffee.png", "chelsea.png", "rocket.jpg", "motorcycle_left.png",
          "hubble_deep_field.jpg", "retina.jpg", "brick.png", "grass.png", "color.png")
CODINGS = {"baseline": dict(optimize=False, progressive=False),
           "optimised": dict(optimize=True, progressive=False),
           "progressive": dict(optimize=True, progressive=True)}


def sources() -> list[tuple[str, bytes]]:
    folder = Path(skimage.data.__file__).parent
    found = []
    for name in PHOTOS:
        im = Image.open(folder / name).convert("RGB")
        out = io.BytesIO()
        im.save(out, "JPEG", quality=95)
        found.append((name.split(".")[0], out.getvalue()))
    found += [(f"photo-like 12MP #{seed}", photo_like(4000, 3000, seed, quality=92)) for seed in (1, 2)]
    return found


def uncoded(data: bytes, settings: Settings) -> dict:
    """The display and thumb images make_renditions hands to its encoder."""
    caught = {}
    real = render._output

    def catch(name, im, quality):
        caught[str(name)] = im.copy()
        return real(name, im, quality)

    render._output = catch
    try:
        render.make_renditions(data, settings.max_pixels, rendition_specs(settings), settings.jpeg_quality)
    finally:
        render._output = real
    return caught


def code(im: Image.Image, quality: int, runs: int, **options) -> tuple[bytes, float]:
    times = []
    for _ in range(runs):
        out = io.BytesIO()
        start = time.process_time()
        im.save(out, "JPEG", quality=quality, **options)
        times.append((time.process_time() - start) * 1000)
    return out.getvalue(), sorted(times)[len(times) // 2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="codings of each image (median CPU time)")
    args = parser.parse_args()
    settings = Settings()
    totals = {(r, c): [0, 0.0] for r in ("display", "thumb") for c in CODINGS}
    identical = True
    head = (f"{'image':<22} {'rendition':<9} {'size':>9} {'baseline B':>11} {'optim. B':>9} {'progr. B':>9}"
            f" {'optim.':>7} {'progr.':>7} {'base ms':>8} {'optim. ms':>9} {'progr. ms':>9}"
            f" {'SSIM base':>9} {'SSIM progr.':>11}")
    print(f"JPEG quality {settings.jpeg_quality}; CPU ms = median of {args.runs} codings; "
          "SSIM of the decoded JPEG against the uncoded rendition")
    print(head)
    print("-" * len(head))
    for label, data in sources():
        for rendition, im in uncoded(data, settings).items():
            reference = np.asarray(im)
            row = {}
            for coding, options in CODINGS.items():
                coded, cpu = code(im, settings.jpeg_quality, args.runs, **options)
                decoded = np.asarray(Image.open(io.BytesIO(coded)).convert("RGB"))
                ssim = structural_similarity(reference, decoded, channel_axis=2)
                row[coding] = (len(coded), cpu, ssim, decoded)
                totals[rendition, coding][0] += len(coded)
                totals[rendition, coding][1] += cpu
            identical &= all(np.array_equal(row["baseline"][3], row[c][3]) for c in CODINGS)
            b, o, p = row["baseline"], row["optimised"], row["progressive"]
            print(f"{label:<22} {rendition:<9} {'%dx%d' % im.size:>9} {b[0]:>11} {o[0]:>9} {p[0]:>9}"
                  f" {o[0] / b[0] - 1:>+6.1%} {p[0] / b[0] - 1:>+6.1%} {b[1]:>8.1f} {o[1]:>9.1f} {p[1]:>9.1f}"
                  f" {b[2]:>9.4f} {p[2]:>11.4f}")
    print()
    for rendition in ("display", "thumb"):
        b = totals[rendition, "baseline"]
        for coding in ("optimised", "progressive"):
            c = totals[rendition, coding]
            print(f"all {rendition}s, baseline -> {coding}: {b[0]} -> {c[0]} bytes ({c[0] / b[0] - 1:+.1%}); "
                  f"coding CPU {b[1]:.1f} -> {c[1]:.1f} ms in total")
    print("decoded pixels identical in every case: " + ("yes" if identical else "NO"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
