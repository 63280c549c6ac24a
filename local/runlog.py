"""The run's log: every line the runner and its API print, also kept in a file for
`make stats` (local/stats.py). The previous run's file is kept beside it as `<name>.1`."""
from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import TextIO


def open_run_log(path: str) -> TextIO:
    log = Path(path)
    log.parent.mkdir(parents=True, exist_ok=True)
    if log.exists():
        log.replace(log.with_name(log.name + ".1"))
    return open(log, "w", encoding="utf-8", buffering=1)


class Tee(io.TextIOBase):
    """Whole lines to the console and to the file. print() writes a line in two calls (the
    text, then the newline): each thread's text waits here until its line is complete, so
    lines from different threads never mix."""

    def __init__(self, console: TextIO, file: TextIO):
        self._console = console
        self._file = file
        self._lock = threading.Lock()
        self._partial = threading.local()

    def write(self, text: str) -> int:
        pending = getattr(self._partial, "text", "") + text
        complete, newline, rest = pending.rpartition("\n")
        self._partial.text = rest
        if newline:
            lines = complete + newline
            with self._lock:
                self._console.write(lines)
                self._console.flush()
                self._file.write(lines)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            self._console.flush()
            self._file.flush()

    def isatty(self) -> bool:
        return self._console.isatty()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:
        return getattr(self._console, "encoding", "utf-8")
