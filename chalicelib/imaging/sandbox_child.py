"""The decoding child's side of chalicelib/imaging/sandbox.py: serve calls until the pipe closes.
It runs as `python -m chalicelib.imaging.sandbox_child REQUESTS REPLIES PARENT` (the pipes'
descriptors and the parent's pid).

A message is a pickle and the buffers it holds out of band (pickle protocol 5: a photo passed
as an argument crosses the pipe without being copied into the pickle and out of it again),
framed by write_message. A request is (fn, args, cpu_seconds, memory_bytes); a reply is
(ok, value, cpu_used_so_far).
"""
from __future__ import annotations

import os
import pickle
import resource
import signal
import sys
from typing import NoReturn, Optional

from chalicelib.domain.errors import ImageTooComplex

_HEADER = 8
# CPU seconds one child may use in its whole life: the hard limit, which an unprivileged
# process can lower but never raise again. The parent retires a child before a call could
# reach it (a few thousand images).
LIFETIME_CPU_SECONDS = 600


class ChildFailed(Exception):
    """The child raised something that cannot come back as it is."""


def serve(requests: int, replies: int, parent: int) -> NoReturn:
    """Run in the child; never returns."""
    code = 0
    try:
        _die_with(parent)
        _close_inherited(keep={requests, replies})
        # The kernel's SIGXCPU must kill (its default), and the parent's handlers (the
        # local runner's SIGTERM) are not ours: the parent decides when a child ends.
        signal.signal(signal.SIGXCPU, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        inherited = resource.getrlimit(resource.RLIMIT_CPU)[1]
        hard = LIFETIME_CPU_SECONDS if inherited == resource.RLIM_INFINITY else min(LIFETIME_CPU_SECONDS, inherited)
        # The memory ceiling is counted from what the child holds once its code is loaded:
        # the decoders' own libraries are not a call's memory.
        # The calls' module and libvips (loaded, one thread, no cache): before the count.
        from chalicelib.imaging import render

        render.prepare()
        inherited_data = data_bytes()
        data_hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
        while True:
            request = read_message(requests)
            if request is None:  # the parent closed the pipe, or died
                break
            fn, args, cpu_seconds, memory_bytes = pickle.loads(request[0], buffers=request[1:])
            # RLIMIT_CPU counts the child's whole life: the soft limit is moved to what it
            # has used so far plus this call's budget, to the nearest whole second (the
            # limit's unit), so a call gets its budget within half a second either way.
            # SIGXCPU at the soft limit kills it.
            soft = min(hard, max(1, round(cpu_used() + cpu_seconds)))
            resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
            # RLIMIT_DATA (private writable memory: the heap, Pillow's image blocks, mmaps):
            # past it an allocation fails, and Python and Pillow raise MemoryError.
            data_soft = data_hard if not memory_bytes else inherited_data + memory_bytes
            if data_hard != resource.RLIM_INFINITY:
                data_soft = min(data_soft, data_hard)
            resource.setrlimit(resource.RLIMIT_DATA, (data_soft, data_hard))
            try:
                reply = (True, fn(*args))
            except MemoryError:
                reply = (False, ImageTooComplex("The image needs more memory to decode than is allowed.")
                         if memory_bytes else ChildFailed("MemoryError"))
            except Exception as error:  # noqa: BLE001 - sent back to the parent
                reply = (False, error)
            try:
                payload = pickle.dumps(reply + (cpu_used(),), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:
                failed = ChildFailed(type(reply[1]).__name__)
                payload = pickle.dumps((False, failed, cpu_used()), protocol=pickle.HIGHEST_PROTOCOL)
            write_message(replies, payload)
    except BaseException:
        code = 1
    finally:
        sys.stdout.flush()
        os._exit(code)  # no interpreter teardown: a decoder may be mid-way in C


def data_bytes() -> int:
    """This process's data segment as RLIMIT_DATA counts it (VmData); 0 without /proc."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmData:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _close_inherited(keep: set[int]) -> None:
    """Close every descriptor the parent had open but ours and the standard three, as
    subprocess does. This child lives long: a copy of another pipe's write end held here
    would keep that pipe's reader from ever seeing its end (a driver process waiting for its
    stdin to close, say, would never exit)."""
    try:
        open_fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc: every descriptor up to the limit
        open_fds = list(range(3, os.sysconf("SC_OPEN_MAX")))
    for fd in open_fds:
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own descriptor, already gone


def _die_with(parent: int) -> None:
    """SIGKILL when the parent dies, even mid-decode (Linux; elsewhere the child still ends
    at the pipe's end). The signal follows the thread that started it, so sandbox.py starts it from
    a thread that lives as long as the process."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before prctl took effect
        os._exit(1)


def write_message(fd: int, *payloads) -> None:
    """One message of the payloads (bytes-like): their count, then each with its length in
    front, 8 bytes each."""
    # writev: every part in one call (one wake-up of the reader), without joining them into
    # a copy of the photo.
    parts = [memoryview(len(payloads).to_bytes(_HEADER, "big"))]
    for payload in payloads:
        view = memoryview(payload)
        parts += [memoryview(view.nbytes.to_bytes(_HEADER, "big")), view]
    while parts:
        sent = os.writev(fd, parts)
        while parts and sent >= len(parts[0]):
            sent -= len(parts.pop(0))
        if parts:
            parts[0] = parts[0][sent:]


def read_message(fd: int, wait=None) -> Optional[list[bytes]]:
    """One message's payloads, or None at the pipe's end. `wait(fd)` blocks until fd is
    readable (the parent's wall clock); it raises TimeoutError when time is up."""
    count = _read_exactly(fd, _HEADER, wait)
    if count is None:
        return None
    payloads = []
    for _ in range(int.from_bytes(count, "big")):
        size = _read_exactly(fd, _HEADER, wait)
        payload = None if size is None else _read_exactly(fd, int.from_bytes(size, "big"), wait)
        if payload is None:
            return None
        payloads.append(payload)
    return payloads


def _read_exactly(fd: int, size: int, wait) -> Optional[bytes]:
    chunks, left = [], size
    while left:
        if wait is not None:
            wait(fd)
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
