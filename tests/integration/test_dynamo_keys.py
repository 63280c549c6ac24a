"""DynamoKeys on moto's server: a secret every API process shares, made once by whichever
asks first, whatever the races (processes at once, a put that landed and was sent again)."""
from __future__ import annotations

import threading

import pytest

from chalicelib.adapters.dynamo_keys import KEY_BYTES, KEY_PREFIX, DynamoKeys
from chalicelib.adapters.dynamo_table import DynamoTable
from tests.dynamo_stub import DynamoStub

# Short enough for a lost answer to be sent again quickly; retries as production's.
FAST = {"connect_timeout_seconds": 2, "read_timeout_seconds": 1, "max_retry_attempts": 2}


def table_at(stack, host=None) -> DynamoTable:
    settings, _, _ = stack
    return DynamoTable(settings.table, settings.region, host or settings.endpoint_url, connection=FAST)


def test_every_process_reads_the_one_key_the_first_made_and_a_name_has_its_own(stack):
    first, second = DynamoKeys(table_at(stack)), DynamoKeys(table_at(stack))
    key = first.key("page-token")
    assert len(key) == KEY_BYTES
    assert second.key("page-token") == key == first.key("page-token")
    assert DynamoKeys(table_at(stack)).key("another") not in (key, None)


def test_processes_asking_at_once_for_a_new_key_all_get_the_same(stack):
    processes = [DynamoKeys(table_at(stack)) for _ in range(8)]
    start, got = threading.Barrier(len(processes)), []

    def ask(keys):
        start.wait(30)
        got.append(keys.key("page-token"))

    threads = [threading.Thread(target=ask, args=(keys,)) for keys in processes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(got) == len(processes) and len(set(got)) == 1


@pytest.mark.parametrize("how", ["drop", "delay"])
def test_a_put_whose_answer_was_lost_reads_back_the_key_that_landed(stack, how):
    stub = DynamoStub(stack[0].endpoint_url)
    stub.delay_seconds = 1.6
    try:
        stub.lose_answer("PutItem", lambda request: KEY_PREFIX in str(request.get("Item")), how=how)
        key = DynamoKeys(table_at(stack, stub.url)).key("page-token")
        assert stub.lost == 1 and stub.operations["PutItem"] >= 2, "the put was sent again"
    finally:
        stub.close()
    assert DynamoKeys(table_at(stack)).key("page-token") == key
