"""The focus of a picture (chalicelib/imaging/focus.py): how often a square thumbnail placed
around it keeps the subject, against the centre rule and libvips' attention crop, and what it
costs a job.

    python benchmarks/focus.py [--scale 1.0] [--runs 3] [--size 4000x3000]

1. Scenes with a known subject box, made from real photographs (scikit-image's, and the faces
   of Labeled Faces in the Wild it ships), on canvases the size of the worker's largest
   rendition (1280 on the long side; --scale for smaller):
   - one subject off-centre (a person, a cat, a cup, a rocket, a face...) on landscape and
     portrait canvases, on a plain background and on a textured one (grass, gravel, brick);
   - a person beside a more colourful object (the colour wheel, the coffee cup, the rocket,
     a stained tissue), the person the subject.
   Each method gives a point; the square thumbnail keeps the canvas's whole short side and
   slides along its long side so that the point is as near its centre as the canvas allows.
   A scene counts as kept when the square holds at least 90 % of the subject's box. Methods:
   the centre; libvips' attention (pyvips' smartcrop, interesting=attention: its attention
   point); ours (focus.find on the canvas as the worker has it, decoded and upright).
   Targets (issue 49): ours >= 0.95 overall, >= 0.9 on person-beside-object, and never below
   libvips on any group.
2. CPU: focus.find per image at the working size (on the scenes, and on the largest rendition
   of a 12 MP photo-like JPEG, benchmarks/worker_cpu.py's), beside make_images on that JPEG
   (the decode child's work for a job: decode, renditions, placeholder, hash), measured in
   turn in this process. Its share of make_images is an upper bound of its share of the job;
   the target is against the worker's whole CPU for a 12 MP job (WORKER_CPU_MS, from
   benchmarks/worker_cpu.py): at most 10 %.
3. Cold start: the CPU a fresh interpreter (a decode child) spends importing the focus module
   (numpy with it) and reading the model, once per process.
4. Package size: what numpy (the detector's only new dependency) and the model add to the
   deployment package, as infra.bytecode writes it (infra.prune's rules, a .pyc beside each
   .py), zipped and unzipped, beside Lambda's 250 MB unzipped limit.

A report: the exit status is 0 even when a target is missed.
"""
from __future__ import annotations

import argparse
import collections
import io
import os
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from PIL import Image, ImageOps  # noqa: E402

import stack  # noqa: E402
from chalicelib.imaging import focus  # noqa: E402
from chalicelib.imaging import render  # noqa: E402
from tests.images import photo_image  # noqa: E402

KEEP = 0.9
# Faces of Labeled Faces in the Wild used as persons.
FACES = 16
# A 12 MP job's worker CPU, decode child included (benchmarks/worker_cpu.py's method, on main before this
# change), and the package's size then (docs/deploy.md): the figures the costs are put against.
WORKER_CPU_MS = 160
PACKAGE_MB = (25.0, 82)  # zipped, unzipped
# The worker's largest rendition's long side (Settings.display_box): the image find is given.
LONG_SIDE = 1280
# Canvases (long side : short side), each made landscape and portrait.
ASPECTS = ((16, 9), (3, 2), (2, 1))
# Where the subject's centre is put along the long side (fractions): off-centre, both ways.
PLACES = (0.18, 0.3, 0.72, 0.85)


@dataclass(frozen=True)
class Subject:
    name: str
    image: Image.Image
    person: bool


@dataclass(frozen=True)
class Scene:
    group: str
    name: str
    canvas: Image.Image
    box: tuple[int, int, int, int]  # the subject's: left, top, right, bottom


def subjects() -> list[Subject]:
    """Real photographs cut to their subject: the box of each is the whole cut."""
    astronaut = photo_image("astronaut.png")
    found = [
        Subject("astronaut", astronaut.crop((90, 0, 420, 512)), True),
        Subject("cameraman", photo_image("camera.png").crop((60, 20, 420, 480)), True),
        Subject("cat", photo_image("chelsea.png").crop((60, 0, 360, 300)), False),
        Subject("cup", photo_image("coffee.png").crop((0, 0, 420, 400)), False),
        Subject("rocket", photo_image("rocket.jpg").crop((240, 0, 420, 427)), False),
        Subject("motorcycle", photo_image("motorcycle_left.png").crop((60, 0, 660, 500)), False),
    ]
    return found + [Subject(f"face {i}", face, True) for i, face in enumerate(lfw_faces(FACES))]


# Complexions the grey faces are tinted to (the shadow's colour, the light's), in turn.
COMPLEXIONS = (((60, 30, 20), (255, 224, 196)), ((40, 20, 10), (224, 172, 128)), ((20, 10, 5), (160, 110, 80)))


def lfw_faces(count: int) -> list[Image.Image]:
    """Faces of Labeled Faces in the Wild (scikit-image's subset: 25 px grey crops), each as
    a head-and-shoulders portrait: the face, tinted to a complexion (the subset is grey; a
    colour photo of a person has skin's colours, which libvips' attention weighs too), above
    a shirt."""
    import skimage.data

    faces = skimage.data.lfw_subset()[:count]
    out = []
    for i, face in enumerate(faces):
        head = Image.fromarray((face * 255).astype(np.uint8)).resize((160, 160), Image.Resampling.BICUBIC)
        person = Image.new("RGB", (220, 300), (70, 72, 80))
        person.paste(ImageOps.colorize(head, *COMPLEXIONS[i % len(COMPLEXIONS)]), (30, 10))
        out.append(person)
    return out


def objects() -> list[tuple[str, Image.Image]]:
    """Colourful things a person stands beside: more colour and edges than a person has."""
    import skimage.data

    wheel = Image.fromarray(skimage.data.colorwheel()).convert("RGB")
    return [("colour wheel", wheel), ("cup", photo_image("coffee.png").crop((0, 0, 420, 400))),
            ("rocket", photo_image("rocket.jpg").crop((240, 0, 420, 427))),
            ("tissue", photo_image("ihc.png").crop((0, 0, 400, 400)))]


def backgrounds(size: tuple[int, int]) -> dict[str, Image.Image]:
    textures = {}
    for name, tint in (("grass", (90, 140, 70)), ("gravel", (150, 140, 130)), ("brick", (170, 110, 90))):
        grey = photo_image(f"{name}.png").convert("L")
        tiled = Image.new("L", size)
        for x in range(0, size[0], grey.width):
            for y in range(0, size[1], grey.height):
                tiled.paste(grey, (x, y))
        textures[name] = ImageOps.colorize(tiled, (0, 0, 0), tint)
    return {"plain": Image.new("RGB", size, (214, 210, 200)), **textures}


def canvas_size(aspect: tuple[int, int], portrait: bool, scale: float) -> tuple[int, int]:
    long_side = round(LONG_SIDE * scale)
    short = round(long_side * aspect[1] / aspect[0])
    return (short, long_side) if portrait else (long_side, short)


def fitted(image: Image.Image, height: int) -> Image.Image:
    width = round(image.width * height / image.height)
    return image.resize((width, height), Image.Resampling.LANCZOS)


def place(canvas: Image.Image, image: Image.Image, along: float, across: float) -> tuple[int, int, int, int]:
    """Paste image with its centre at `along` of the canvas's long side and `across` of its
    short one (kept inside); its box."""
    width, height = canvas.size
    if width >= height:
        cx, cy = along * width, across * height
    else:
        cx, cy = across * width, along * height
    left = int(min(max(0, cx - image.width / 2), width - image.width))
    top = int(min(max(0, cy - image.height / 2), height - image.height))
    canvas.paste(image, (left, top))
    return left, top, left + image.width, top + image.height


def scenes(scale: float) -> list[Scene]:
    made = []
    things = subjects()
    for aspect in ASPECTS:
        for portrait in (False, True):
            size = canvas_size(aspect, portrait, scale)
            short = min(size)
            orientation = "portrait" if portrait else "landscape"
            for background, ground in backgrounds(size).items():
                kind = "plain" if background == "plain" else "textured"
                for i, subject in enumerate(things):
                    # Half to two thirds of the short side high: a subject, not a speck.
                    image = fitted(subject.image, round(short * (0.5 + 0.05 * (i % 4))))
                    if portrait and image.width > 0.9 * short:
                        image = image.resize((round(0.9 * short), round(image.height * 0.9 * short / image.width)))
                    if kind == "textured" and i % 3 != ["grass", "gravel", "brick"].index(background):
                        continue  # each subject on one of the three textures
                    along = PLACES[(i + len(made)) % len(PLACES)]
                    canvas = ground.copy()
                    box = place(canvas, image, along, 0.5)
                    made.append(Scene(f"{orientation} {kind}", f"{subject.name} {aspect[0]}:{aspect[1]} at {along}",
                                      canvas, box))
    # A person beside a more colourful object, the two at opposite ends of a long canvas.
    persons = [s for s in things if s.person]
    for aspect in ((2, 1), (16, 9)):
        for portrait in (False, True):
            size = canvas_size(aspect, portrait, scale)
            short = min(size)
            for i, person in enumerate(persons):
                name, thing = objects()[i % 4]
                canvas = backgrounds(size)["plain"]
                person_first = i % 2 == 0
                height = round(short * 0.6)
                box = place(canvas, fitted(person.image, height), 0.2 if person_first else 0.8, 0.5)
                place(canvas, fitted(thing, height), 0.8 if person_first else 0.2, 0.5)
                made.append(Scene("person beside object", f"{person.name} beside the {name}, "
                                  f"{'portrait' if portrait else 'landscape'} {aspect[0]}:{aspect[1]}", canvas, box))
    return made


# --------------------------------------------------------------------------- methods


def centre(canvas: Image.Image) -> tuple[float, float]:
    return 0.5, 0.5


def attention(canvas: Image.Image) -> tuple[float, float]:
    """libvips' attention point (the centre of the crop its smartcrop picks is placed around it)."""
    import pyvips

    image = pyvips.Image.new_from_memory(canvas.tobytes(), canvas.width, canvas.height, 3, "uchar")
    side = min(canvas.size)
    _, point = image.smartcrop(side, side, interesting="attention", attention_x=True, attention_y=True)
    return point["attention_x"] / canvas.width, point["attention_y"] / canvas.height


def ours(canvas: Image.Image) -> tuple[float, float]:
    found = focus.find(canvas)
    return found.x, found.y


METHODS = {"centre": centre, "libvips attention": attention, "ours": ours}


def square(size: tuple[int, int], point: tuple[float, float]) -> tuple[int, int, int, int]:
    """The square keeping the whole short side, slid along the long one so that the point is as
    near its centre as the canvas allows."""
    width, height = size
    side = min(size)
    if width >= height:
        left = round(min(max(0.0, point[0] * width - side / 2), width - side))
        return left, 0, left + side, side
    top = round(min(max(0.0, point[1] * height - side / 2), height - side))
    return 0, top, side, top + side


def kept(box: tuple[int, int, int, int], window: tuple[int, int, int, int]) -> float:
    width = max(0, min(box[2], window[2]) - max(box[0], window[0]))
    height = max(0, min(box[3], window[3]) - max(box[1], window[1]))
    return width * height / ((box[2] - box[0]) * (box[3] - box[1]))


def quality(all_scenes: list[Scene]) -> tuple[dict, dict, list[str]]:
    """{group: {method: share kept}}, {method: CPU ms per scene}, the scenes ours misses."""
    hits: dict = collections.defaultdict(lambda: collections.Counter())
    counts = collections.Counter()
    cpu = collections.defaultdict(list)
    misses = []
    for scene in all_scenes:
        counts[scene.group] += 1
        for method, run in METHODS.items():  # side by side, scene by scene
            start = time.process_time()
            point = run(scene.canvas)
            cpu[method].append((time.process_time() - start) * 1000)
            share = kept(scene.box, square(scene.canvas.size, point))
            if share >= KEEP:
                hits[scene.group][method] += 1
            elif method == "ours":
                misses.append(f"{scene.group}: {scene.name}: kept {share:.2f}, focus ({point[0]:.2f}, {point[1]:.2f}), "
                              f"{focus.find(scene.canvas).source}")
    table = {group: {m: hits[group][m] / counts[group] for m in METHODS} for group in counts}
    table["all"] = {m: sum(hits[g][m] for g in counts) / sum(counts.values()) for m in METHODS}
    table = {g: {**v, "scenes": counts[g] if g != "all" else sum(counts.values())} for g, v in table.items()}
    return table, {m: stack.median(v) for m, v in cpu.items()}, misses


# -------------------------------------------------------------------------------- cost


def job_cpu(size: tuple[int, int], runs: int) -> tuple[float, float, tuple[int, int]]:
    """CPU ms of make_images on the photo-like JPEG benchmarks/worker_cpu.py times (its first
    seed, at `size`), and of focus.find on that job's largest rendition, in turn; and that
    rendition's size."""
    from load import photo_like

    data = photo_like(*size, seed=21, quality=90)
    largest = render._decode_within(Image.open(io.BytesIO(data)), LONG_SIDE)
    render.make_images(data, 50_000_000)
    focus.find(largest)  # warm-up: the model read
    job, found = [], []
    for _ in range(runs):
        start = time.process_time()
        render.make_images(data, 50_000_000)
        job.append((time.process_time() - start) * 1000)
        for _ in range(5):
            start = time.process_time()
            focus.find(largest)
            found.append((time.process_time() - start) * 1000)
    return stack.median(job), stack.median(found), largest.size


COLD = """import time
from PIL import Image
start = time.process_time()
from chalicelib.imaging import focus
imported = time.process_time()
focus.cascade()
print((imported - start) * 1000, (time.process_time() - imported) * 1000)
"""


def cold_start(runs: int) -> tuple[float, float]:
    """CPU ms a fresh interpreter (as a decode child is) spends importing the focus (numpy with
    it) and reading the model, once per process, Pillow already imported: medians of `runs`."""
    import subprocess

    imports, reads = [], []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", COLD], cwd=ROOT, capture_output=True, text=True, check=True)
        imported, read = (float(v) for v in done.stdout.split())
        imports.append(imported)
        reads.append(read)
    return stack.median(imports), stack.median(reads)


def package_sizes() -> dict[str, tuple[int, int]]:
    """(zipped, unzipped) bytes of what the focus adds to the package, written as
    infra.bytecode writes it: numpy without what infra.prune drops, each .py with its .pyc;
    and the model and the module."""
    import py_compile
    import tempfile

    from infra.prune import drops

    site = Path(np.__file__).resolve().parent.parent
    parts = {"numpy": [p for pattern in ("numpy/**/*", "numpy.libs/*", "numpy-*.dist-info/*")
                       for p in sorted(site.glob(pattern)) if p.is_file()],
             "model and module": [focus.MODEL, Path(focus.__file__)]}
    sizes = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, files in parts.items():
            buffer = io.BytesIO()
            unzipped = 0
            with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
                for path in files:
                    arcname = str(path.relative_to(site if path.is_relative_to(site) else ROOT))
                    if "__pycache__" in arcname or drops(arcname):
                        continue
                    archive.write(path, arcname)
                    unzipped += path.stat().st_size
                    if path.suffix == ".py":
                        pyc = Path(tmp) / "x.pyc"
                        py_compile.compile(str(path), str(pyc), doraise=False,
                                           invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
                        if pyc.exists():
                            archive.write(pyc, arcname + "c")
                            unzipped += pyc.stat().st_size
            sizes[name] = (len(buffer.getvalue()), unzipped)
    return sizes


# ------------------------------------------------------------------------------ report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="canvas size against the worker's 1280 px")
    parser.add_argument("--runs", type=int, default=3, help="timed make_images runs for the job's CPU")
    parser.add_argument("--size", default="4000x3000", help="WxH of the job's photo (default 12 MP)")
    args = parser.parse_args()
    os.environ.setdefault("VIPS_CONCURRENCY", "1")
    import pyvips

    pyvips.cache_set_max(0)
    load = stack.load_average()
    all_scenes = scenes(args.scale)
    table, cpu, misses = quality(all_scenes)
    width, height = (int(side) for side in args.size.split("x"))
    job, found, working = job_cpu((width, height), args.runs)
    sizes = package_sizes()
    imported, read = cold_start(max(3, args.runs))

    print(f"{len(all_scenes)} scenes; a square thumbnail counts as kept when it holds >= {KEEP:.0%} of the subject's box "
          f"(load average {load} -> {stack.load_average()}; a shared machine)")
    head = f"{'group':<24} {'scenes':>6} {'centre':>7} {'libvips attention':>18} {'ours':>6}"
    print(head)
    print("-" * len(head))
    for group, row in table.items():
        print(f"{group:<24} {row['scenes']:>6} {row['centre']:>7.2f} {row['libvips attention']:>18.2f} {row['ours']:>6.2f}")
    print(f"\nCPU ms per scene (median): centre {cpu['centre']:.2f}, libvips attention {cpu['libvips attention']:.1f}, "
          f"ours {cpu['ours']:.1f}")
    per_scene = cpu["ours"]
    print(f"a {width}x{height} photo-like JPEG (benchmarks/worker_cpu.py's): make_images {job:.0f} ms of CPU; "
          f"focus.find on its largest rendition ({working[0]}x{working[1]}) {found:.1f} ms, on a scene (median, "
          f"faces or saliency) {per_scene:.1f} ms")
    worst = max(found, per_scene)
    print(f"the focus, at most {worst:.1f} ms: {worst / job:.1%} of make_images (the decode child's work, measured "
          f"beside it; an upper bound of its share), {worst / WORKER_CPU_MS:.1%} of a 12 MP job's {WORKER_CPU_MS} ms "
          "of worker CPU (benchmarks/worker_cpu.py)")
    print(f"cold start, once per decode child: importing the focus (numpy with it) {imported:.0f} ms of CPU, "
          f"reading the model {read:.0f} ms")
    numpy_zip, numpy_raw = sizes["numpy"]
    own_zip, own_raw = sizes["model and module"]
    print(f"package: numpy adds {numpy_zip / 1e6:.1f} MB zipped, {numpy_raw / 1e6:.1f} MB unzipped (infra.prune's rules, "
          f"with .pyc); the model and module {own_zip / 1e3:.0f} KB zipped, {own_raw / 1e3:.0f} KB unzipped")
    after = (PACKAGE_MB[0] + (numpy_zip + own_zip) / 1e6, PACKAGE_MB[1] + (numpy_raw + own_raw) / 1e6)
    print(f"the package: {PACKAGE_MB[0]:.1f} MB zipped / {PACKAGE_MB[1]} MB unzipped before, about {after[0]:.1f} MB / "
          f"{after[1]:.0f} MB after (Lambda's limits: 50 MB zipped for a direct upload, 250 MiB unzipped)")
    for line in misses:
        print("ours misses: " + line)
    missed = []
    if table["all"]["ours"] < 0.95:
        missed.append(f"ours keeps {table['all']['ours']:.2f} overall (< 0.95)")
    if table.get("person beside object", {}).get("ours", 1) < 0.9:
        missed.append(f"ours keeps {table['person beside object']['ours']:.2f} of person beside object (< 0.9)")
    for group, row in table.items():
        if row["ours"] < row["libvips attention"]:
            missed.append(f"ours below libvips on {group}")
    if worst / WORKER_CPU_MS > 0.10:
        missed.append(f"the focus costs {worst / WORKER_CPU_MS:.1%} of a job's worker CPU (> 10 %)")
    print()
    for line in missed:
        print("TARGET MISSED: " + line)
    if not missed:
        print("targets met: >= 0.95 overall, >= 0.9 person beside object, never below libvips, <= 10 % of a job's CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
