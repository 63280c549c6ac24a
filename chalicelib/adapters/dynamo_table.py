"""The one DynamoDB table every store keeps its items in, through PynamoDB: where it is, how
long a call may take, the item models bound to it, and what its refusals mean.

Jobs, idempotency records, owners' quota places, rates, wait and delivery slots, webhooks,
push connections and the deployment's own keys are all items of this table, told apart by
their key's prefix.
"""
from __future__ import annotations

import random
import time
import uuid
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

from pynamodb.connection import Connection
from pynamodb.exceptions import DoesNotExist, PynamoDBException, TransactWriteError
from pynamodb.models import Model

from chalicelib.adapters.botocore_clients import Clients
from chalicelib.domain.errors import ConditionFailed, TransientError
from chalicelib.runtime import deadline

# Fail fast so an API call can answer 503 instead of hanging a client; bootstrap.py passes
# limits derived from the functions' timeouts (chalicelib/runtime/deadline.py) instead.
CONNECTION = {"connect_timeout_seconds": 2, "read_timeout_seconds": 5, "max_retry_attempts": 2}
# DynamoDB cancels a write that overlaps a transaction on one of its items (TransactionConflict
# among a transaction's reasons, TransactionConflictException for a single write), and
# botocore retries neither: many uploads by one owner overlap on the owner's item. Tried this
# many more times, after a pause drawn up to a cap that doubles from the first (full jitter).
CONFLICT_RETRIES = 8
_CONFLICT_PAUSE = 0.02
_CONFLICT_PAUSE_MAX = 1.0


class SharedConnection(Connection):
    """PynamoDB's connection with its botocore client made from the shared session.

    PynamoDB would start a botocore session for each model, for transactions and for each
    thread, and each new session parses botocore's endpoint table again (tens of ms)."""

    def __init__(self, clients: Clients, prepare: Callable[[Any], Any], **kwargs):
        super().__init__(**kwargs)
        self._clients = clients
        self._prepare = prepare
        self._prepared: Any = None

    @property
    def session(self):
        return self._clients.session

    @property
    def client(self):
        with self._clients.lock:  # botocore's client creation is not thread-safe
            client = super().client
            if client is not self._prepared:  # PynamoDB remakes it when credentials go stale
                self._prepared = self._prepare(client)
            return client

    def serve(self, *models: type[Model]) -> None:
        """Be the connection of these models, so that they (and transactions) share one botocore
        client. PynamoDB 6.1 has no public way to hand a model its connection (its issue
        #1245). The first model's table description is the one kept (it knows the indexes)."""
        tables = [model._get_connection() for model in models]
        self.add_meta_table(tables[0].get_meta_table())
        for table_connection in tables:
            table_connection.connection = self


class DynamoTable:
    """The table and endpoint every store is bound to. `connection`: PynamoDB's timeouts and
    retries; `prepare_client` gets the botocore client once it is made (the time budget's
    hooks go on here)."""

    def __init__(self, name: str, region: str, host: Optional[str], clients: Optional[Clients] = None,
                 connection: Optional[dict] = None,
                 prepare_client: Callable[[Any], Any] = lambda client: client):
        self.name = name
        self.region = region
        self.host = host
        self._clients = clients
        self._settings = connection or CONNECTION
        self._prepare = prepare_client

    def model(self, base: type[Model], **attributes) -> type[Model]:
        """A subclass of an unbound item model bound to this table (`attributes`: its indexes)."""
        meta = type("Meta", (), {"table_name": self.name, "region": self.region, "host": self.host,
                                 **self._settings})
        return type(f"Bound{base.__name__}", (base,), {"Meta": meta, **attributes})

    def connect(self, *models: type[Model]) -> SharedConnection:
        """A connection serving these models (bound by model()): one botocore client for them."""
        connection = SharedConnection(self._clients or Clients(self.region), self._prepare,
                                      region=self.region, host=self.host, **self._settings)
        connection.serve(*models)
        return connection


def _condition_failed(error: PynamoDBException) -> bool:
    return getattr(error, "cause_response_code", None) == "ConditionalCheckFailedException"


@contextmanager
def dynamo_errors(unavailable: str, conditional: bool = False) -> Iterator[None]:
    """PynamoDB's errors as the project's: TransientError(unavailable) for any (throttled,
    timed out, unreachable, a cancelled transaction its caller did not read). `conditional`:
    the calls inside are writes with a condition, and a failed one is ConditionFailed. Around
    anything else (a read, a transaction, an unconditional write) ConditionalCheckFailed is no
    answer DynamoDB gives, and stays an outage rather than pass for a refusal."""
    try:
        yield
    except PynamoDBException as error:
        if conditional and _condition_failed(error):
            raise ConditionFailed() from error
        raise TransientError(unavailable) from error


def new_write_id() -> str:
    return uuid.uuid4().hex


def written_once(write: Callable[[str], Any], read: Callable[[], Optional[Model]]) -> Optional[Model]:
    """write(write_id), a conditional write that stores a fresh `write_id` in its item and
    raises ConditionFailed when refused. botocore sends a write again after a lost answer,
    and the re-send of one that landed fails its own condition: so a refused write reads the
    item (read()) and, if it carries this write's id, it landed and the item is returned as
    the write's own; else ConditionFailed. None when the write succeeded at once. Never
    compare the whole item instead: others write between the send and the re-send."""
    write_id = new_write_id()
    try:
        write(write_id)
    except ConditionFailed:
        item = read()
        if item is None or getattr(item, "write_id", None) != write_id:
            raise
        return item
    return None


def find(model: type[Model], pk: str, **kwargs) -> Optional[Model]:
    """The item with key `pk`, read strongly consistent as every store reads; None if none."""
    try:
        return model.get(pk, consistent_read=True, **kwargs)
    except DoesNotExist:
        return None


def found_item(error: TransactWriteError, index: int) -> Optional[dict]:
    """The item a cancelled transaction's `index`th write found (ALL_OLD), if it says."""
    reasons = error.cancellation_reasons or []
    reason = reasons[index] if index < len(reasons) else None
    return reason.raw_item if reason is not None and reason.code == "ConditionalCheckFailed" else None


def reason_codes(error: TransactWriteError) -> list[Optional[str]]:
    """A cancelled transaction's reason codes, one per item in the order written."""
    return [getattr(r, "code", None) for r in (error.cancellation_reasons or [])]


def _conflict(error: PynamoDBException, on_key: bool) -> bool:
    """Whether DynamoDB refused the write for a transaction in flight on one of its items
    (only on other items than the first, the key's, when `on_key`)."""
    if isinstance(error, TransactWriteError):
        codes = reason_codes(error)
        if on_key and codes[:1] == ["TransactionConflict"]:
            return False
        return "TransactionConflict" in codes and "ConditionalCheckFailed" not in codes
    return getattr(error, "cause_response_code", None) == "TransactionConflictException"


def retrying_conflicts(call: Callable[[], Any], on_key: bool = False) -> Any:
    """call(), tried again after a jittered pause while DynamoDB answers a conflict, as many
    times as CONFLICT_RETRIES and the invocation's time allow; then the conflict is raised."""
    for retry in range(CONFLICT_RETRIES + 1):
        try:
            return call()
        except PynamoDBException as error:
            if not _conflict(error, on_key) or retry == CONFLICT_RETRIES or not deadline.has_time_for(1):
                raise
        time.sleep(random.uniform(0, min(_CONFLICT_PAUSE_MAX, _CONFLICT_PAUSE * 2 ** retry)))
