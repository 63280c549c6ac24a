"""CPU per job of each process of the local stack, against the resize alone on the same images.

    python benchmarks/worker_cpu.py [--jobs 20] [--runs 3] [--size 4000x3000] [--images 4]
                                    [--format-jobs 8] [--root DIR ...]

For each checkout (`--root`, repeatable; default this one):

1. resize alone: a child process runs that checkout's render.make_renditions on the test
   images (12 MP photo-like JPEGs; --size WxH for another size), reading its own CPU time
   (time.process_time) around each call; beside it, in turn, libvips making every rendition
   of the table (chalicelib/domain/renditions.py) from one decode with its own API
   (thumbnail_buffer, then thumbnail_image for each other size), coded the same way
   (quality, baseline or progressive, no metadata) as the checkout's own; and
   make_renditions with libvips' reducer in place of Pillow's resize (what that would save).
   With --format-jobs (not 0), also make_images with formats=webp,avif against libvips coding
   the same variants at the qualities the checkout's search chose.
   It counts their page faults; and a child of libvips' yardstick alone runs with the decoding
   child's malloc settings (TUNED_MALLOC: what libvips would gain from them too).
2. the stack: that checkout's `python -m local` with the API and one worker thread
   (WORKER_CONCURRENCY=1, no sweeper), its runner started through this script so that
   botocore's BaseClient._make_api_call (PynamoDB goes through it too) and
   render.make_renditions note each call with the calling thread's CPU time
   (time.thread_time). The first job of the new worker process is timed on its own (upload
   to its job_ready line, and the worker's CPU for it, its decode child's start included),
   then warm-up jobs until every decode child has started, then warm jobs one at a time
   (the first job's yardstick), then --jobs uploads go through the API on one kept-alive
   connection and the benchmark waits for as many `job_ready` lines.
   Process CPU is user + system time of every thread of each process and of its decode
   children, reaped or alive (the worker decodes in a child: its CPU counts as the worker's), read from
   /proc/<pid>/stat before and after the batch and divided by the jobs: the runner (which is
   the worker), `chalice local` (the API) and moto's server (the emulator); and the minor page
   faults of the worker process and of its decode child, whose kernel time is in that CPU.
   The headline is worker CPU per job over libvips' for the same renditions (libvips'
   figure the mean of step 1 run before the batch and again after it); the second
   line, over the CPU make_renditions took inside the worker for those very jobs. The same
   batch gives the worker's calls per job; then moto's CPU per consistent GetItem (the call
   worth cutting) is measured by repeating it.
3. the worker function as Lambda bills it: the thread CPU of the handler (app.py's
   handle_object_created, noted like the calls) plus its decode child's CPU, without the
   runner's receive, delete and idle polling (on AWS the event source mapping does those,
   outside the function). Beside it, the floor of the design: the resize plus the botocore
   CPU of the calls a job makes inside the function, with nothing else.

Targets (issue 48): worker CPU per job <= 1.2x libvips making the same renditions; the first
job's upload to ready <= 1.5x a warm job's. It is a report: the exit status is 0 even when a
target is missed.
"""
from __future__ import annotations

import argparse
import collections
import functools
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import stack

SCRIPT = Path(__file__).resolve()
SEEDS = (21, 22, 23, 24)
# Jobs before the measured batch (the first one timed on its own): with one worker thread
# every decode child has started by then.
WARM_UP = 4
# Warm jobs timed one at a time, upload to ready: the first job's yardstick.
LATENCY_JOBS = 5
# The decoding child's malloc settings (chalicelib/imaging/sandbox.py's _MALLOC, copied: a
# checkout of before them is measured against the same yardsticks). By default glibc maps a
# few MiB afresh for every image and faults each page in again.
TUNED_MALLOC = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
                "MALLOC_TRIM_THRESHOLD_": str(64 << 20)}


# -------------------------------------------------------------- children


def resize_child(root: str, images: list[str], runs: str) -> None:
    """CPU ms per image: the checkout's make_renditions; libvips making the same renditions
    from one decode; with formats=webp,avif, the checkout's make_images and libvips making
    the same renditions and coding the same variants at the qualities the checkout chose; and,
    for a checkout whose resize is Pillow's, make_renditions with libvips' reducer in place of
    Pillow's resize (what that would save)."""
    os.environ.setdefault("VIPS_CONCURRENCY", "1")
    stack.enter_root(root)
    import pyvips
    from PIL import Image

    from chalicelib.config import Settings
    from chalicelib.domain.renditions import RenditionFormat, rendition_specs
    from chalicelib.imaging import render

    pyvips.cache_set_max(0)
    s = Settings()
    specs = rendition_specs(s)
    coding = render.Coding.of(s)
    formats = (RenditionFormat.WEBP, RenditionFormat.AVIF)
    probe = render.encode(Image.new("RGB", (64, 64)), RenditionFormat.JPEG, coding)
    progressive = b"\xff\xc2" in probe  # SOF2: a progressive frame
    datas = [Path(p).read_bytes() for p in images]
    if os.environ.get("WORKER_CPU_YARDSTICK_ONLY"):  # libvips alone, in a process set up otherwise
        print(json.dumps(timed({"vips": lambda i: vips_renditions(datas[i], specs, coding, progressive)},
                               len(datas), int(runs))))
        return
    # Only when the stack is asked for them too (--format-jobs): their quality search is most
    # of this child's time, and a JPEG-only run reports no variants.
    with_formats = os.environ.get("WORKER_CPU_FORMATS") == "1"
    # The variants' qualities the checkout's search chose, per image: (format, quality or
    # None) in the order it searched (each rendition, each format).
    chosen: list = []
    searched = render.as_good_as

    def noted(im, fmt, *args, **kwargs):
        choice = searched(im, fmt, *args, **kwargs)
        chosen.append((fmt, None if choice is None else choice.quality))
        return choice

    render.as_good_as = noted
    qualities = {}
    for i, data in enumerate(datas if with_formats else ()):
        chosen.clear()
        render.make_images(data, s.max_pixels, specs, coding, formats=formats)
        qualities[i] = list(chosen)

    def ours(i):
        render.make_renditions(datas[i], s.max_pixels, specs, s.jpeg_quality)

    def vips(i):
        vips_renditions(datas[i], specs, coding, progressive)

    def ours_formats(i):
        render.make_images(datas[i], s.max_pixels, specs, coding, formats=formats)

    def vips_formats(i):
        vips_renditions(datas[i], specs, coding, progressive, qualities[i])

    runners = {"ours": ours, "vips": vips}
    if with_formats:
        runners.update(ours_formats=ours_formats, vips_formats=vips_formats)
    pillows = getattr(render, "_resized", None)
    if not hasattr(render, "LIBVIPS_READS"):  # a checkout whose resamples all go through Pillow's _resized

        def ours_vips_reducer(i):
            render._resized = vips_resized
            try:
                ours(i)
            finally:
                render._resized = pillows

        runners["ours_vips_reducer"] = ours_vips_reducer
    result = {"progressive": progressive, "renditions": len(specs)}
    if with_formats:
        result.update(variants=sum(q is not None for qs in qualities.values() for _, q in qs) / len(datas),
                      qualities={f.value: [q for qs in qualities.values() for g, q in qs if g is f] for f in formats})
    result.update(timed(runners, len(datas), int(runs)))
    print(json.dumps(result))


def timed(runners: dict, images: int, runs: int) -> dict:
    """Each runner's median CPU ms an image over `runs` passes, side by side (the machine's
    load weighs on each alike), after a warm-up pass (codecs, caches, the heap grown); and
    under "faults", the minor page faults an image of each."""
    import resource

    for run in runners.values():
        for i in range(images):
            run(i)
    cpu = {name: [] for name in runners}
    faults = {name: 0 for name in runners}
    for _ in range(runs):
        for name, run in runners.items():
            for i in range(images):
                faulted = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                start = time.process_time()
                run(i)
                cpu[name].append((time.process_time() - start) * 1000)
                faults[name] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faulted
    return {**{name: stack.median(values) for name, values in cpu.items()},
            "faults": {name: n / (runs * images) for name, n in faults.items()}}


def vips_renditions(data: bytes, specs, coding, progressive: bool, qualities=()) -> list[bytes]:
    """Every rendition of the table from one decode, as libvips' own API makes them: the
    largest by thumbnail_buffer (shrink-on-load), each other cut from it by thumbnail_image
    (a cover centre-cropped), each coded as the checkout codes its JPEGs (4:2:0), with no
    metadata; then each variant in `qualities` ((format, quality or None), each rendition's
    formats in turn) coded by libvips at that quality (WebP effort 4, libwebp's default and
    our method; AVIF at the effort of our speed). libvips evaluates lazily: without
    copy_memory() each rendition would decode again."""
    import pyvips

    from chalicelib.domain.renditions import Fit

    box = max(spec.box for spec in specs)
    largest = pyvips.Image.thumbnail_buffer(data, box, size="down").copy_memory()
    coded, qualities = [], list(qualities)
    per_rendition = len(qualities) // len(specs)
    none = pyvips.enums.ForeignKeep.NONE
    for n, spec in enumerate(specs):
        if spec.fit is Fit.COVER:
            image = largest.thumbnail_image(spec.box, height=spec.box, crop="centre")
        else:
            image = largest if spec.box == box else largest.thumbnail_image(spec.box, size="down")
        coded.append(image.write_to_buffer(".jpg", Q=coding.jpeg_quality, keep=none, subsample_mode="on",
                                           optimize_coding=progressive, interlace=progressive))
        for fmt, quality in qualities[n * per_rendition:(n + 1) * per_rendition]:
            if quality is None:
                continue
            if fmt.value == "webp":
                coded.append(image.webpsave_buffer(Q=quality, effort=4, keep=none))
            else:
                coded.append(image.heifsave_buffer(Q=quality, compression="av1", subsample_mode="on",
                                                   effort=max(0, 9 - coding.avif_speed), keep=none))
    return coded


def vips_resized(im, size, box=None):
    """render._resized with libvips' cubic reducer (the same Catmull-Rom kernel as Pillow's
    BICUBIC, widened with the shrink as Pillow's is) for RGB and L downscales: what the worker
    would spend with it (pyvips-binary needs glibc 2.28, which the python3.11 Lambda runtime
    lacks, so the worker keeps Pillow's)."""
    import math

    import pyvips
    from PIL import Image

    box = box or (0, 0, im.width, im.height)
    bands = {"RGB": 3, "L": 1}.get(im.mode)
    if bands is None or box[2] - box[0] < size[0] or box[3] - box[1] < size[1]:
        return im.resize(size, Image.Resampling.BICUBIC, box=box, reducing_gap=2.0)
    left, top = math.floor(box[0] + 0.5), math.floor(box[1] + 0.5)
    right = min(im.width, max(left + size[0], math.floor(box[2] + 0.5)))
    bottom = min(im.height, max(top + size[1], math.floor(box[3] + 0.5)))
    source = pyvips.Image.new_from_memory(im.tobytes(), im.width, im.height, bands, "uchar")
    source = source.crop(left, top, right - left, bottom - top)
    out = source.reduce((right - left) / size[0], (bottom - top) / size[1], kernel="cubic")
    out = out.crop(0, 0, size[0], size[1])
    return Image.frombuffer(im.mode, size, out.write_to_memory(), "raw", im.mode, 0, 1)


class Notes:
    """Calls noted in a file, one JSON a line, each with the calling thread's CPU time."""

    def __init__(self, calls_path: str):
        import threading

        self.path = calls_path
        self.lock = threading.Lock()
        self.file = None

    def noting(self, service_of, op_of, call, clock=time.thread_time):
        """clock: the calling thread's CPU by default; the decoding child's calls take the
        process's (libvips works on threads of its own there, and the child does nothing else)."""
        import threading

        # wraps: the sandbox pickles the function by its name, and finds this one under it.
        @functools.wraps(call)
        def noted(*args, **kwargs):
            cpu, wall = clock(), time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                op = op_of(args)
                line = json.dumps({"thread": threading.current_thread().name, "op": op,
                                   "service": service_of(args),
                                   "cpu_ms": (clock() - cpu) * 1000,
                                   "wall_ms": (time.perf_counter() - wall) * 1000})
                with self.lock:
                    if self.file is None:
                        self.file = open(self.path, "a")
                    self.file.write(line + "\n")
                    # Written out once a job (the handler's note is its last; the decoding
                    # child notes once a call): a write a note was a third of a ms a job of
                    # the worker's CPU, which this benchmark would count as the worker's.
                    if op in ("handler", "make_renditions"):
                        self.file.flush()
        return noted


def note_renditions(notes: Notes) -> None:
    """make_images (what the worker calls in its decoding child: make_renditions' body), noted."""
    from chalicelib.imaging import render

    render.make_images = notes.noting(lambda a: "imaging", lambda a: "make_renditions", render.make_images,
                                      clock=time.process_time)


# The decoding child is a fresh interpreter (chalicelib/imaging/sandbox.py): this
# sitecustomize, on the path it is given, notes its make_images too.
SITECUSTOMIZE = """import os, sys
if "chalicelib.imaging.sandbox_child" in sys.orig_argv and os.environ.get("WORKER_CPU_CALLS"):
    import worker_cpu
    worker_cpu.note_renditions(worker_cpu.Notes(os.environ["WORKER_CPU_CALLS"]))
"""


def instrumented_runner(calls_path: str) -> None:
    """`python -m local`, noting in calls_path (one JSON a line) every botocore call and every
    make_renditions, each with the calling thread's CPU time around it."""
    import runpy

    import botocore.client

    site = Path(calls_path).with_suffix(".site")
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    sys.path[:0] = [str(site), str(SCRIPT.parent)]  # what the decoding child's path starts with
    os.environ["WORKER_CPU_CALLS"] = calls_path
    notes = Notes(calls_path)
    noting = notes.noting
    # PynamoDB calls botocore's clients through this method too.
    botocore.client.BaseClient._make_api_call = noting(
        lambda a: a[0].meta.service_model.service_name, lambda a: a[1],
        botocore.client.BaseClient._make_api_call)
    note_renditions(notes)
    # The handler as Lambda would run it, without the runner's receive and delete (on AWS
    # the event source mapping does those, outside the function).
    from local import sqs_worker

    start = sqs_worker.SqsWorker.__init__

    def init(self, sqs, queue_url, queue_arn, region, handler, *args, **kwargs):
        handler = noting(lambda a: "lambda", lambda a: "handler", handler)
        start(self, sqs, queue_url, queue_arn, region, handler, *args, **kwargs)

    sqs_worker.SqsWorker.__init__ = init
    sys.argv = ["local"]
    runpy.run_module("local", run_name="__main__")


_UPLOADS = itertools.count()


def upload_all(runner: stack.Runner, images: list[bytes], count: int, token: str, query: str = "") -> None:
    """Each upload in bytes of its own (the same pixels): duplicates are copied, not decoded."""
    import requests

    sys.path.insert(0, str(SCRIPT.parent.parent))
    from tests.images import unique

    session = requests.Session()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "image/jpeg"}
    for i in range(count):
        answer = session.post(f"{runner.api_url}/api/v1/images{query}", data=unique(images[i % len(images)], f"upload {next(_UPLOADS)}"),
                              headers=headers, timeout=60)
        if answer.status_code != 202:
            raise RuntimeError(f"upload answered {answer.status_code}: {answer.text}")


def one_job(runner: stack.Runner, image: bytes, token: str, count: int) -> float:
    """Wall ms from the upload's answer (202: stored and queued) to its job_ready line (the
    count-th), read every 5 ms: the worker's share, without the API's own first request."""
    upload_all(runner, [image], 1, token)
    started = time.perf_counter()
    wait_ready(runner, count, poll=0.005)
    return (time.perf_counter() - started) * 1000


def wait_ready(runner: stack.Runner, count: int, timeout: float = 600, poll: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while runner.log_path.read_text().count('"event": "job_ready"') < count:
        if time.monotonic() > deadline or runner.process.poll() is not None:
            raise RuntimeError(f"not {count} jobs ready; see {runner.log_path}")
        time.sleep(poll)


def mint(root: Path) -> str:
    import subprocess

    return subprocess.run([sys.executable, "-m", "local.token", "bench", "--ttl", "3600"], cwd=root,
                          env={**stack.AWS_ENV, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)},
                          capture_output=True, text=True, check=True).stdout.strip()


def measure_stack(root: Path, images: list[bytes], jobs: int, tmp: Path, format_jobs: int = 0) -> dict:
    """One batch through the instrumented runner: CPU per job of each process, and the
    worker's calls and resize CPU for the very same jobs."""
    calls_path = tmp / f"calls-{time.monotonic_ns()}.jsonl"
    runner = stack.Runner(root, "api,worker", {"WORKER_CONCURRENCY": "1", "AUTH_MODE": "jwt"})
    runner.command = [sys.executable, str(SCRIPT), "--instrumented-runner", str(calls_path)]
    with runner:
        token = mint(root)
        pids = {"worker": runner.process.pid, "API": runner.pid_of("chalice_local"),
                "emulator": runner.pid_of("moto_server")}
        # The first job of a new worker process (a cold Lambda container): its wall time from
        # upload to ready, and the worker's CPU for it (the decode child's start included).
        cpu0 = stack.cpu_seconds(pids["worker"], children=True)
        first = one_job(runner, images[0], token, 1)
        time.sleep(1.0)  # its queue delete
        first_cpu = (stack.cpu_seconds(pids["worker"], children=True) - cpu0) * 1000
        # Warm-up: imports, clients, codecs, and every decode child started.
        upload_all(runner, images, WARM_UP - 1, token)
        wait_ready(runner, WARM_UP)
        children = len(stack._decode_children(pids["worker"]))
        warm = [one_job(runner, images[(i + 1) % len(images)], token, WARM_UP + 1 + i) for i in range(LATENCY_JOBS)]
        done = WARM_UP + LATENCY_JOBS
        time.sleep(1.5)  # the warm-up's queue deletes
        idle0 = {name: stack.cpu_seconds(pid) for name, pid in pids.items()}
        time.sleep(3)
        idle = {name: (stack.cpu_seconds(pid) - idle0[name]) / 3 * 1000 for name, pid in pids.items()}
        skip = len(calls_path.read_text().splitlines())
        before = {name: stack.cpu_seconds(pid, children=True) for name, pid in pids.items()}
        own_before = stack.cpu_seconds(pids["worker"])
        faults_before = (stack.page_faults(pids["worker"]), stack.page_faults(pids["worker"], children=True))
        started = time.perf_counter()
        upload_all(runner, images, jobs, token)
        wait_ready(runner, done + jobs)
        time.sleep(1.0)  # the last job's queue delete
        seconds = time.perf_counter() - started
        per_job = {name: (stack.cpu_seconds(pid, children=True) - before[name]) * 1000 / jobs
                   for name, pid in pids.items()}
        # The decode child's CPU: the worker's with its children, less its own threads'.
        own = (stack.cpu_seconds(pids["worker"]) - own_before) * 1000 / jobs
        decode_child = per_job["worker"] - own
        own_faults = (stack.page_faults(pids["worker"]) - faults_before[0]) / jobs
        faults = {"worker process": own_faults,
                  "decode child": (stack.page_faults(pids["worker"], children=True) - faults_before[1]) / jobs
                  - own_faults}
        # Then uploads asking for WebP and AVIF too: the worker's CPU per job with the
        # variants' quality search.
        batch_lines = len(calls_path.read_text().splitlines())  # the JPEG batch's notes end here
        formats_per_job = None
        if format_jobs:
            before_formats = stack.cpu_seconds(pids["worker"], children=True)
            upload_all(runner, images, format_jobs, token, query="?formats=avif,webp")
            wait_ready(runner, done + jobs + format_jobs)
            time.sleep(1.0)  # the last job's queue delete
            formats_per_job = (stack.cpu_seconds(pids["worker"], children=True) - before_formats) * 1000 / format_jobs
        emulator = emulator_cost(runner)
    noted = [json.loads(line) for line in calls_path.read_text().splitlines()[skip:batch_lines]]
    resize = [c["cpu_ms"] for c in noted if c["op"] == "make_renditions"]
    # The job thread (local/sqs_worker.py's pool: "sqs-worker_0") does the job and deletes
    # its message; the poller thread ("sqs-worker") receives.
    handler = [c["cpu_ms"] for c in noted if c["op"] == "handler" and c["thread"].startswith("sqs-worker_")]
    job_calls = [c for c in noted if c["thread"].startswith("sqs-worker_") and c["service"] not in ("imaging", "lambda")]
    ops = collections.Counter(f"{c['service']}.{c['op']}" for c in job_calls)
    cpu = collections.defaultdict(list)
    for c in job_calls:
        cpu[f"{c['service']}.{c['op']}"].append(c["cpu_ms"])
    receives = [c for c in noted if c["thread"] == "sqs-worker" and c["op"] == "ReceiveMessage"]
    return {"per_job": per_job, "idle_ms_per_s": idle, "seconds": seconds, "own": own,
            "formats_per_job": formats_per_job, "format_jobs": format_jobs,
            "first_ms": first, "first_cpu_ms": first_cpu, "warm_ms": stack.median(warm),
            "decode_children": children, "page_faults": faults,
            "resize_in_worker": sum(resize) / len(resize), "resizes": len(resize),
            "function": sum(handler) / len(handler) + decode_child, "decode_child": decode_child,
            "handler_thread": sum(handler) / len(handler),
            "ops": {op: n / jobs for op, n in ops.items()},
            "client_cpu_ms": {op: stack.median(v) for op, v in cpu.items()},
            "receives_per_job": len(receives) / jobs,
            "receive_cpu_ms": stack.median([c["cpu_ms"] for c in receives]) if receives else 0.0,
            "emulator_cpu_ms": emulator}


def emulator_cost(runner: stack.Runner, repeat: int = 40) -> dict:
    """moto's CPU per call of a consistent GetItem on a job (what a 'still ours' check or a
    read before the claim costs the emulator)."""
    import botocore.session

    session = botocore.session.get_session()
    ddb = session.create_client("dynamodb", region_name="us-east-1", endpoint_url=runner.aws_url,
                                aws_access_key_id="test", aws_secret_access_key="test")
    table = ddb.list_tables()["TableNames"][0]
    pk = ddb.scan(TableName=table, Limit=1)["Items"][0]["pk"]
    moto = runner.pid_of("moto_server")
    before, mine = stack.cpu_seconds(moto), time.thread_time()
    for _ in range(repeat):
        ddb.get_item(TableName=table, Key={"pk": pk}, ConsistentRead=True)
    result = {"dynamodb.GetItem": (stack.cpu_seconds(moto) - before) * 1000 / repeat,
              "client botocore": (time.thread_time() - mine) * 1000 / repeat}
    # The same call without botocore's machinery: the request signed with botocore's SigV4
    # and sent with urllib3, the JSON parsed as it comes. What a hand-written hot path
    # could save a call (not something the service does: see the report).
    import urllib3
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    signer = SigV4Auth(Credentials("test", "test"), "dynamodb", "us-east-1")
    pool = urllib3.PoolManager()
    body = json.dumps({"TableName": table, "Key": {"pk": pk}, "ConsistentRead": True})
    headers = {"X-Amz-Target": "DynamoDB_20120810.GetItem", "Content-Type": "application/x-amz-json-1.0"}
    mine = time.thread_time()
    for _ in range(repeat):
        request = AWSRequest("POST", runner.aws_url + "/", data=body, headers=dict(headers))
        signer.add_auth(request)
        answer = pool.request("POST", runner.aws_url + "/", body=body, headers=dict(request.headers.items()))
        assert "Item" in json.loads(answer.data)
    result["client signed urllib3"] = (time.thread_time() - mine) * 1000 / repeat
    return result


def make_images(tmp: Path, width: int = 4000, height: int = 3000, count: int = len(SEEDS)) -> list[Path]:
    sys.path.insert(0, str(SCRIPT.parent))
    from load import photo_like

    paths = []
    for seed in SEEDS[:count]:
        path = tmp / f"photo-{seed}.jpg"
        path.write_bytes(photo_like(width, height, seed=seed, quality=90))
        paths.append(path)
    return paths


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        root, runs, *images = sys.argv[2:]
        resize_child(root, images, runs)
        return 0
    if len(sys.argv) > 2 and sys.argv[1] == "--instrumented-runner":
        instrumented_runner(sys.argv[2])
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20, help="jobs in the measured batch")
    parser.add_argument("--runs", type=int, default=3, help="resize-only passes over the images")
    parser.add_argument("--format-jobs", type=int, default=8,
                        help="jobs asking for formats=avif,webp after the JPEG batch (0: none)")
    parser.add_argument("--images", type=int, default=len(SEEDS), choices=range(1, len(SEEDS) + 1),
                        help=f"how many photo-like JPEGs, each of its own pixels (default {len(SEEDS)})")
    parser.add_argument("--size", default="4000x3000",
                        help="WxH of the photo-like test JPEGs (default 4000x3000: 12 MP)")
    parser.add_argument("--root", action="append", type=Path,
                        help="a checkout to measure (repeat to compare); default: this one")
    args = parser.parse_args()
    roots = [r.resolve() for r in (args.root or [stack.THIS_ROOT])]
    results = []
    with tempfile.TemporaryDirectory(prefix="worker-cpu-") as tmp:
        width, height = (int(side) for side in args.size.split("x"))
        paths = make_images(Path(tmp), width, height, args.images)
        child_env = {"VIPS_CONCURRENCY": "1", "WORKER_CPU_FORMATS": "1" if args.format_jobs else "0"}
        images = [p.read_bytes() for p in paths]
        for root in roots:
            load = stack.load_average()
            resize = stack.run_child(SCRIPT, root, [str(args.runs), *map(str, paths)], child_env)
            batch = measure_stack(root, images, args.jobs, Path(tmp), args.format_jobs)
            # The yardstick again after the batch, and the headline against the mean of the two:
            # a machine whose load drifts during the batch moves both sides alike.
            after = stack.run_child(SCRIPT, root, [str(args.runs), *map(str, paths)], child_env)
            for key in [key for key in ("vips", "vips_formats") if key in resize]:
                resize[f"{key}_runs"] = (resize[key], after[key])
                resize[key] = (resize[key] + after[key]) / 2
            # And libvips alone in a child with the decoding child's malloc settings: what
            # libvips itself would gain from them (the headline keeps the plain process's,
            # the yardstick issue 48 set).
            tuned = stack.run_child(SCRIPT, root, [str(args.runs), *map(str, paths)],
                                    {"VIPS_CONCURRENCY": "1", "WORKER_CPU_YARDSTICK_ONLY": "1", **TUNED_MALLOC})
            resize["vips_tuned"], resize["faults"]["vips_tuned"] = tuned["vips"], tuned["faults"]["vips"]
            results.append((root, resize, batch, f"{load} -> {stack.load_average()}"))
    sizes = ", ".join(f"{len(i) / 1e6:.2f}" for i in images)
    print(f"images: {len(images)} photo-like {width * height / 1e6:.2g} MP JPEGs ({sizes} MB); "
          f"{args.jobs} jobs a batch, 1 worker thread; CPU = utime + stime of every thread, from /proc/<pid>/stat")
    missed = []
    for root, resize, batch, load in results:
        missed += report(f"{root} @ {stack.label_of(root)}", resize, batch, load)
    print()
    for line in missed:
        print("TARGET MISSED: " + line)
    if not missed:
        print("targets met: worker CPU per job <= 1.2x libvips'; first job <= 1.5x a warm one")
    return 0


def report(label: str, resize: dict, batch: dict, load: str) -> list[str]:
    print(f"\n## {label}   (load average {load})")
    coding = "progressive" if resize["progressive"] else "baseline"
    in_worker = batch["resize_in_worker"]
    worker, vips = batch["per_job"]["worker"], resize["vips"]
    print(f"steady state, {batch['decode_children']} decode child(ren) started; CPU ms per job:")
    head = f"{'decode child':>13} {'worker process':>15} {'worker total':>13} {'libvips':>8} {'first job':>10}"
    print(head)
    print(f"{batch['decode_child']:>13.1f} {batch['own']:>15.1f} {worker:>13.1f} {vips:>8.1f} "
          f"{batch['first_cpu_ms']:>10.1f}")
    print(f"HEADLINE worker CPU per job / libvips making the same {resize['renditions']} renditions from one decode "
          f"(JPEG only, coded {coding} like ours): {worker / vips:.2f}x")
    print(f"worker CPU per job / our own resize in the worker ({in_worker:.1f} ms, the child's CPU around "
          f"make_renditions, {batch['resizes']} calls): {worker / in_worker:.2f}x")
    if batch.get("formats_per_job"):
        per_job, libvips = batch["formats_per_job"], resize["vips_formats"]
        qualities = "; ".join(f"{f} {sorted(q for q in qs if q is not None)} ({sum(q is None for q in qs)} none)"
                              for f, qs in resize["qualities"].items())
        print(f"with formats=avif,webp: worker CPU per job {per_job:.1f} ms ({batch['format_jobs']} jobs) / libvips "
              f"making the same renditions and coding the same variants at the qualities chosen "
              f"({resize['variants']:.1f} variants an image; {qualities}) {libvips:.1f} ms: {per_job / libvips:.2f}x "
              f"(resize alone: make_images {resize['ours_formats']:.1f} ms, {resize['ours_formats'] / libvips:.2f}x)")
    print(f"first job of a new worker process: upload to ready {batch['first_ms']:.0f} ms, a warm job's "
          f"{batch['warm_ms']:.0f} ms (median of {LATENCY_JOBS}): {batch['first_ms'] / batch['warm_ms']:.2f}x; "
          f"its worker CPU {batch['first_cpu_ms']:.0f} ms")
    line = (f"resize alone in a child: make_renditions {resize['ours']:.1f} ms, libvips {vips:.1f} ms "
            f"(before and after the batch: {resize['vips_runs'][0]:.1f}, {resize['vips_runs'][1]:.1f})")
    if "ours_vips_reducer" in resize:
        line += f", make_renditions with libvips' reducer for Pillow's resize {resize['ours_vips_reducer']:.1f} ms"
    print(line)
    faults = batch["page_faults"]
    print(f"page faults per job (each the kernel's time, in the system CPU above): worker process "
          f"{faults['worker process']:.0f}, decode child {faults['decode child']:.0f}; libvips' yardstick "
          f"{resize['faults']['vips']:.0f} an image")
    tuned = resize["vips_tuned"]
    print(f"libvips' yardstick with the decoding child's malloc settings: {tuned:.1f} ms "
          f"({resize['faults']['vips_tuned']:.0f} page faults an image); the worker against it: {worker / tuned:.2f}x\n")
    head = f"{'process':<9} {'CPU ms/job':>11} {'x resize':>9} {'idle ms/s':>10}"
    print(head)
    print("-" * len(head))
    for name in ("worker", "API", "emulator"):
        per_job = batch["per_job"][name]
        print(f"{name:<9} {per_job:>11.1f} {per_job / in_worker:>8.2f}x {batch['idle_ms_per_s'][name]:>10.1f}")
    total = sum(batch["per_job"].values())
    print(f"{'all three':<9} {total:>11.1f} {total / in_worker:>8.2f}x   "
          f"(batch took {batch['seconds']:.1f} s wall; x resize: against the resize in the worker)")
    print(f"\nworker calls per job (job thread; the poller also received {batch['receives_per_job']:.2f} "
          f"times a job, {batch['receive_cpu_ms']:.1f} ms of CPU each):")
    for op, n in sorted(batch["ops"].items(), key=lambda kv: -kv[1]):
        print(f"  {n:4.2f} x {op:<28} worker CPU {batch['client_cpu_ms'][op]:5.1f} ms a call")
    total_calls = sum(batch["ops"].values())
    get_cost = batch["client_cpu_ms"].get("dynamodb.GetItem", 0.0)
    emu_get = batch["emulator_cpu_ms"]["dynamodb.GetItem"]
    print(f"  {total_calls:4.2f} calls a job; one consistent GetItem costs the worker {get_cost:.1f} ms "
          f"and the emulator {emu_get:.1f} ms of CPU")
    # The floor of this design: the calls a job needs inside the function, at what each
    # costs botocore here, with nothing else around the resize.
    needed = {op: n for op, n in batch["ops"].items() if op != "sqs.DeleteMessage"}
    floor = sum(n * batch["client_cpu_ms"][op] for op, n in needed.items())
    function = batch["function"]
    print(f"\nthe worker function, counted as Lambda bills it (the handler's thread "
          f"{batch['handler_thread']:.1f} ms + its decode child {batch['decode_child']:.1f} ms; "
          "without the runner's receive, delete and idle polling, which the event source "
          f"mapping does on AWS): {function:.1f} ms a job, {function / in_worker:.2f}x the resize")
    print(f"its calls alone ({sum(needed.values()):.0f} a job, {floor:.1f} ms of botocore CPU) "
          f"put any job at >= {(in_worker + floor) / in_worker:.2f}x the resize")
    emulator = batch["emulator_cpu_ms"]
    raw, boto = emulator["client signed urllib3"], emulator["client botocore"]
    lean = floor * raw / boto
    other = function - in_worker - floor
    print(f"the rest of the function (its own code, logs, metrics, the decode child's pipe): {other:.1f} ms a job")
    print(f"one GetItem costs this client {boto:.2f} ms through botocore, {raw:.2f} ms signed by hand "
          f"and sent with urllib3: with calls that lean and the rest as it is, "
          f"{(function - floor + lean) / in_worker:.2f}x")
    missed = []
    if worker / vips > 1.2:
        missed.append(f"{label}: worker CPU per job {worker / vips:.2f}x libvips' (> 1.2x)")
    if batch["first_ms"] / batch["warm_ms"] > 1.5:
        missed.append(f"{label}: first job {batch['first_ms'] / batch['warm_ms']:.2f}x a warm one (> 1.5x)")
    return missed

if __name__ == "__main__":
    sys.exit(main())
