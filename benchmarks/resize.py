"""Benchmark chalicelib.imaging.render.make_renditions against naive Pillow and libvips.

    python benchmarks/resize.py [--runs N] [--quick] [--scale F] [--root DIR]

Makes photo-like test images in a temp dir (12 MP and 48 MP JPEG, 12 MP PNG; --scale F
multiplies their sides by F, for a run that only proves the script works), then
times each variant in its own fresh child process pinned to one core, so the child's
peak RSS (ru_maxrss) belongs to that variant alone:

  ours   make_renditions (display fit 1280 + 256 thumb, JPEG q85)
  naive  Pillow full decode, LANCZOS straight from the original to each size
         (fit 1280, ImageOps.fit 256), both saved as JPEG q85
  vips   pyvips.Image.thumbnail_buffer(data, 1280) and (data, 256, crop=centre):
         two decodes, both shrunk on load (VIPS_CONCURRENCY=1, operation cache off)
  vips1  libvips decoding once: thumbnail_buffer(data, 1280) rendered to memory, the
         256 thumb cut from it (as ours does), both written from that one decode

Every variant codes its JPEGs as ours does (q85, and progressive with optimised Huffman
tables when make_renditions does so), so the times compare the same work.
--root measures the imaging module of another checkout (say the commit before a change).

Each child imports all three libraries, reads the file, does one warm-up run and then
--runs timed runs; the medians of wall and of CPU time are reported, and the ratios use
CPU time (on a shared machine wall time also counts the waits for a core). "delta" is the
child's peak RSS minus the peak RSS of a baseline child that only imports the libraries,
so it includes the input file's bytes. It is a report: the exit status is 0 even when a
target is missed.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

REPO_ROOT = Path(__file__).resolve().parent.parent

DISPLAY_BOX = 1280
THUMB = 256
QUALITY = 85
MAX_PIXELS = 60_000_000
VARIANTS = ("ours", "naive", "vips", "vips1")
# How ours codes its JPEGs; the child sets it from the checkout under test.
PROGRESSIVE = False

# (label, file name, size, format)
IMAGES = (
    ("12MP JPEG", "12mp.jpg", (4000, 3000), "JPEG"),
    ("48MP JPEG", "48mp.jpg", (8000, 6000), "JPEG"),
    ("12MP PNG", "12mp.png", (4000, 3000), "PNG"),
)


# ------------------------------------------------------------------- test images


def photo_like(size: tuple[int, int]):
    """Smooth colour gradients, soft blobs and per-pixel grain: compresses like a photo."""
    from PIL import Image

    w, h = size
    smooth = Image.BICUBIC
    ramp = Image.linear_gradient("L")
    base = Image.merge(
        "RGB",
        (
            ramp.resize(size, smooth),
            ramp.rotate(90).resize(size, smooth),
            Image.radial_gradient("L").resize(size, smooth),
        ),
    )
    # Soft mid-frequency structure ("objects") and fine sensor-like grain.
    blobs = Image.merge(
        "RGB",
        tuple(Image.effect_noise((max(1, w // 40), max(1, h // 40)), 70).resize(size, smooth)
              for _ in range(3)),
    )
    grain = Image.effect_noise(size, 40).convert("RGB")
    textured = Image.blend(base, blobs, 0.45)
    return Image.blend(textured, grain, 0.18)


def scaled(size: tuple[int, int], scale: float) -> tuple[int, int]:
    return (max(1, round(size[0] * scale)), max(1, round(size[1] * scale)))


def make_images(directory: Path, labels: list[str], scale: float = 1.0) -> None:
    for label, name, size, fmt in IMAGES:
        if label not in labels:
            continue
        path = directory / name
        options = {"quality": 92} if fmt == "JPEG" else {"compress_level": 1}
        photo_like(scaled(size, scale)).save(path, fmt, **options)


def make_images_in_child(directory: Path, labels: list[str], scale: float = 1.0) -> dict[str, Path]:
    """Linux children inherit the parent's ru_maxrss high-water mark across fork+exec,
    so the parent stays small: the big test images are made in a throwaway process."""
    script = str(Path(__file__).resolve())
    subprocess.run([sys.executable, script, "--make", str(directory), str(scale), *labels], check=True)
    return {label: directory / name for label, name, *_ in IMAGES if label in labels}


# ------------------------------------------------------------------ child process


def _pin_to_one_core() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})


def _import_all():
    """Every child imports the same libraries so the baseline subtracts them fairly."""
    import pyvips
    from PIL import Image, ImageOps

    from chalicelib.domain.renditions import RenditionFormat
    from chalicelib.imaging import render

    global PROGRESSIVE
    probe = render.encode(Image.new("RGB", (64, 64)), RenditionFormat.JPEG, render.Coding(jpeg_quality=QUALITY))
    PROGRESSIVE = b"\xff\xc2" in probe  # SOF2: a progressive frame
    pyvips.cache_set_max(0)
    return render, Image, ImageOps, pyvips


def _ours(data: bytes) -> None:
    from chalicelib.config import Settings
    from chalicelib.domain.renditions import rendition_specs
    from chalicelib.imaging import render

    specs = rendition_specs(Settings(display_box=DISPLAY_BOX, thumb_box=THUMB))
    render.make_renditions(data, MAX_PIXELS, specs, QUALITY)


def _naive(data: bytes) -> None:
    import io

    from PIL import Image, ImageOps

    im = Image.open(io.BytesIO(data))
    im.load()
    im = im.convert("RGB")
    scale = min(1.0, DISPLAY_BOX / max(im.size))
    display = im.resize((round(im.width * scale), round(im.height * scale)), Image.LANCZOS)
    thumb = ImageOps.fit(im, (THUMB, THUMB), Image.LANCZOS)
    for out in (display, thumb):
        out.save(io.BytesIO(), "JPEG", quality=QUALITY, optimize=PROGRESSIVE, progressive=PROGRESSIVE)


def _vips_jpeg(image, quality: int, progressive: bool) -> bytes:
    import pyvips

    return image.write_to_buffer(".jpg", Q=quality, keep=pyvips.enums.ForeignKeep.NONE,
                                 optimize_coding=progressive, interlace=progressive)


def _vips(data: bytes) -> None:
    import pyvips

    display = pyvips.Image.thumbnail_buffer(data, DISPLAY_BOX)
    _vips_jpeg(display, QUALITY, PROGRESSIVE)
    thumb = pyvips.Image.thumbnail_buffer(data, THUMB, height=THUMB, crop="centre")
    _vips_jpeg(thumb, QUALITY, PROGRESSIVE)


def vips_single_decode(data: bytes, box: int, thumb_box: int, quality: int,
                       progressive: bool) -> tuple[bytes, bytes]:
    """Both renditions from one decode. libvips evaluates lazily: without copy_memory()
    writing the display and cutting the thumb would each run the decode again."""
    import pyvips

    display = pyvips.Image.thumbnail_buffer(data, box).copy_memory()  # shrink-on-load decode
    thumb = display.thumbnail_image(thumb_box, height=thumb_box, crop="centre")
    return _vips_jpeg(display, quality, progressive), _vips_jpeg(thumb, quality, progressive)


def _vips1(data: bytes) -> None:
    vips_single_decode(data, DISPLAY_BOX, THUMB, QUALITY, PROGRESSIVE)


RUNNERS: dict[str, Callable[[bytes], None]] = {
    "ours": _ours, "naive": _naive, "vips": _vips, "vips1": _vips1,
}


def child_main(variant: str, path: str, runs: int, root: str) -> None:
    import resource

    sys.path.insert(0, root)
    _pin_to_one_core()
    _import_all()
    times: list[float] = []
    cpu: list[float] = []
    if variant != "baseline":
        data = Path(path).read_bytes()
        run = RUNNERS[variant]
        run(data)  # warm-up: lazy plugin/codec initialisation
        for _ in range(runs):
            start, start_cpu = time.perf_counter(), time.process_time()
            run(data)
            times.append((time.perf_counter() - start) * 1000)
            cpu.append((time.process_time() - start_cpu) * 1000)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"times_ms": times, "cpu_ms": cpu, "peak_mb": peak_kb / 1024,
                      "progressive": PROGRESSIVE}))


# ------------------------------------------------------------------ parent process


def run_child(variant: str, path: Path | None, runs: int, root: Path = REPO_ROOT) -> dict:
    env = dict(os.environ, VIPS_CONCURRENCY="1", OMP_NUM_THREADS="1")
    script = str(Path(__file__).resolve())
    cmd = [sys.executable, script, "--child", variant, str(path or ""), str(runs), str(root)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{variant} child failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="timed runs per variant (default 5)")
    parser.add_argument("--quick", action="store_true", help="2 runs, skip the PNG")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply the test images' sides by this (default 1: 12 MP and 48 MP; "
                             "CI's short run takes 0.1)")
    parser.add_argument("--root", type=Path, default=REPO_ROOT,
                        help="the checkout whose imaging is measured (default: this one)")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--make", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.make:
        make_images(Path(args.make[0]), args.make[2:], float(args.make[1]))
        return
    if args.child:
        variant, path, runs, root = args.child
        child_main(variant, path, int(runs), root)
        return

    runs = 2 if args.quick else max(1, args.runs)
    labels = [label for label, *_ in (IMAGES[:2] if args.quick else IMAGES)]
    with tempfile.TemporaryDirectory(prefix="resize-bench-") as tmp:
        start = time.perf_counter()
        paths = make_images_in_child(Path(tmp), labels, args.scale)
        sizes = {label: path.stat().st_size / 1e6 for label, path in paths.items()}
        print(f"made test images in {time.perf_counter() - start:.1f}s: "
              + ", ".join(f"{label} {mb:.1f} MB" for label, mb in sizes.items()))
        if args.scale != 1:
            print(f"scaled by {args.scale:g} (the targets are for the full-size images): " + ", ".join(
                f"{label} {'x'.join(map(str, scaled(size, args.scale)))}"
                for label, _, size, _ in IMAGES if label in labels))
        root = args.root.resolve()
        base = run_child("baseline", None, 0, root)
        baseline = base["peak_mb"]
        print(f"imaging of {root}; its JPEGs are {'progressive' if base['progressive'] else 'baseline'}")
        print(f"baseline child (imports only) peak RSS: {baseline:.1f} MB; "
              f"{runs} timed runs per variant, 1 core, median reported\n")
        results = {
            (label, variant): run_child(variant, paths[label], runs, root)
            for label in labels
            for variant in VARIANTS
        }
    report(results, baseline, labels)


def report(results: dict, baseline: float, labels: list[str]) -> None:
    # Ratios use CPU time: on a shared machine wall time also counts the waits for a core.
    median = {key: statistics.median(r["cpu_ms"]) for key, r in results.items()}
    wall = {key: statistics.median(r["times_ms"]) for key, r in results.items()}
    header = (f"{'image':<10} {'variant':<7} {'wall ms':>8} {'cpu ms':>8} {'peak RSS MB':>12}"
              f" {'delta MB':>9}")
    print(header)
    print("-" * len(header))
    for label in labels:
        for variant in VARIANTS:
            peak = results[label, variant]["peak_mb"]
            print(
                f"{label:<10} {variant:<7} {wall[label, variant]:>8.1f} {median[label, variant]:>8.1f}"
                f" {peak:>12.1f} {peak - baseline:>9.1f}"
            )
        speedup = median[label, "naive"] / median[label, "ours"]
        vs_vips = median[label, "ours"] / median[label, "vips"]
        vs_vips1 = median[label, "ours"] / median[label, "vips1"]
        print(f"{'':<10} naive/ours speed-up {speedup:.2f}x, ours/vips CPU {vs_vips:.2f}x, "
              f"ours/vips1 CPU {vs_vips1:.2f}x\n")

    checks = []
    if "12MP JPEG" in labels:
        speedup = median["12MP JPEG", "naive"] / median["12MP JPEG", "ours"]
        vs_vips = median["12MP JPEG", "ours"] / median["12MP JPEG", "vips"]
        checks.append(
            (speedup >= 2.5, f"12MP JPEG ours >= 2.5x faster than naive (got {speedup:.2f}x)")
        )
        checks.append((vs_vips <= 1.3, f"12MP JPEG ours <= 1.3x vips time (got {vs_vips:.2f}x)"))
    for label in ("12MP JPEG", "48MP JPEG"):
        if label in labels:
            vs_vips1 = median[label, "ours"] / median[label, "vips1"]
            checks.append((vs_vips1 <= 1.0,
                           f"{label} ours <= 1.0x libvips decoding once (got {vs_vips1:.2f}x)"))
    if "48MP JPEG" in labels:
        delta = results["48MP JPEG", "ours"]["peak_mb"] - baseline
        checks.append((delta < 150, f"48MP JPEG ours peak RSS delta < 150 MB (got {delta:.1f} MB)"))
    for ok, text in checks:
        print(("target met:    " if ok else "TARGET MISSED: ") + text)


if __name__ == "__main__":
    main()
