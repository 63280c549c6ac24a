"""An HTTP proxy in front of moto's server for DynamoDB's API, answering as DynamoDB does
where moto never does:

- conflicts: a fraction of the transactions that write an owner's item (`owner#...`) are
  cancelled with TransactionConflict on that item, and a fraction of the single writes of
  one answered TransactionConflictException, before they reach moto (nothing is written),
  as DynamoDB answers writes that overlap another transaction on the item;
- lost answers: a write reaches moto (it commits) and its answer is then dropped (the
  connection closed) or held past the client's read timeout, so botocore sends it again.

It keeps each call's attempts as botocore numbers them (its `amz-sdk-invocation-id` and
`amz-sdk-request` headers) and what became of each, so a test can tell the calls whose
answer may never have arrived (their last attempt's answer lost, and no attempt after it).

The bodies are DynamoDB's own, so botocore and PynamoDB parse them as they would from AWS.
"""
from __future__ import annotations

import http.client
import json
import random
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Optional
from urllib.parse import urlsplit

OWNER_PREFIX = "owner#"
_JSON = "application/x-amz-json-1.0"
# Headers that belong to one connection: not forwarded either way.
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


def cancelled(reasons: list[str]) -> dict:
    """DynamoDB's TransactionCanceledException body: one reason per item, in order."""
    return {
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
        "Message": "Transaction cancelled, please refer cancellation reasons for specific reasons "
                   f"[{', '.join(reasons)}]",
        "CancellationReasons": [
            {"Code": r, "Message": "Transaction is ongoing for the item"} if r == "TransactionConflict"
            else {"Code": r} for r in reasons],
    }


TRANSACTION_CONFLICT = {
    "__type": "com.amazonaws.dynamodb.v20120810#TransactionConflictException",
    "message": "Operation was rejected because there is an ongoing transaction for the item.",
}


def _attempt(headers) -> tuple[int, int]:
    """botocore's count of this attempt and of those it may make (`amz-sdk-request`)."""
    fields = dict(part.strip().partition("=")[::2] for part in headers.get("amz-sdk-request", "").split(";"))
    try:
        return int(fields["attempt"]), int(fields["max"])
    except (KeyError, ValueError):
        return 1, 1


def keys_of(operation: str, request: dict) -> list[str]:
    """The `pk` of each item the request writes, in order (a transaction's items)."""
    if operation == "TransactWriteItems":
        found = []
        for item in request.get("TransactItems", []):
            (action, body), = item.items()
            found.append((body.get("Item") or body.get("Key") or {}).get("pk", {}).get("S", ""))
        return found
    if operation in ("PutItem",):
        return [request.get("Item", {}).get("pk", {}).get("S", "")]
    if operation in ("UpdateItem", "DeleteItem"):
        return [request.get("Key", {}).get("pk", {}).get("S", "")]
    return []


class DynamoStub:
    """Start it with the moto endpoint; point a store's `host` at `url`. Thread-safe."""

    def __init__(self, target: str, seed: int = 0):
        self._target = urlsplit(target)
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        # Conflicts: the fraction of writes of an owner's item refused.
        self.conflict_fraction = 0.0
        # Lost answers: (operation, predicate on the request, how, count) rules, used up in
        # order; and a fraction of every write's answers lost at random.
        self._losses: list[list] = []
        self.lose_fraction = 0.0
        self.lose_how: tuple[str, ...] = ("drop",)  # each loss drawn from these: "drop", "delay"
        self.delay_seconds = 0.0  # how long a delayed answer is held
        # What the stub did, for the tests' assertions.
        self.conflicts = 0
        self.lost = 0
        self.requests = 0
        self.operations: Counter = Counter()  # requests by operation
        # Each call's attempts: invocation id -> [(operation, attempt, max, fate)], fate one of
        # "answered", "conflict", "drop", "delay".
        self.calls: dict[str, list[tuple[str, int, int, str]]] = {}
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def lose_answer(self, operation: str, match: Callable[[dict], bool] = lambda request: True,
                    how: str = "drop", count: int = 1) -> None:
        """The next `count` requests of `operation` that `match` commit, and their answers
        are lost (`how`: "drop" or "delay", by delay_seconds)."""
        with self._lock:
            self._losses.append([operation, match, how, count])

    # -- deciding ---------------------------------------------------------------------------
    def _conflict(self, operation: str, request: dict) -> Optional[dict]:
        keys = keys_of(operation, request)
        owners = [k.startswith(OWNER_PREFIX) for k in keys]
        if not any(owners) or operation not in ("TransactWriteItems", "UpdateItem", "PutItem"):
            return None
        with self._lock:
            if self._random.random() >= self.conflict_fraction:
                return None
            self.conflicts += 1
        if operation == "TransactWriteItems":
            return cancelled(["TransactionConflict" if owner else "None" for owner in owners])
        return TRANSACTION_CONFLICT

    def unanswered(self, operation: str) -> list[str]:
        """The calls of `operation` whose last attempt's answer was lost (dropped, or held:
        possibly past the client's patience): those that botocore may have given up on, its
        attempts run out or no more made (its retry quota, the time budget)."""
        with self._lock:
            return [call for call, attempts in self.calls.items()
                    if attempts[-1][0] == operation and attempts[-1][3] in ("drop", "delay")]

    def _record(self, headers, operation: str, fate: str) -> None:
        call = headers.get("amz-sdk-invocation-id")
        if call is None:
            return
        attempt, most = _attempt(headers)
        with self._lock:
            self.calls.setdefault(call, []).append((operation, attempt, most, fate))

    def _loss(self, operation: str, request: dict) -> Optional[str]:
        with self._lock:
            for rule in self._losses:
                if rule[0] == operation and rule[3] > 0 and rule[1](request):
                    rule[3] -= 1
                    self.lost += 1
                    return rule[2]
            if keys_of(operation, request) and self._random.random() < self.lose_fraction:
                self.lost += 1
                return self._random.choice(self.lose_how)
        return None

    def _handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                self.do_POST()

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                operation = self.headers.get("X-Amz-Target", "").rpartition(".")[2]
                try:
                    request = json.loads(body or b"{}")
                except ValueError:
                    request = {}
                with stub._lock:
                    stub.requests += 1
                    stub.operations[operation] += 1
                refusal = stub._conflict(operation, request)
                if refusal is not None:
                    stub._record(self.headers, operation, "conflict")
                    return self._answer(400, {"Content-Type": _JSON}, json.dumps(refusal).encode())
                loss = stub._loss(operation, request)
                stub._record(self.headers, operation, loss or "answered")
                status, headers, answer = stub._forward(self.command, self.path, self.headers, body)
                if loss == "drop":
                    # The write is done; the client hears nothing and sends it again.
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                if loss == "delay":
                    time.sleep(stub.delay_seconds)
                self._answer(status, headers, answer)

            def _answer(self, status: int, headers: dict, body: bytes) -> None:
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    self.close_connection = True  # the client gave up waiting

        return Handler

    def _forward(self, method: str, path: str, headers, body: bytes) -> tuple[int, dict, bytes]:
        connection = http.client.HTTPConnection(self._target.hostname, self._target.port, timeout=60)
        try:
            sent = {k: v for k, v in headers.items() if k.lower() not in _HOP}
            sent["Host"] = self._target.netloc
            connection.request(method, path, body, sent)
            response = connection.getresponse()
            answer = response.read()
            kept = {k: v for k, v in response.getheaders() if k.lower() not in _HOP}
            return response.status, kept, answer
        finally:
            connection.close()
