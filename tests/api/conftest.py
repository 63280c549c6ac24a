import pytest

from tests.conftest import local_runner


@pytest.fixture(scope="module")
def api_runner():
    """A local runner of its own, started like the end-to-end tests' one. The fuzzer leaves
    hundreds of jobs behind, and moto's TransactWriteItems deep-copies the whole table on
    every call, racing the writes of other threads (a 500, then a 503, where DynamoDB would
    succeed): with that many items, the end-to-end tests' concurrent uploads would hit it."""
    with local_runner() as started:
        yield started
