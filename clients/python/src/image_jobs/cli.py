"""`image-jobs`: upload images and follow their jobs from a shell or a script.

Exit codes: 0 every job ended ready (without --wait: every upload or request was accepted);
1 a job failed or was cancelled, or a request was refused; 2 bad usage; 3 some job was still
unfinished at --deadline (and nothing failed); 130 interrupted.

An upload cut short (Ctrl-C, a lost connection) is kept in the user's cache directory
(upload_state.py says what and where): running `image-jobs upload` again on the same,
unchanged file resumes it, sending only the parts storage does not hold yet.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn, TransferSpeedColumn

from ._version import __version__
from .client import DEFAULT_URL, Client
from .errors import ApiError, ImageJobsError, UploadStopped, WaitCancelled, WaitTimeout
from .job import Job, Status
from . import upload_state

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNFINISHED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


@dataclass
class Outcome:
    """What became of one file or job reference."""

    name: str
    job: Optional[Job] = None
    error: Optional[Exception] = None
    unfinished: bool = False  # the deadline came, or the user interrupted (job None: never sent)
    state: Optional[Path] = None  # where an upload cut short is kept, to resume
    saved: Dict[str, Path] = field(default_factory=dict)
    deleted: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and not self.unfinished


def main(argv: Optional[List[str]] = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    args.url = getattr(args, "url", None) or os.environ.get("IMAGE_JOBS_URL") or DEFAULT_URL
    args.token = getattr(args, "token", None) or os.environ.get("IMAGE_JOBS_TOKEN")
    args.json = getattr(args, "json", False)
    if not args.token:
        parser.error("no token: set IMAGE_JOBS_TOKEN or pass --token")
    if getattr(args, "out", None) or getattr(args, "deadline", None) is not None:
        args.wait = True  # downloading or a deadline only make sense while waiting
    with Client(args.url, args.token, waits=not getattr(args, "no_waits", False),
                resume_dir=upload_state.directory()) as client:
        try:
            return args.command(client, args)
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: the options work before or after the sub-command without one hiding the other.
    common.add_argument("--url", default=argparse.SUPPRESS,
                        help=f"API root (env IMAGE_JOBS_URL, default {DEFAULT_URL})")
    common.add_argument("--token", default=argparse.SUPPRESS, help="bearer token (env IMAGE_JOBS_TOKEN)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print each job as GET shows it, one JSON object per line")
    waiting = argparse.ArgumentParser(add_help=False)
    waiting.add_argument("--wait", action="store_true", help="poll until every job is finished")
    waiting.add_argument("--out", metavar="DIR", help="download the renditions here (implies --wait)")
    waiting.add_argument("--deadline", metavar="S", type=float,
                         help="stop waiting after S seconds (implies --wait; exit 3 if unfinished)")
    waiting.add_argument("--no-waits", action="store_true",
                         help="poll on the contract's schedule only, never asking the server to hold "
                              "a request (Prefer: wait): for proxies that cut idle connections")
    waiting.add_argument("--no-push", action="store_true",
                         help="follow jobs by polling only, not over the push WebSocket (one "
                              "socket for every job, falling back to polling where there is none)")

    parser = argparse.ArgumentParser(prog="image-jobs", parents=[common], description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(required=True, metavar="COMMAND")
    up = sub.add_parser("upload", parents=[common, waiting], help="upload image files")
    up.add_argument("files", nargs="+", metavar="FILE")
    up.add_argument("--parallel", type=int, default=4, metavar="N", help="files in flight at once (4)")
    up.add_argument("--formats", default="", metavar="LIST",
                    help="extra formats of every rendition besides JPEG, e.g. avif,webp; "
                         "--out then saves the first of them where made")
    up.add_argument("--metadata", action="append", default=[], metavar="KEY=VALUE",
                    help="the app's own strings, kept with each job (repeat for more)")
    up.add_argument("--focus", type=_focus_arg, metavar="X,Y",
                    help="where the subject is, fractions 0..1 of the upright image from its top "
                         "left (e.g. 0.31,0.22): the square renditions are placed around it")
    up.set_defaults(command=_upload)
    ls = sub.add_parser("list", parents=[common], help="list jobs, newest first")
    ls.add_argument("--status", action="append", default=[], metavar="STATUS",
                    help="only jobs in this status (repeat for more)")
    ls.add_argument("--owner", metavar="SUB", help="that owner's jobs (a service token: scope image-jobs/service)")
    ls.add_argument("--limit", type=int, metavar="N", help="at most N jobs")
    ls.set_defaults(command=_list)
    st = sub.add_parser("status", parents=[common, waiting], help="show jobs (or wait for them)")
    st.add_argument("jobs", nargs="+", metavar="JOB", help="job id, Location path or URL")
    st.set_defaults(command=_status, parallel=4)
    ca = sub.add_parser("cancel", parents=[common], help="cancel jobs")
    ca.add_argument("jobs", nargs="+", metavar="JOB", help="job id, Location path or URL")
    ca.set_defaults(command=_cancel)
    de = sub.add_parser("delete", parents=[common], help="delete jobs, their original and renditions")
    de.add_argument("jobs", nargs="+", metavar="JOB", help="job id, Location path or URL")
    de.set_defaults(command=_delete)
    return parser


def _focus_arg(text: str) -> Tuple[float, float]:
    """--focus X,Y as two numbers (the server judges their range)."""
    try:
        x, y = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("X,Y: two numbers, e.g. 0.31,0.22") from None
    return x, y


def _metadata(args: argparse.Namespace) -> Dict[str, str]:
    pairs = [item.partition("=") for item in getattr(args, "metadata", [])]
    return {key: value for key, _, value in pairs}


def _list(client: Client, args: argparse.Namespace) -> int:
    if client.service and args.owner is None:
        print("image-jobs: a service token lists one owner's jobs: add --owner SUB", file=sys.stderr)
        return EXIT_USAGE
    printer = _Printer(args.json)
    for count, job in enumerate(client.jobs(status=args.status or None, owner=args.owner), start=1):
        printer.show(Outcome(job.job_id, job=job))
        if args.limit is not None and count >= args.limit:
            break
    return EXIT_OK


def _formats(args: argparse.Namespace) -> List[str]:
    return [f.strip() for f in getattr(args, "formats", "").split(",") if f.strip()]


# -- commands ------------------------------------------------------------------------------------
def _upload(client: Client, args: argparse.Namespace) -> int:
    for name in args.files:
        if not Path(name).is_file():
            print(f"image-jobs: no such file: {name}", file=sys.stderr)
            return EXIT_USAGE
    stems = [Path(f).stem for f in args.files]

    def start(index: int, progress: "_Progress", task: TaskID, stop: threading.Event) -> Job:
        path = Path(args.files[index])
        progress.update(task, total=path.stat().st_size, state="uploading")
        bars = _PartBars(progress, path.name)

        def sent(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        # The client keeps the upload's record (upload_state.py) and resumes a saved one. Not
        # held: Ctrl-C must end a wait at once, and a held POST could not be interrupted;
        # Job.wait's first held poll goes at once instead.
        job = client.upload(path, on_progress=sent, on_part_progress=bars.update, formats=_formats(args),
                            stop=stop, metadata=_metadata(args) or None, keep_stopped=True,
                            focus=getattr(args, "focus", None))
        return job if args.wait else job.refresh()  # printed as GET shows it, like every job

    names = [str(f) for f in args.files]
    # The same stem twice (a/x.jpg, b/x.png) would overwrite: those get the job id too.
    unique = [stem if stems.count(stem) == 1 else None for stem in stems]
    return _run(args, names, start, unique)


def _status(client: Client, args: argparse.Namespace) -> int:
    def start(index: int, progress: "_Progress", task: TaskID, stop: threading.Event) -> Job:
        job = client.job(args.jobs[index])
        return job if args.wait else job.refresh()

    return _run(args, list(args.jobs), start, [None] * len(args.jobs))


def _cancel(client: Client, args: argparse.Namespace) -> int:
    return _each(args, lambda ref: Outcome(ref, job=client.job(ref).cancel()))


def _delete(client: Client, args: argparse.Namespace) -> int:
    def delete(ref: str) -> Outcome:
        job = client.job(ref)
        job.delete()
        return Outcome(ref, job=job, deleted=True)

    return _each(args, delete)


def _each(args: argparse.Namespace, act: Callable[[str], Outcome]) -> int:
    printer = _Printer(args.json)
    code = EXIT_OK
    for ref in args.jobs:
        try:
            outcome = act(ref)
        except ImageJobsError as exc:
            outcome = Outcome(ref, error=exc)
        printer.show(outcome)
        code = max(code, _exit_code([outcome]))
    return code


# -- running many files or jobs at once ----------------------------------------------------------
def _run(args: argparse.Namespace, names: List[str],
         start: Callable[[int, "_Progress", TaskID, threading.Event], Job],
         stems: List[Optional[str]]) -> int:
    end = None if args.deadline is None else time.monotonic() + args.deadline
    stop = threading.Event()
    printer = _Printer(args.json)
    with _Progress() as progress:
        printer.defer = progress.enabled and sys.stdout.isatty()  # one terminal: print after the bars

        def one(index: int) -> Outcome:
            task = progress.add_task("", name=Path(names[index]).name, state="", total=None)
            outcome = Outcome(names[index])
            try:
                outcome.job = job = start(index, progress, task, stop)
                progress.update(task, state=job.status or "")
                if args.wait:
                    remaining = None if end is None else max(0.0, end - time.monotonic())
                    job.wait(remaining, on_status=lambda j: progress.update(task, state=j.status), stop=stop,
                             push=not args.no_push)
                    if job.ready and args.out:
                        progress.update(task, state="downloading")
                        outcome.saved = job.download(args.out, stems[index], format=(_formats(args) or [None])[0])
                    progress.update(task, state=job.status)
            except (WaitTimeout, WaitCancelled):
                outcome.unfinished = True
                progress.update(task, state=f"{outcome.job.status} (unfinished)" if outcome.job else "")
            except UploadStopped as exc:
                outcome.job, outcome.unfinished = getattr(exc, "job", None), True
                outcome.state = getattr(exc, "state", None)
                progress.update(task, state="stopped")
            except (ImageJobsError, OSError) as exc:  # OSError: a file unreadable half-way
                outcome.error = exc
                outcome.state = getattr(exc, "state", None)
                progress.update(task, state=_code_of(exc))
            return outcome

        pool = ThreadPoolExecutor(max(1, min(args.parallel, len(names))))
        futures: List[Future] = [pool.submit(one, i) for i in range(len(names))]
        outcomes: List[Outcome] = []
        interrupted = False
        try:
            for future in futures:  # in input order, each as soon as it and those before are done
                _until_done([future])
                outcomes.append(future.result())
                printer.show(outcomes[-1])
        except KeyboardInterrupt:
            interrupted = True
            # Waits end at once; uploads stop once the parts in flight are stored (kept, to be
            # resumed). A second Ctrl-C stops at once: what was saved resumes just as well.
            try:
                stop.set()
                print("image-jobs: stopping once the parts in flight are stored; Ctrl-C again to "
                      "stop at once", file=sys.stderr, flush=True)
                pool.shutdown(wait=False, cancel_futures=True)
                _until_done(futures)
            except KeyboardInterrupt:
                printer.flush()
                os._exit(EXIT_INTERRUPTED)  # the pool's threads would be joined at exit
            for index in range(len(outcomes), len(futures)):
                future = futures[index]
                done = future.done() and not future.cancelled()
                outcomes.append(future.result() if done else Outcome(names[index], unfinished=True))
                printer.show(outcomes[-1])
        pool.shutdown()
    printer.flush()
    return EXIT_INTERRUPTED if interrupted else _exit_code(outcomes, needs_ready=args.wait)


def _until_done(futures: List[Future]) -> None:
    """Wait for the futures in short waits: the kernel may hand Ctrl-C's SIGINT to any thread,
    and Python runs its handler in the main thread only when that thread next runs, which a
    wait without a timeout (a join, a result) never does until the upload ends (a CI run waited
    out its 30 s on the second Ctrl-C)."""
    while wait(futures, timeout=0.2).not_done:
        pass


def _exit_code(outcomes: List[Outcome], needs_ready: bool = False) -> int:
    if any(o.error is not None for o in outcomes):
        return EXIT_FAILED
    if needs_ready and any(o.job is not None and o.job.finished and not o.job.ready for o in outcomes):
        return EXIT_FAILED
    if any(o.unfinished for o in outcomes):
        return EXIT_UNFINISHED
    return EXIT_OK


class _Progress(Progress):
    """Bytes sent, then the job's status, per file; on stderr, and only when it is a terminal."""

    def __init__(self) -> None:
        console = Console(stderr=True)
        super().__init__(TextColumn("{task.fields[name]}"), BarColumn(), DownloadColumn(),
                         TransferSpeedColumn(), TextColumn("{task.fields[state]}"), console=console,
                         disable=not console.is_terminal, redirect_stdout=False, redirect_stderr=False)

    @property
    def enabled(self) -> bool:
        return not self.disable


class _PartBars:
    """A bar per part of a multipart upload, from when it starts, "stored" once storage has it."""

    def __init__(self, progress: "_Progress", name: str):
        self._progress, self._name = progress, name
        self._tasks: Dict[int, TaskID] = {}
        self._lock = threading.Lock()

    def update(self, number: int, done: int, size: int) -> None:
        with self._lock:
            task = self._tasks.get(number)
            if task is None:
                task = self._tasks[number] = self._progress.add_task(
                    "", name=f"  {self._name} part {number}", state="", total=size)
            self._progress.update(task, completed=done, state="stored" if done >= size else "")


class _Printer:
    """Results on stdout, in input order: human lines, or JSON objects as GET shows the job."""

    def __init__(self, as_json: bool):
        self.as_json = as_json
        self.defer = False
        self._held: List[str] = []
        self._lock = threading.Lock()

    def show(self, o: Outcome) -> None:
        lines = self._json(o) if self.as_json else self._human(o)
        with self._lock:
            if self.defer:
                self._held.extend(lines)
            else:
                for line in lines:
                    print(line, flush=True)
        failure = self._failure(o)
        if failure and self.as_json:  # stdout stays pure JSON; the code is said on stderr too
            print(failure, file=sys.stderr, flush=True)

    def flush(self) -> None:
        with self._lock:
            for line in self._held:
                print(line, flush=True)
            self._held.clear()

    def _json(self, o: Outcome) -> List[str]:
        if o.error is not None:  # no job, or it could not be read: the problem keeps the lines aligned
            body = o.error.body if isinstance(o.error, ApiError) and o.error.body else {
                "code": _code_of(o.error), "detail": str(o.error)}
            return [json.dumps(body)]
        if o.job is None:
            return [json.dumps({"code": "interrupted", "detail": "not sent"})]
        if o.deleted:
            return [json.dumps({"job_id": o.job.job_id, "deleted": True})]
        # An upload cut short shows its 202's body: without `upload`, whose URLs let anyone
        # write the file for a while (GET never shows them either).
        return [json.dumps({k: v for k, v in o.job.raw.items() if k != "upload"})]

    def _human(self, o: Outcome) -> List[str]:
        if o.error is not None:
            return [self._failure(o) or ""]
        job = o.job
        if job is None:
            return [f"{o.name}: not sent, interrupted"]
        if o.deleted:
            return [f"{o.name}: deleted"]
        if o.unfinished and job.status == Status.AWAITING_UPLOAD:
            return [f"{o.name}: awaiting_upload, interrupted; resume with the same command: "
                    f"image-jobs upload {o.name} (saved in {o.state})"]
        if o.unfinished:
            return [f"{o.name}: {job.status or 'unknown'}, unfinished; resume with: "
                    f"image-jobs status {job.location} --wait"]
        failure = self._failure(o)
        if failure:
            return [failure]
        line = f"{o.name}: {job.status} {job.job_id if job.finished else job.location}"
        if job.focus:  # a ready job's: where its squares are placed
            line += f" focus={job.focus['x']},{job.focus['y']} ({job.focus['source']})"
        return [line] + [f"  {name}: {path}" for name, path in o.saved.items()]

    @staticmethod
    def _failure(o: Outcome) -> Optional[str]:
        if o.error is not None:
            again = f"; resume with the same command (saved in {o.state})" if o.state else ""
            return f"{o.name}: {_code_of(o.error)}: {_detail_of(o.error)}{again}"
        job = o.job
        if job is not None and job.status == "failed":
            error = job.error
            return f"{o.name}: failed {error.code if error else 'unknown'} {job.job_id}"
        return None


def _code_of(exc: Exception) -> str:
    code = getattr(exc, "code", None)
    if isinstance(code, str):
        return code
    return {"ConnectionFailed": "connection_failed", "JobNotReady": "not_ready"}.get(
        type(exc).__name__, "error")


def _detail_of(exc: Exception) -> str:
    if isinstance(exc, ApiError):
        return exc.detail or exc.title or str(exc)
    return str(exc)
