"""Keys on DynamoDB through PynamoDB: one item per secret, `key#<name>`, in the jobs table (no
status or sweep_at, so the due index never sees it; no TTL: a key is kept for good).

A secret every API process shares without an operator choosing one: the first process that
needs it makes it at random with a conditional put, and every process reads what the table
holds, once. Kept as it is, as the webhooks' signing secrets are (the table is encrypted at
rest); whoever may read the table may read the jobs the key guards anyway.
"""
from __future__ import annotations

import secrets
import threading
from contextlib import suppress

from pynamodb.attributes import BinaryAttribute, UnicodeAttribute
from pynamodb.models import Model

from chalicelib.adapters.dynamo_table import DynamoTable, dynamo_errors, find
from chalicelib.domain.errors import ConditionFailed, TransientError

KEY_PREFIX = "key#"
KEY_BYTES = 32  # HMAC-SHA256's block of strength
_ERROR = "keys unavailable"


class KeyItem(Model):
    """Unbound: DynamoKeys binds a subclass to the table."""

    pk = UnicodeAttribute(hash_key=True)
    secret = BinaryAttribute(legacy_encoding=False)


class DynamoKeys:
    def __init__(self, table: DynamoTable):
        self._model = table.model(KeyItem)
        table.connect(self._model)
        self._known: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def key(self, name: str) -> bytes:
        with self._lock:  # once a process: the threads of a cold one wait for the first read
            if name not in self._known:
                self._known[name] = self._read_or_make(KEY_PREFIX + name)
            return self._known[name]

    def _read_or_make(self, pk: str) -> bytes:
        m = self._model
        with dynamo_errors(_ERROR):
            item = find(m, pk)
        if item is None:
            # Refused: another process made it first, or this put landed and botocore sent it
            # again. Either way the key is what the table holds now.
            with suppress(ConditionFailed), dynamo_errors(_ERROR, conditional=True):
                m(pk, secret=secrets.token_bytes(KEY_BYTES)).save(condition=m.pk.does_not_exist())
            with dynamo_errors(_ERROR):
                item = find(m, pk)
        if item is None:
            raise TransientError(_ERROR)
        return item.secret
