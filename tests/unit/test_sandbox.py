"""The worker's decoding child: results and errors come back, CPU hogs are stopped."""
import time

import pytest

from chalicelib.errors import ImageTooComplex, InvalidImage, TransientError
from chalicelib.sandbox import run_limited


def add(a, b):
    return a + b


def refuse():
    raise InvalidImage("The image could not be decoded.")


def spin():
    while True:
        pass


def sleep_forever():
    time.sleep(60)


def crash():
    import os

    os._exit(3)


def test_a_result_comes_back_as_if_called_here():
    assert run_limited(add, b"x" * 300_000, b"y", cpu_seconds=2, wall_seconds=10) == b"x" * 300_000 + b"y"


def test_a_domain_error_comes_back_with_its_code_and_detail():
    with pytest.raises(InvalidImage) as caught:
        run_limited(refuse, cpu_seconds=2, wall_seconds=10)
    assert caught.value.detail == "The image could not be decoded."


def test_a_cpu_hog_is_stopped_by_the_kernel_and_called_too_complex():
    started = time.monotonic()
    with pytest.raises(ImageTooComplex):
        run_limited(spin, cpu_seconds=1, wall_seconds=30)
    assert time.monotonic() - started < 15  # the limit, not the wall clock, ended it


def test_a_hang_that_uses_no_cpu_is_transient_at_the_wall_deadline():
    with pytest.raises(TransientError):
        run_limited(sleep_forever, cpu_seconds=5, wall_seconds=0.5)


def test_a_child_that_dies_is_transient():
    with pytest.raises(TransientError):
        run_limited(crash, cpu_seconds=2, wall_seconds=10)
