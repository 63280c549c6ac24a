"""Run one CPU-bound call in a forked child with a hard CPU limit.

A decoder stuck in C code cannot be interrupted by a thread, so the worker decodes in a
child process: RLIMIT_CPU makes the kernel stop it once it has used its CPU seconds, and a
wall-clock deadline stops it if it hangs. This works inside Lambda (fork and setrlimit are
allowed there) and costs one fork per image, a few milliseconds.
"""
from __future__ import annotations

import os
import pickle
import resource
import select
import signal
import time
from typing import Any, Callable

from chalicelib.errors import ImageTooComplex, TransientError


class _ChildFailed(Exception):
    """The child raised something that is not ours to re-raise as is."""


def run_limited(fn: Callable[..., Any], *args: Any, cpu_seconds: float, wall_seconds: float) -> Any:
    """fn(*args) in a child. Its result, or the DomainError it raised, comes back as if it
    ran here. Over cpu_seconds of CPU: ImageTooComplex. Over wall_seconds without using its
    CPU (a machine too busy, or a hang): TransientError, so a later attempt may succeed."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, and leave without running any cleanup
        os.close(read_end)
        code = 0
        try:
            limit = max(1, int(cpu_seconds + 0.999))
            resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 1))
            try:
                payload = pickle.dumps((True, fn(*args)), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as error:  # noqa: BLE001 - sent back to the parent
                try:
                    payload = pickle.dumps((False, error), protocol=pickle.HIGHEST_PROTOCOL)
                except Exception:
                    payload = pickle.dumps((False, _ChildFailed(type(error).__name__)))
            with os.fdopen(write_end, "wb") as out:
                out.write(payload)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    try:
        payload, finished = _read_all(read_end, time.monotonic() + wall_seconds)
    finally:
        os.close(read_end)
    if not finished:
        os.kill(pid, signal.SIGKILL)
    _, status, usage = os.wait4(pid, 0)
    cpu_used = usage.ru_utime + usage.ru_stime
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL) and (
            finished or cpu_used >= cpu_seconds * 0.9):
        raise ImageTooComplex("The image takes too long to decode.")
    if not finished:
        raise TransientError(f"decoding did not finish in {wall_seconds:.0f}s of wall time")
    if not payload or not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        raise TransientError("the decoding process died")
    ok, value = pickle.loads(payload)
    if ok:
        return value
    if isinstance(value, _ChildFailed):
        raise TransientError(f"decoding failed: {value}")
    raise value


def _read_all(fd: int, deadline: float) -> tuple[bytes, bool]:
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"".join(chunks), False
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)
