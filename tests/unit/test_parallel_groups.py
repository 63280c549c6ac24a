"""`make test` runs pytest-xdist with --dist loadgroup, and tests/conftest.py's groups keep
what shares a costly start (one LocalStack, say) on one worker. Both only hold while xdist
can still rename a test's node id (pytest 9.2 broke that silently, with no error at all)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.conftest import ROOT

PROJECT = '''
import pytest

@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("n", range(4))
def test_grouped(n):
    pass

@pytest.mark.parametrize("n", range(4))
def test_free(n):
    pass
'''


def run(tmp_path, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_it.py").write_text(PROJECT)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    # Only xdist among the installed plugins (Schemathesis's, Hypothesis's... each import costs
    # every process, the two workers' too): what renames a node id is xdist's and pytest's own.
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "xdist", "-n", "2", "--dist", "loadgroup", "-v",
                           "-p", "no:cacheprovider", *args], cwd=tmp_path, env=env, capture_output=True, text=True)


def test_a_group_runs_on_one_worker(tmp_path):
    result = run(tmp_path)
    assert result.returncode == 0, result.stdout
    workers = re.findall(r"\[(gw\d)\] .*PASSED test_it.py::test_grouped\[\d\]@shared", result.stdout)
    assert len(workers) == 4 and len(set(workers)) == 1, result.stdout


def test_no_tests_is_a_failure_side_by_side_too(tmp_path):
    """pytest's exit code 5, which .ci/run passes on."""
    assert run(tmp_path, "-k", "nothing_is_called_this").returncode == 5


def test_the_suites_groups():
    """What shares LocalStack or a module's runner gets one group (tests/conftest.py)."""
    import pytest

    class Groups:
        found: dict[str, str | None] = {}

        def pytest_collection_finish(self, session):
            from tests.conftest import xdist_group

            self.found.update({item.nodeid: xdist_group(item) for item in session.items})

    groups = Groups()
    assert pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", str(ROOT / "tests" / "e2e"),
                        str(ROOT / "tests" / "deploy" / "test_localstack_host.py")], plugins=[groups]) == 0
    found = groups.found
    assert {g for n, g in found.items() if "test_localstack_host" in n} == {"localstack"}
    assert {g for n, g in found.items() if "test_images_api" in n and "[localstack" in n} == {"localstack"}
    assert {g for n, g in found.items() if "test_images_api" in n and "[rgw" in n} == {"rgw"}
    assert {g for n, g in found.items() if "test_images_api" in n and "[embedded" in n} == {None}
    assert {g for n, g in found.items() if "test_push.py" in n and "[amqp" in n} == {"tests/e2e/test_push.py-amqp"}
