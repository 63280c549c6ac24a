"""local/services.py: a service that dies before it listens says why (moto's server once
exited with 1 before listening in a CI run, and its stderr had gone to /dev/null)."""
import subprocess
import sys
import time

import pytest

from local.ports import free_port
from local.services import keep_tail, wait_for_port


def test_a_process_that_exits_before_listening_fails_with_its_last_lines():
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; print('first', file=sys.stderr); "
                               "print('ImportError: no module named x', file=sys.stderr); sys.exit(1)"],
        stderr=subprocess.PIPE, text=True)
    with pytest.raises(RuntimeError) as error:
        wait_for_port("127.0.0.1", free_port(), timeout=30, process=process, said=keep_tail(process.stderr))
    assert "exited with 1 before listening" in str(error.value)
    assert "first\nImportError: no module named x" in str(error.value)


def test_the_tail_drains_the_pipe_and_keeps_the_last_lines():
    process = subprocess.Popen([sys.executable, "-c", "import sys\nfor i in range(100000): print(i, file=sys.stderr)"],
                               stderr=subprocess.PIPE, text=True)
    said = keep_tail(process.stderr, lines=3)
    assert process.wait(30) == 0  # 600 KB through a 64 KB pipe: it never blocked
    deadline = time.monotonic() + 30
    while said() != "99997\n99998\n99999\n" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert said() == "99997\n99998\n99999\n"
