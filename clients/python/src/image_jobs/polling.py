"""The contract's waits, as pure functions: "How a client polls" in CONTRACT.md.

Start after Retry-After, then wait 3, 5, 8 and at most 15 seconds between polls, each with
±20 % jitter, never sooner than a Retry-After the server sent. A poll the server held
(Prefer: wait, answered with Preference-Applied) may be followed by the next at once.
"""
from __future__ import annotations

import time
from email.utils import parsedate_to_datetime
from typing import Callable, Mapping, Optional

STEPS = (3.0, 5.0, 8.0, 15.0)
JITTER = 0.2
# A held poll (Prefer: wait) asks for at most this long: the server caps it lower as it likes.
MAX_HOLD_SECONDS = 20
# ... and at most this long when the caller may stop waiting (Ctrl-C in the CLI).
STOPPABLE_HOLD_SECONDS = 3
# A held answer quicker than this, with nothing new, is followed by the schedule, not at once.
MIN_HELD_SECONDS = 1.0
# After a direct upload's last byte is stored, its job leaves awaiting_upload when storage's
# notification arrives (seconds): the upload waits for that, held, at most this long.
ARRIVAL_SECONDS = 30.0
# Retries of one request (upload, cancel, delete) when the server sent no Retry-After.
RETRY_STEPS = (1.0, 2.0, 4.0, 8.0, 15.0)


# The push socket's reconnect waits: doubling from the first, capped, each between half and
# all of it, so that clients dropped together do not all come back in the same instant.
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 30.0


def reconnect_wait(failures: int, random: Callable[[], float]) -> float:
    """Seconds before the next connect after `failures` failed ones in a row (0: after a drop)."""
    return min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** max(0, failures - 1)) * (0.5 + 0.5 * random())


def jittered(seconds: float, random: Callable[[], float]) -> float:
    """seconds × a factor in [0.8, 1.2); `random` returns a float in [0, 1)."""
    return seconds * (1.0 + JITTER * (2.0 * random() - 1.0))


def poll_wait(polls_done: int, retry_after: Optional[float], random: Callable[[], float]) -> float:
    """Seconds to wait after the `polls_done`-th poll (1 = after the first) before the next one."""
    base = STEPS[min(polls_done, len(STEPS)) - 1]
    return max(jittered(base, random), retry_after or 0.0)


def retry_wait(attempts_done: int, retry_after: Optional[float], random: Callable[[], float]) -> float:
    """Seconds before retrying a request: the server's Retry-After, else a jittered backoff."""
    if retry_after is not None:
        return retry_after
    return jittered(RETRY_STEPS[min(attempts_done, len(RETRY_STEPS)) - 1], random)


def retry_after(headers: Mapping[str, str], now: Callable[[], float] = time.time) -> Optional[float]:
    """Retry-After in seconds (delta-seconds or an HTTP-date), or None when absent or garbled.

    An HTTP-date is measured against the answer's own Date header when there is one, so a
    client whose clock is off still waits what the server meant.
    """
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        until = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    try:
        sent = parsedate_to_datetime(headers["date"]).timestamp()
    except (KeyError, TypeError, ValueError, IndexError, OverflowError):
        sent = now()
    return max(0.0, until - sent)
