"""Rendition bytes at the same visual quality: how make_renditions codes its JPEGs.

    python benchmarks/renditions.py [--runs 5] [--photos 10] [--size 4000x3000]

For each test image it runs make_renditions and catches the two rendition images just
before they are coded, then codes each of them both ways at the same quality (85):

  baseline      what the renditions were before issue 11 (no Huffman optimisation)
  optimised     baseline (sequential) scans with optimised Huffman tables
  progressive   what render._output does now: progressive scans, optimised tables

and reports bytes, the CPU time of the coding, and SSIM (scikit-image's
structural_similarity, all three channels) of the decoded JPEG against the uncoded pixels.
Test images: the real photographs scikit-image ships (astronaut, coffee, chelsea, rocket,
motorcycle, hubble, retina...) saved as JPEG q95, plus 12 MP photo-like images made in code.
--photos N takes the first N of scikit-image's photos, --size WxH the photo-like images' size
(CI's short run: fewer and smaller images, every column and total still printed).

    python benchmarks/renditions.py --formats [--sweep]

The formats table (issue 26): per image and rendition, what the worker makes: the JPEG, and
the WebP and AVIF at the quality render.as_good_as picks for that image (the lowest from
WEBP_QUALITY / AVIF_QUALITY up whose SSIM by the worker is at least the JPEG's; none when the
variant would not be smaller than the JPEG), with the bytes, the CPU of that choice, and each
variant's SSIM minus the JPEG's by scikit-image (an independent judge); on the photos above
plus a phone HEIC, a screenshot-like PNG and a photo with transparency. Then min(dSSIM) and
the count below per format, the bytes against the JPEGs, the search against a full scan of
every quality (issue 47: its bytes over the scan's, the encodes it took), and the worker's
whole job CPU with no extra format, WebP, and WebP + AVIF. --sweep adds the other way: one fixed quality per format for
every image (bytes, min(dSSIM), count below), and AVIF's speed.
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
from stack import median  # noqa: E402
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


def sources(photos: int = len(PHOTOS), size: tuple[int, int] = (4000, 3000)) -> list[tuple[str, bytes]]:
    folder = Path(skimage.data.__file__).parent
    found = []
    for name in PHOTOS[:photos]:
        im = Image.open(folder / name).convert("RGB")
        out = io.BytesIO()
        im.save(out, "JPEG", quality=95)
        found.append((name.split(".")[0], out.getvalue()))
    width, height = size
    found += [(f"photo-like {width * height / 1e6:.2g}MP #{seed}", photo_like(width, height, seed, quality=92))
              for seed in (1, 2)]
    return found


def uncoded(data: bytes, settings: Settings) -> dict:
    """The display and thumb images make_renditions hands to its encoder."""
    caught = {}
    real = render._output

    def catch(name, im, coding, formats=(), hints=None):
        # A libvips image since issue 48: its pixels as Pillow's, which this script codes.
        caught[str(name)] = render.pixels_of(im) if not isinstance(im, Image.Image) else im.copy()
        return real(name, im, coding, formats, hints)

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


def phone_and_edge_sources() -> list[tuple[str, bytes]]:
    """A phone's HEIC, a screenshot-like PNG, a photo with transparency."""
    import pillow_heif
    from PIL import ImageDraw

    folder = Path(skimage.data.__file__).parent
    photo = Image.open(folder / "chelsea.png").convert("RGB").resize((1600, 1200))
    heif = pillow_heif.from_pillow(photo)
    heic = io.BytesIO()
    heif.save(heic, quality=90)
    shot = Image.new("RGB", (1170, 2532), "white")  # a phone's screen, portrait
    draw = ImageDraw.Draw(shot)
    for row in range(0, 2532, 120):
        draw.rectangle((40, row + 20, 1130, row + 100), fill=(235, 240, 250), outline=(200, 205, 220))
        draw.text((70, row + 45), f"Message {row // 120}: the quick brown fox jumps over", fill=(20, 20, 30))
    png = io.BytesIO()
    shot.save(png, "PNG")
    rgba = Image.open(folder / "astronaut.png").convert("RGBA")
    alpha = Image.new("L", rgba.size, 0)
    ImageDraw.Draw(alpha).ellipse((40, 40, rgba.width - 40, rgba.height - 40), fill=255)
    rgba.putalpha(alpha)
    transparent = io.BytesIO()
    rgba.save(transparent, "PNG")
    return [("phone HEIC", heic.getvalue()), ("screenshot PNG", png.getvalue()),
            ("transparent PNG", transparent.getvalue())]


def coded(im: Image.Image, fmt, coding, runs: int) -> tuple[bytes, float, float]:
    """(bytes, median encode CPU ms, SSIM against the uncoded image)."""
    times = []
    for _ in range(runs):
        start = time.process_time()
        data = render.encode(im, fmt, coding)
        times.append((time.process_time() - start) * 1000)
    return data, sorted(times)[len(times) // 2], judge(im, data)


def judge(im: Image.Image, data: bytes) -> float:
    """scikit-image's SSIM (7x7 windows, three channels) of a coded file against the uncoded
    image: the benchmark's judge, independent of the worker's own metric."""
    decoded = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    return structural_similarity(np.asarray(im), decoded, channel_axis=2)


def chosen(im: Image.Image, fmt, coding, jpeg: bytes, runs: int, hints: dict) -> dict:
    """What the worker makes (render.as_good_as: the JPEG's SSIM by the worker's metric, the
    first guess from the image's previous rendition): quality, variant, median CPU ms of the
    whole choice, the encodes it took, and the floor: the median CPU of one encode at the
    quality chosen. None for quality and variant when it makes none."""
    from chalicelib.imaging.similarity import Reference

    times = []
    guess = hints.get(fmt)
    encodes = [0]  # every encode of the first run, the searches that make no variant too
    real = render.encode

    def counted(*args):
        encodes[0] += len(times) == 0
        return real(*args)

    render.encode = counted
    try:
        for _ in range(runs):
            start = time.process_time()
            reference = Reference(im)
            target = reference.ssim(Image.open(io.BytesIO(jpeg)).convert("RGB"))
            made = render.as_good_as(im, fmt, coding, target, len(jpeg), reference, guess)
            times.append((time.process_time() - start) * 1000)
    finally:
        render.encode = real
    if made is None:
        return {"quality": None, "data": None, "cpu": median(times), "encodes": None, "floor": None,
                "spent": encodes[0]}
    hints[fmt] = made.quality
    floor = coded(im, fmt, coding.at(fmt, made.quality), runs)[1]
    return {"quality": made.quality, "data": made.data, "cpu": median(times), "encodes": made.encodes,
            "floor": floor, "spent": encodes[0]}


def formats_table(settings: Settings, runs: int, sweep: bool) -> None:
    from chalicelib.domain.renditions import RenditionFormat as F

    coding = render.Coding.of(settings)
    extras = (F.WEBP, F.AVIF)
    print(f"JPEG q{coding.jpeg_quality}; WebP from q{coding.webp_quality} (method 4), AVIF from "
          f"q{coding.avif_quality} speed {coding.avif_speed}, up: the lowest quality whose SSIM by the worker is "
          f"the JPEG's (render.as_good_as: a first guess, then jumps), none when not smaller than the JPEG. CPU ms = median of {runs} (WebP/AVIF: the "
          "whole choice: JPEG decode and SSIM, each try's encode, decode and SSIM). dSSIM = scikit-image SSIM "
          "of the variant minus the JPEG's, both against the uncoded rendition")
    head = (f"{'image':<22} {'rendition':<9} {'size':>9} {'JPEG B':>8} {'WebP q':>6} {'WebP B':>8} {'AVIF q':>6}"
            f" {'AVIF B':>8} {'JPEG ms':>8} {'WebP ms':>8} {'AVIF ms':>8} {'SSIM JPEG':>9} {'dWebP':>7} {'dAVIF':>7}")
    print(head)
    print("-" * len(head))
    rows = []
    for label, data in sources() + phone_and_edge_sources():
        hints: dict = {}  # as make_images keeps them: the image's renditions in order
        for rendition, im in uncoded(data, settings).items():
            jpeg = coded(im, F.JPEG, coding, runs)
            row = {"label": label, "rendition": rendition, "size": im.size, "im": im, "jpeg": jpeg}
            for fmt in extras:
                c = chosen(im, fmt, coding, jpeg[0], runs, hints)
                row[fmt] = (c["quality"], c["data"], c["cpu"], None if c["data"] is None else judge(im, c["data"]) - jpeg[2],
                            c["encodes"], c["floor"], c["spent"])
                row["scan", fmt] = scan(im, fmt, coding, jpeg[0])
            rows.append(row)

            def cells(fmt):
                quality, out = row[fmt][:2]
                return ("-", "none") if out is None else (quality, len(out))

            (wq, wb), (aq, ab) = cells(F.WEBP), cells(F.AVIF)
            dw, da = (f"{row[f][3]:+.4f}" if row[f][1] else "-" for f in extras)
            print(f"{label:<22} {rendition:<9} {'%dx%d' % im.size:>9} {len(jpeg[0]):>8} {wq:>6} {wb:>8} {aq:>6}"
                  f" {ab:>8} {jpeg[1]:>8.1f} {row[F.WEBP][2]:>8.1f} {row[F.AVIF][2]:>8.1f} {jpeg[2]:>9.4f}"
                  f" {dw:>7} {da:>7}")
    print()
    jpeg_bytes = sum(len(r["jpeg"][0]) for r in rows)
    jpeg_cpu = sum(r["jpeg"][1] for r in rows)
    print(f"all JPEG : {jpeg_bytes:>9} bytes, encode CPU {jpeg_cpu:.0f} ms, {len(rows)} renditions")
    for fmt in extras:
        kept = [r for r in rows if r[fmt][1] is not None]
        deltas = [r[fmt][3] for r in kept]
        stored = sum(len(r[fmt][1]) for r in kept)
        their_jpegs = sum(len(r["jpeg"][0]) for r in kept)
        fetched = stored + sum(len(r["jpeg"][0]) for r in rows if r[fmt][1] is None)
        cpu = sum(r[fmt][2] for r in rows)
        print(f"all {fmt.value:<5}: made for {len(kept)}/{len(rows)} renditions (the others: the JPEG is smaller at "
              f"its SSIM); {stored} bytes stored, {stored / their_jpegs - 1:+.1%} against their JPEGs; "
              f"a client asking for it fetches {fetched / jpeg_bytes - 1:+.1%} against JPEG only; "
              f"stored = {stored / jpeg_bytes:.0%} of the JPEGs' bytes")
        print(f"           min(SSIM {fmt.value} - SSIM JPEG) {min(deltas):+.4f}, below the JPEG's on "
              f"{sum(d < 0 for d in deltas)}/{len(kept)} (scikit-image); choice CPU {cpu:.0f} ms")
        encodes = [r[fmt][4] for r in kept]
        choice, floor = sum(r[fmt][2] for r in kept), sum(r[fmt][5] for r in kept)
        print(f"           encodes per variant: mean {sum(encodes) / len(encodes):.2f}, max {max(encodes)}; "
              f"choice CPU {choice:.0f} ms against the floor (one encode each at the quality chosen) "
              f"{floor:.0f} ms: {choice / floor:.2f}x")
    for fmt in extras:
        against_scan(rows, fmt)
    wide_jobs = {r["label"] for r in rows if max(r["size"]) == settings.display_box}
    for fmt in extras:
        per_job = sum(r[fmt][2] for r in rows if r["label"] in wide_jobs) / len(wide_jobs)
        print(f"choice CPU per job with a {settings.display_box} px display (display + thumb, mean of "
              f"{len(wide_jobs)}: {', '.join(sorted(wide_jobs))}), {fmt.value}: {per_job:.0f} ms")
    sample = [d for _, d in sources()[:6]]
    big = [d for label, d in sources() + phone_and_edge_sources() if label in wide_jobs]
    for what, photos in (("6 small photos", sample), (f"the {len(big)} with a 1280 px display", big)):
        for name, formats in (("JPEG only", ()), ("JPEG + WebP", (F.WEBP,)), ("JPEG + WebP + AVIF", extras)):
            start = time.process_time()
            for data in photos:
                render.make_images(data, settings.max_pixels, rendition_specs(settings), coding, formats=formats)
            print(f"whole job (decode, resize, encode, placeholder), {name}: "
                  f"{(time.process_time() - start) * 1000 / len(photos):.0f} ms CPU per job (mean of {what})")
    for fmt in extras:
        gave_up = [r for r in rows if r[fmt][1] is None]
        print(f"{fmt.value}: {len(gave_up)} searches ended with no variant, {sum(r[fmt][2] for r in gave_up):.0f} ms "
              f"of the choice CPU")
    cap_saving(big, settings, coding, max(1, runs))
    if sweep:
        quality_sweep([r["im"] for r in rows], coding)


def scan(im: Image.Image, fmt, coding, jpeg: bytes) -> dict:
    """The full scan the search is measured against: every quality from the configured one
    up, one at a time, and the first that meets the search's rule (the worker's SSIM at least
    the JPEG's, by render's margin, in fewer bytes than the JPEG): the lowest quality that
    does. Also whether the SSIM ever falls as the quality rises (tried up to that one)."""
    from chalicelib.imaging.similarity import Reference

    reference = Reference(im)
    target = reference.ssim(Image.open(io.BytesIO(jpeg)).convert("RGB")) + render._MARGIN
    scores = []
    for quality in range(coding.quality_of(fmt), 101):
        data = render.encode(im, fmt, coding.at(fmt, quality))
        score = reference.ssim(Image.open(io.BytesIO(data)).convert("RGB"))
        scores.append(score)
        if score >= target and len(data) < len(jpeg):
            return {"quality": quality, "data": data, "dips": _dips(scores)}
    return {"quality": None, "data": None, "dips": _dips(scores)}


def _dips(scores: list) -> int:
    return sum(b < a for a, b in zip(scores, scores[1:]))


def against_scan(rows: list, fmt) -> None:
    """The search (render.as_good_as) against the full scan, variant by variant: its bytes
    over the scan's where both make one, where only one does, and the encodes it took."""
    both = [r for r in rows if r[fmt][1] is not None and r["scan", fmt]["data"] is not None]
    ratios = [len(r[fmt][1]) / len(r["scan", fmt]["data"]) - 1 for r in both]
    over = [(r["label"], r["rendition"], r[fmt][0], r["scan", fmt]["quality"], ratio)
            for r, ratio in zip(both, ratios) if ratio > 0]
    only_scan = [f"{r['label']} {r['rendition']}" for r in rows if r[fmt][1] is None and r["scan", fmt]["data"]]
    only_search = [f"{r['label']} {r['rendition']}" for r in rows if r[fmt][1] and r["scan", fmt]["data"] is None]
    stored = sum(len(r[fmt][1]) for r in both)
    scanned = sum(len(r["scan", fmt]["data"]) for r in both)
    encodes = [r[fmt][4] for r in rows if r[fmt][4] is not None]
    spent = sum(r[fmt][6] for r in rows)
    print(f"{fmt.value} against a full scan (every quality from the configured one, step 1; the lowest "
          f"that meets the rule), on the {len(both)} renditions both "
          f"give a variant: bytes {stored / scanned - 1:+.2%} in all, mean per variant "
          f"{sum(ratios) / len(ratios):+.2%}, max {max(ratios):+.2%}; larger than the scan's on {len(over)}/{len(both)}"
          + "".join(f"\n           {label} {name}: q{q} against the scan's q{sq}, {ratio:+.1%}"
                    for label, name, q, sq, ratio in over))
    print(f"           variant only in the scan: {len(only_scan)} {only_scan}; only in the search: "
          f"{len(only_search)} {only_search}; encodes per variant made: mean {sum(encodes) / len(encodes):.2f}, "
          f"max {max(encodes)}; encodes per search, variant or not: {spent / len(rows):.2f}; SSIM fell as the quality rose, somewhere in the scan, on "
          f"{sum(r['scan', fmt]['dips'] > 0 for r in rows)}/{len(rows)} renditions")


def cap_saving(photos: list, settings: Settings, coding, runs: int) -> None:
    """The whole jobs with WebP and AVIF, with the search's cap on a try (render._worth_trying)
    and without it (patched to 100), in turns, so both share the machine's state."""
    from chalicelib.domain.renditions import RenditionFormat as F

    real = render._worth_trying
    totals = {"capped": [], "uncapped": []}
    encodes = {"capped": 0, "uncapped": 0}
    encode = render.encode

    def counted(*args):
        encodes[which] += 1
        return encode(*args)

    render.encode = counted
    try:
        for _ in range(runs):
            for which in totals:
                render._worth_trying = real if which == "capped" else (lambda *a: 100)
                start = time.process_time()
                for data in photos:
                    render.make_images(data, settings.max_pixels, rendition_specs(settings), coding,
                                       formats=(F.WEBP, F.AVIF))
                totals[which].append((time.process_time() - start) * 1000 / len(photos))
    finally:
        render._worth_trying, render.encode = real, encode
    capped, uncapped = median(totals["capped"]), median(totals["uncapped"])
    print(f"the cap on a try, side by side (the {len(photos)} jobs with a 1280 px display, JPEG + WebP + AVIF, "
          f"median of {runs}): {capped:.0f} ms CPU per job with it, {uncapped:.0f} without "
          f"({capped / uncapped:.2f}x); encodes {encodes['capped'] // runs} against {encodes['uncapped'] // runs}")


def quality_sweep(images: list, coding) -> None:
    """One fixed quality per format for every image, the other way to hold the rule."""
    import dataclasses

    from chalicelib.domain.renditions import RenditionFormat as F

    jpeg = [coded(im, F.JPEG, coding, 1) for im in images]
    jpeg_bytes = sum(len(c[0]) for c in jpeg)
    print(f"\nsweep, one fixed quality for all {len(images)}: JPEG q{coding.jpeg_quality}, {jpeg_bytes} bytes")
    trials = [(F.WEBP, dict(webp_quality=q)) for q in (85, 90, 94, 96, 100)]
    trials += [(F.AVIF, dict(avif_quality=q, avif_speed=coding.avif_speed)) for q in (70, 80, 90, 95)]
    trials += [(F.AVIF, dict(avif_quality=70, avif_speed=s)) for s in (6, 8, 9) if s != coding.avif_speed]
    for fmt, change in trials:
        out = [coded(im, fmt, dataclasses.replace(coding, **change), 1) for im in images]
        deltas = [o[2] - j[2] for o, j in zip(out, jpeg)]
        size, cpu = sum(len(c[0]) for c in out), sum(c[1] for c in out)
        print(f"  {fmt.value} {change}: {size / jpeg_bytes - 1:+.1%} bytes, encode {cpu:.0f} ms, "
              f"min(SSIM - JPEG's) {min(deltas):+.4f}, below on {sum(d < 0 for d in deltas)}/{len(images)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="codings of each image (median CPU time)")
    parser.add_argument("--formats", action="store_true", help="the JPEG/WebP/AVIF table instead")
    parser.add_argument("--sweep", action="store_true", help="with --formats: the quality search too")
    parser.add_argument("--photos", type=int, default=len(PHOTOS),
                        help=f"the default table: the first N of scikit-image's photos (default {len(PHOTOS)})")
    parser.add_argument("--size", default="4000x3000",
                        help="the default table: WxH of the two photo-like images (default 4000x3000: 12 MP)")
    args = parser.parse_args()
    settings = Settings()
    if args.formats:
        formats_table(settings, args.runs, args.sweep)
        return 0
    totals = {}  # (rendition, coding) -> [bytes, CPU ms], for every rendition the worker makes
    identical = True
    head = (f"{'image':<22} {'rendition':<9} {'size':>9} {'baseline B':>11} {'optim. B':>9} {'progr. B':>9}"
            f" {'optim.':>7} {'progr.':>7} {'base ms':>8} {'optim. ms':>9} {'progr. ms':>9}"
            f" {'SSIM base':>9} {'SSIM progr.':>11}")
    print(f"JPEG quality {settings.jpeg_quality}; CPU ms = median of {args.runs} codings; "
          "SSIM of the decoded JPEG against the uncoded rendition")
    print(head)
    print("-" * len(head))
    size = tuple(int(side) for side in args.size.split("x"))
    for label, data in sources(args.photos, size):
        for rendition, im in uncoded(data, settings).items():
            reference = np.asarray(im)
            row = {}
            for coding, options in CODINGS.items():
                coded, cpu = code(im, settings.jpeg_quality, args.runs, **options)
                decoded = np.asarray(Image.open(io.BytesIO(coded)).convert("RGB"))
                ssim = structural_similarity(reference, decoded, channel_axis=2)
                row[coding] = (len(coded), cpu, ssim, decoded)
                total = totals.setdefault((rendition, coding), [0, 0.0])
                total[0] += len(coded)
                total[1] += cpu
            identical &= all(np.array_equal(row["baseline"][3], row[c][3]) for c in CODINGS)
            b, o, p = row["baseline"], row["optimised"], row["progressive"]
            print(f"{label:<22} {rendition:<9} {'%dx%d' % im.size:>9} {b[0]:>11} {o[0]:>9} {p[0]:>9}"
                  f" {o[0] / b[0] - 1:>+6.1%} {p[0] / b[0] - 1:>+6.1%} {b[1]:>8.1f} {o[1]:>9.1f} {p[1]:>9.1f}"
                  f" {b[2]:>9.4f} {p[2]:>11.4f}")
    print()
    for rendition in dict.fromkeys(r for r, _ in totals):
        b = totals[rendition, "baseline"]
        for coding in ("optimised", "progressive"):
            c = totals[rendition, coding]
            print(f"all {rendition}s, baseline -> {coding}: {b[0]} -> {c[0]} bytes ({c[0] / b[0] - 1:+.1%}); "
                  f"coding CPU {b[1]:.1f} -> {c[1]:.1f} ms in total")
    print("decoded pixels identical in every case: " + ("yes" if identical else "NO"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
