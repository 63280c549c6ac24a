"""Run CPU-bound calls in a reused child process, with a hard CPU limit per call.

A decoder stuck in C code cannot be interrupted by a thread, so the worker decodes in a
child process: RLIMIT_CPU makes the kernel stop it once a call has used its CPU seconds,
RLIMIT_DATA refuses it memory past the call's ceiling, and a wall-clock deadline stops it
if it hangs. A child is started on first use and serves call after call (a process per image
costs its start each time); one that dies or is stopped is replaced by the next call.

The child is a fresh interpreter (posix_spawn of this Python), not a fork: a fork inherits the
parent's heap with what it freed, and RLIMIT_DATA refuses only memory a process has not mapped
yet, so a decode could use all that besides its ceiling (a test suite's or a busy worker's
heap holds hundreds of MiB free). A fresh one also holds none of the parent's secrets. Spawn,
pipes and setrlimit all work inside Lambda. The child's side: chalicelib/imaging/sandbox_child.py.

Each concurrent caller gets a child of its own from a small pool (the local runner's worker
threads decode in parallel; Lambda uses one): a single shared child would serialise them.
"""
from __future__ import annotations

import os
import pickle
import select
import signal
import sys
import threading
import time
from typing import Any, Callable, Optional

from chalicelib.domain.errors import ImageTooComplex, TransientError
from chalicelib.imaging.sandbox_child import (
    LIFETIME_CPU_SECONDS,
    ChildFailed,
    read_message,
    write_message,
)

# Linux's default ceiling for an unprivileged process (/proc/sys/fs/pipe-max-size).
_PIPE_BYTES = 1 << 20
# glibc's malloc in the child. One arena: libvips' threads would each get one of their own,
# whose memory counts against a call's ceiling (RLIMIT_DATA) though no pixel is in it. And
# what a call frees is kept for the next: by default a buffer of a few MiB (a decoded
# display, its copy for Pillow) is mapped afresh and given back each time, and every page of
# it faulted in again on every call: about 2,800 page faults and a quarter of the child's CPU
# on a 12 MP JPEG (benchmarks/worker_cpu.py). Kept, they are reused; the ceiling still holds,
# as it counts what the child holds (kept or not) from its start. Above 32 MiB (glibc's own
# largest dynamic threshold: a 48 MP decode) a buffer is still mapped and given back.
_MALLOC = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(64 << 20)}


def run_limited(fn: Callable[..., Any], *args: Any, cpu_seconds: float, wall_seconds: float,
                memory_bytes: int = 0) -> Any:
    """fn(*args) in a child (fn and args are pickled: a module-level function). Its result,
    or the DomainError it raised, comes back as if it ran here. Over cpu_seconds of CPU, or
    needing more than memory_bytes beyond what the child started with (0: no ceiling):
    ImageTooComplex. Over wall_seconds without using its CPU (a machine too busy, or a
    hang): TransientError, so a later attempt may succeed."""
    return _pool.run(fn, args, cpu_seconds, wall_seconds, memory_bytes)


def start_early() -> Optional[int]:
    """Start a child now unless this process has one: its interpreter loads the decoders
    while the caller goes on (a worker's first event downloads and claims meanwhile), so the
    first decode does not wait for them. The child's pid, or None when there was one."""
    return _pool.start_early()


class _Child:
    def __init__(self, pid: int, requests: int, replies: int):
        self.pid, self.requests, self.replies = pid, requests, replies
        self.cpu_used = 0.0  # as of its last reply
        # The largest memory ceiling of its calls so far (None: none yet; 0: no ceiling).
        # Memory a call freed stays in the child's heap (see above): a call with a lower
        # ceiling than an earlier one's could use it all. So such a call gets a fresh child
        # (the worker's calls all have one ceiling, and never pay for that).
        self.ceiling: Optional[int] = None
        self.reaped = False  # then its pid may be another process's: never signal it

    def alive(self) -> bool:
        try:
            if os.waitpid(self.pid, os.WNOHANG) == (0, 0):
                return True
        except ChildProcessError:
            pass
        self.reaped = True
        return False

    def close(self) -> None:
        for fd in (self.requests, self.replies):
            try:
                os.close(fd)
            except OSError:
                pass


class _Pool:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Child] = []
        self._live: set[_Child] = set()
        self._spawner = None  # a ThreadPoolExecutor of one thread, made on first use

    def start_early(self) -> Optional[int]:
        with self._lock:
            if self._live:
                return None
        child = self._spawn()  # returns once it is spawned: its imports run on meanwhile
        with self._lock:
            self._idle.append(child)
        return child.pid

    def run(self, fn, args, cpu_seconds: float, wall_seconds: float, memory_bytes: int) -> Any:
        buffers: list[pickle.PickleBuffer] = []
        request = pickle.dumps((fn, tuple(map(_by_reference, args)), cpu_seconds, memory_bytes), protocol=5,
                               buffer_callback=buffers.append)
        request = (request, *(buffer.raw() for buffer in buffers))
        used = [self._take(cpu_seconds, memory_bytes)]
        try:
            reply = self._call(used, request, cpu_seconds, wall_seconds)
        except BaseException:
            # Whatever went wrong here (our own bug, an interrupt, a full descriptor table):
            # no child, zombie or pipe is left behind.
            for child in used:
                self._end(child, kill=True)
            raise
        child = used[-1]
        try:
            ok, value, child.cpu_used = pickle.loads(reply[0])
        except Exception as error:  # an error class that cannot be rebuilt here
            ok, value = False, ChildFailed(type(error).__name__)
        with self._lock:
            self._idle.append(child)
        if ok:
            return value
        if isinstance(value, ChildFailed):
            raise TransientError(f"decoding failed: {value}")
        raise value

    def _call(self, used: list[_Child], request: tuple, cpu_seconds: float, wall_seconds: float) -> list[bytes]:
        """The child's reply; `used` gets each child this call has taken."""
        child = used[-1]
        try:
            write_message(child.requests, *request)
        except OSError:  # it died before this call (its pipe is closed): not this call's doing
            self._end(child)
            ceiling, child = child.ceiling, self._spawn()
            child.ceiling = ceiling  # this call's, which _take recorded on the one it replaces
            used.append(child)
            try:
                write_message(child.requests, *request)
            except OSError:
                raise TransientError("the decoding process died") from None
        ends_at = time.monotonic() + wall_seconds
        try:
            reply = read_message(child.replies, lambda fd: _wait_readable(fd, ends_at))
        except TimeoutError:
            self._judge(child, cpu_seconds, finished=False)
            raise TransientError(f"decoding did not finish in {wall_seconds:.0f}s of wall time") from None
        if reply is None:  # it died mid-call
            self._judge(child, cpu_seconds, finished=True)
            raise TransientError("the decoding process died")
        return reply

    def _judge(self, child: _Child, cpu_seconds: float, finished: bool) -> None:
        """Reap a child that ended mid-call (or is stopped now, when it has not finished);
        ImageTooComplex if the CPU limit ended it."""
        status, used = self._end(child, kill=not finished)
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL) and (
                finished or used - child.cpu_used >= cpu_seconds * 0.9):
            raise ImageTooComplex("The image takes too long to decode.")

    def _take(self, cpu_seconds: float, memory_bytes: int) -> _Child:
        while True:
            with self._lock:
                child = self._idle.pop() if self._idle else None
            if child is None:
                child = self._spawn()
                child.ceiling = memory_bytes
                return child
            if (child.alive() and child.cpu_used + cpu_seconds + 2 < LIFETIME_CPU_SECONDS
                    and _within(memory_bytes, child.ceiling)):
                child.ceiling = memory_bytes
                return child
            self._end(child)  # dead, too near its lifetime limit, or holding too much: it exits at EOF

    def _end(self, child: _Child, kill: bool = False) -> tuple[int, float]:
        """Close its pipes and reap it (after SIGKILL if `kill`): (wait status, CPU seconds
        of its whole life). Once reaped, a second call does nothing."""
        with self._lock:
            self._live.discard(child)
        child.close()
        if child.reaped:
            return 0, child.cpu_used
        if kill:
            try:
                os.kill(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            _, status, usage = os.wait4(child.pid, 0)
        except ChildProcessError:
            return 0, child.cpu_used
        finally:
            child.reaped = True
        return status, usage.ru_utime + usage.ru_stime

    def _spawn(self) -> _Child:
        # Started from one long-lived thread: the parent-death signal follows the thread
        # that started it, and the caller's thread may end before the process does.
        with self._lock:
            if self._spawner is None:
                from concurrent.futures import ThreadPoolExecutor

                self._spawner = ThreadPoolExecutor(1, thread_name_prefix="sandbox-start")
            spawner = self._spawner
        return spawner.submit(self._start).result()

    def _start(self) -> _Child:
        requests_r, requests_w = os.pipe()
        replies_r, replies_w = os.pipe()
        for fd in (requests_w, replies_w):
            _widen(fd)
        # The child's ends, by the same numbers and inheritable (a dup2 onto itself clears
        # close-on-exec); every other descriptor closes at exec or in the child.
        keep = [(os.POSIX_SPAWN_DUP2, fd, fd) for fd in (requests_r, replies_w)]
        # What this process imports from, so the child finds chalicelib and the called
        # function's module (a test's, say) as this process does.
        path = os.pathsep.join(os.path.abspath(p) if p else os.getcwd() for p in sys.path)
        env = {**os.environ, "PYTHONPATH": path, **_MALLOC}
        try:
            pid = os.posix_spawn(sys.executable, [sys.executable, "-m", "chalicelib.imaging.sandbox_child",
                                                  str(requests_r), str(replies_w), str(os.getpid())],
                                 env, file_actions=keep)
        finally:
            os.close(requests_r)
            os.close(replies_w)
        child = _Child(pid, requests_w, replies_r)
        with self._lock:
            self._live.add(child)
        return child

    def forget(self) -> None:
        """In a forked process: the children are the parent's. Closing our copies of their
        pipes lets each one see its end when the parent closes its own."""
        for child in list(self._live):
            child.close()


# Arguments this large (a photo) go out of band: not copied into the request's pickle, nor out
# of it again in the child (some 0.6 ms a copy of a 1 MB original).
_OUT_OF_BAND_BYTES = 64 * 1024


def _by_reference(arg: Any) -> Any:
    if type(arg) is bytes and len(arg) >= _OUT_OF_BAND_BYTES:
        return pickle.PickleBuffer(arg)
    return arg


def _within(memory_bytes: int, ceiling: Optional[int]) -> bool:
    """Whether a child whose calls had `ceiling` may serve a call with `memory_bytes`."""
    if ceiling is None or memory_bytes == 0:
        return True
    return ceiling != 0 and memory_bytes >= ceiling


def _widen(fd: int) -> None:
    """A pipe that holds a whole photo: one write and one read a message instead of one per
    default pipe buffer, each a wake-up of the other side."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    except (ImportError, AttributeError, OSError):  # not Linux, or over pipe-max-size
        pass


def _wait_readable(fd: int, ends_at: float) -> None:
    # poll, not select: select cannot watch a descriptor numbered 1024 or more, which a
    # busy process (the local runner, a test suite) can hold. A closed far end (the child
    # died) is reported as POLLHUP, and the read then sees the end.
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while True:
        left = ends_at - time.monotonic()
        if left <= 0:
            raise TimeoutError
        if poller.poll(max(1, int(left * 1000) + 1)):
            return


def _after_fork() -> None:
    global _pool
    _pool.forget()
    _pool = _Pool()


_pool = _Pool()
os.register_at_fork(after_in_child=_after_fork)
