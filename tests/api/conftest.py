import pytest

from tests.local_runner import local_runner

# The fuzzed runner's settings beside the defaults.
RUNNER_SETTINGS = {"MAX_ACTIVE_JOBS": "100000", "MAX_WAIT_SECONDS": "2"}


@pytest.fixture(scope="module")
def api_runner():
    """A local runner of its own, started like the end-to-end tests' one. The fuzzer leaves
    hundreds of jobs behind, and moto's TransactWriteItems deep-copies the whole table on
    every call, racing the writes of other threads (a 500, then a 503, where DynamoDB would
    succeed): with that many items, the end-to-end tests' concurrent uploads would hit it."""
    # The fuzzer is one owner that makes jobs far faster than workers finish them: a quota
    # of unfinished jobs it never meets (tests/e2e/test_hostile.py checks the real one).
    # Short holds: Prefer: wait is generated too (test_schemathesis.py gives each request
    # the time the runner's settings allow it, holds included).
    with local_runner(**RUNNER_SETTINGS) as started:
        yield started
