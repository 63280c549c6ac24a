"""The local runner's one consumer loop and one back-off.

Every consumer (the SQS worker and webhook loops, the SQS-to-AMQP bridge, the AMQP
consumer) is a Loop: a daemon thread repeating one step until stopped, pausing after a
failed step for `backoff` of the failures in a row.
"""
from __future__ import annotations

import threading
from typing import Optional


def backoff(attempt: int, cap: float, asked: Optional[float] = None, floor: float = 0.5) -> float:
    """Seconds to wait after failure number `attempt` (from 0): what the failure asked for
    (a busy job's lease end), else 1, 2, 4 ... doubling; never under `floor` or over `cap`."""
    seconds = asked if asked is not None else 2.0 ** min(attempt, 64)
    return min(cap, max(floor, seconds))


class Loop:
    """A thread that runs `_step` until stopped. A step raising one of `retried` is logged
    by `_failed` and followed by a pause of `backoff(failures, max_pause)`; a step that
    returns resets the count."""

    name = "loop"
    retried: tuple[type[BaseException], ...] = (Exception,)
    max_pause = 30.0

    def __init__(self):
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 30) -> None:
        """Take no more work; wait up to `timeout` for the step in hand."""
        self._stopping.set()
        self._thread.join(timeout)

    def _step(self) -> None:
        raise NotImplementedError

    def _failed(self, error: BaseException, pause: float) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                self._step()
            except self.retried as error:
                pause = backoff(failures, self.max_pause)
                failures += 1
                self._failed(error, pause)
                self._stopping.wait(pause)
            else:
                failures = 0
