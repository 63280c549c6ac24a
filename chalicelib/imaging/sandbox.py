"""Run CPU-bound calls in a reused child process, with a hard CPU limit per call.

A decoder stuck in C code cannot be interrupted by a thread, so the worker decodes in a
child process: RLIMIT_CPU makes the kernel stop it once a call has used its CPU seconds, and
a wall-clock deadline stops it if it hangs. A child is forked on first use and serves call
after call (a fork per image costs copy-on-write faults and cold caches); one that dies or
is stopped is replaced by the next call. Fork, pipes and setrlimit all work inside Lambda.
The child's side: chalicelib/imaging/sandbox_child.py.

Each concurrent caller gets a child of its own from a small pool (the local runner's worker
threads decode in parallel; Lambda uses one): a single shared child would serialise them.
"""
from __future__ import annotations

import os
import pickle
import select
import signal
import threading
import time
from typing import Any, Callable

from chalicelib.domain.errors import ImageTooComplex, TransientError
from chalicelib.imaging.sandbox_child import (
    LIFETIME_CPU_SECONDS,
    ChildFailed,
    read_message,
    serve,
    write_message,
)

# Linux's default ceiling for an unprivileged process (/proc/sys/fs/pipe-max-size).
_PIPE_BYTES = 1 << 20


def run_limited(fn: Callable[..., Any], *args: Any, cpu_seconds: float, wall_seconds: float) -> Any:
    """fn(*args) in a child (fn and args are pickled: a module-level function). Its result,
    or the DomainError it raised, comes back as if it ran here. Over cpu_seconds of CPU:
    ImageTooComplex. Over wall_seconds without using its CPU (a machine too busy, or a
    hang): TransientError, so a later attempt may succeed."""
    return _pool.run(fn, args, cpu_seconds, wall_seconds)


class _Child:
    def __init__(self, pid: int, requests: int, replies: int):
        self.pid, self.requests, self.replies = pid, requests, replies
        self.cpu_used = 0.0  # as of its last reply

    def alive(self) -> bool:
        try:
            return os.waitpid(self.pid, os.WNOHANG) == (0, 0)
        except ChildProcessError:
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

    def run(self, fn, args, cpu_seconds: float, wall_seconds: float) -> Any:
        request = pickle.dumps((fn, args, cpu_seconds), protocol=pickle.HIGHEST_PROTOCOL)
        child = self._take(cpu_seconds)
        try:
            write_message(child.requests, request)
        except OSError:  # it died before this call (its pipe is closed): not this call's doing
            self._end(child)
            child = self._spawn()
            try:
                write_message(child.requests, request)
            except OSError:
                self._end(child)
                raise TransientError("the decoding process died") from None
        ends_at = time.monotonic() + wall_seconds
        try:
            reply = read_message(child.replies, lambda fd: _wait_readable(fd, ends_at))
        except TimeoutError:
            os.kill(child.pid, signal.SIGKILL)
            self._judge(child, cpu_seconds, finished=False)
            raise TransientError(f"decoding did not finish in {wall_seconds:.0f}s of wall time") from None
        if reply is None:  # it died mid-call
            self._judge(child, cpu_seconds, finished=True)
            raise TransientError("the decoding process died")
        try:
            ok, value, child.cpu_used = pickle.loads(reply)
        except Exception as error:  # an error class that cannot be rebuilt here
            ok, value = False, ChildFailed(type(error).__name__)
        with self._lock:
            self._idle.append(child)
        if ok:
            return value
        if isinstance(value, ChildFailed):
            raise TransientError(f"decoding failed: {value}")
        raise value

    def _judge(self, child: _Child, cpu_seconds: float, finished: bool) -> None:
        """Reap a child that ended mid-call; ImageTooComplex if the CPU limit ended it."""
        status, used = self._end(child)
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL) and (
                finished or used - child.cpu_used >= cpu_seconds * 0.9):
            raise ImageTooComplex("The image takes too long to decode.")

    def _take(self, cpu_seconds: float) -> _Child:
        while True:
            with self._lock:
                child = self._idle.pop() if self._idle else None
            if child is None:
                return self._spawn()
            if child.alive() and child.cpu_used + cpu_seconds + 2 < LIFETIME_CPU_SECONDS:
                return child
            self._end(child)  # dead, or too near its lifetime limit: it exits at EOF

    def _end(self, child: _Child) -> tuple[int, float]:
        """Close its pipes and reap it: (wait status, CPU seconds of its whole life)."""
        with self._lock:
            self._live.discard(child)
        child.close()
        try:
            _, status, usage = os.wait4(child.pid, 0)
        except ChildProcessError:
            return 0, child.cpu_used
        return status, usage.ru_utime + usage.ru_stime

    def _spawn(self) -> _Child:
        # Forked from one long-lived thread: the parent-death signal follows the thread
        # that forked, and the caller's thread may end before the process does.
        with self._lock:
            if self._spawner is None:
                from concurrent.futures import ThreadPoolExecutor

                self._spawner = ThreadPoolExecutor(1, thread_name_prefix="sandbox-fork")
            spawner = self._spawner
        return spawner.submit(self._fork).result()

    def _fork(self) -> _Child:
        requests_r, requests_w = os.pipe()
        replies_r, replies_w = os.pipe()
        for fd in (requests_w, replies_w):
            _widen(fd)
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the pool was reset by _after_fork: this child holds no sibling's pipes
            os.close(requests_w)
            os.close(replies_r)
            serve(requests_r, replies_w, parent)
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


def _widen(fd: int) -> None:
    """A pipe that holds a whole photo: one write and one read a message instead of one per
    default pipe buffer, each a wake-up of the other side."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    except (ImportError, AttributeError, OSError):  # not Linux, or over pipe-max-size
        pass


def _wait_readable(fd: int, ends_at: float) -> None:
    while True:
        left = ends_at - time.monotonic()
        if left <= 0:
            raise TimeoutError
        if select.select([fd], [], [], left)[0]:
            return


def _after_fork() -> None:
    global _pool
    _pool.forget()
    _pool = _Pool()


_pool = _Pool()
os.register_at_fork(after_in_child=_after_fork)
