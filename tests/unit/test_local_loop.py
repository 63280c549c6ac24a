"""The local runner's one back-off (local/loop.py) gives what each consumer's own formula gave
before it had one, and the one loop pauses by it after failed steps."""
from __future__ import annotations

import itertools

import pytest

from local.loop import Loop, backoff


def sqs_before(count: int, retry_in, cap: int) -> int:
    """local/sqs_worker.py's visibility back-off, as it was written."""
    delay = retry_in if retry_in is not None else 2 ** count
    return int(min(cap, max(1, delay + 0.5)))


def amqp_retry_before(retry_in, deliveries: int) -> float:
    """local/amqp_worker.py's pause before a nack, as it was written (for a TransientError)."""
    if retry_in is not None:
        return min(max(retry_in, 0.5), 30.0)
    return min(2.0 ** deliveries, 30.0)


def doubling_before(failures: int) -> list[float]:
    """The AMQP reconnect and the bridge's publish pauses, as they were written."""
    pause, pauses = 1.0, []
    for _ in range(failures):
        pauses.append(pause)
        pause = min(pause * 2, 30.0)
    return pauses


ASKED = [None, 0, 0.2, 0.5, 0.7, 1.4, 2.5, 29.6, 299.6, 300, 301.2, 5000, 43199.7, 50000]


@pytest.mark.parametrize("cap", [300, 43200])
def test_the_sqs_visibility_back_off_is_what_it_was(cap):
    for count, asked in itertools.product(range(0, 40), ASKED):
        assert int(backoff(count, cap, asked, floor=1) + 0.5) == sqs_before(count, asked, cap), (count, asked)


def test_the_amqp_retry_pause_is_what_it_was():
    for deliveries, asked in itertools.product(range(0, 40), ASKED):
        assert backoff(deliveries, 30.0, asked) == amqp_retry_before(asked, deliveries), (deliveries, asked)


def test_the_doubling_pauses_are_what_they_were():
    assert [backoff(n, 30.0) for n in range(12)] == doubling_before(12)
    assert backoff(10_000, 30.0) == 30.0  # no overflow after a very long outage


class Waits:
    """A stop event whose waits return at once, noting the pause."""

    def __init__(self):
        self.pauses, self.stopped = [], False

    def is_set(self):
        return self.stopped

    def set(self):
        self.stopped = True

    def wait(self, seconds):
        self.pauses.append(seconds)
        return self.stopped


class Scripted(Loop):
    """Steps that fail or not, as scripted; the loop stops after the script."""

    retried = (OSError,)

    def __init__(self, script):
        super().__init__()
        self._stopping = Waits()
        self._script = iter(script)
        self.failed = []

    def _step(self):
        outcome = next(self._script, None)
        if outcome is None:
            self._stopping.set()
        elif outcome == "fail":
            raise OSError("lost")

    def _failed(self, error, pause):
        self.failed.append((type(error).__name__, pause))


def test_the_loop_backs_off_after_failures_in_a_row_and_resets_after_a_step_that_returns():
    loop = Scripted(["fail", "fail", "fail", "ok", "fail", "ok"])
    loop._run()
    assert loop._stopping.pauses == [1.0, 2.0, 4.0, 1.0]
    assert loop.failed == [("OSError", 1.0), ("OSError", 2.0), ("OSError", 4.0), ("OSError", 1.0)]


def test_an_error_the_loop_does_not_retry_ends_it():
    class Broken(Scripted):
        def _step(self):
            raise ValueError("a bug")

    with pytest.raises(ValueError):
        Broken([])._run()


def test_the_runner_stops_its_parts_together_and_a_stuck_one_does_not_hold_the_others():
    """local/__main__.py's shutdown: every consumer is told at once, and one whose step never
    ends is logged and left (the exit does not wait for it) once the shared time is up."""
    import threading
    import time

    import local.__main__ as runner

    release = threading.Event()
    stopped = []

    class Quick:
        def stop(self):
            time.sleep(0.2)
            stopped.append(self)

    class Stuck:
        def stop(self):
            release.wait()

    class Log:
        def __init__(self):
            self.warnings = []

        def warning(self, event, **fields):
            self.warnings.append((event, fields))

    log, parts = Log(), [Quick(), Stuck(), Quick()]
    runner._stuck.clear()
    start = time.monotonic()
    runner._stop_together(parts, 1.0, log)
    took = time.monotonic() - start
    release.set()
    assert len(stopped) == 2 and took < 3  # the quick ones in parallel, the stuck one cut at 1 s
    assert runner._stuck.is_set()
    ((event, fields),) = log.warnings
    assert event == "stop_timed_out" and fields["parts"] == ["stop-Stuck"]
    runner._stuck.clear()
    runner._stop_together([Quick(), Quick()], 1.0, log)
    assert not runner._stuck.is_set() and len(log.warnings) == 1
