"""The local stand-in for API Gateway's WebSocket API (local/push_gateway.py) does what the
cloud's does with a client's messages when the API has no $default route: it answers each
with the error frame API Gateway sends, runs no handler, and keeps the connection open."""
from __future__ import annotations

import json
import socket
import threading
import time

import pytest
import requests
from websockets.sync.client import connect

from local.ports import PortTaken, ensure_free
from local.push_gateway import PushGateway
from tests.conftest import free_port


def test_a_clients_messages_run_nothing_and_are_answered_as_api_gateway_answers_them():
    runs: dict[str, int] = {"$connect": 0, "$disconnect": 0}
    lock = threading.Lock()

    def handler(route, answer=None):
        def run(event, context):
            with lock:
                runs[route] += 1
            return answer
        return run

    accepted = {"statusCode": 200, "headers": {"Sec-WebSocket-Protocol": "image-jobs.v1"}}
    gateway = PushGateway("127.0.0.1", free_port(), free_port(), handler("$connect", accepted),
                          handler("$disconnect"))
    gateway.start()
    try:
        with connect(gateway.url, subprotocols=["image-jobs.v1"], open_timeout=10) as socket:
            for n in range(300):
                socket.send(json.dumps({"type": "keepalive", "n": n}) if n % 2 else "hello")
            answers = [json.loads(socket.recv(timeout=10)) for _ in range(300)]
            assert {a["message"] for a in answers} == {"Forbidden"}
            (connection,) = {a["connectionId"] for a in answers}
            socket.ping().wait(10)  # a control frame: answered by the gateway, runs nothing
            # Still open, and still pushed to.
            posted = requests.post(f"{gateway.management_url}/local/@connections/{connection}",
                                   data=b'{"type":"job"}', timeout=10)
            assert posted.status_code == 200
            assert json.loads(socket.recv(timeout=10)) == {"type": "job"}
            assert runs == {"$connect": 1, "$disconnect": 0}
        deadline = time.monotonic() + 10
        while runs["$disconnect"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert runs == {"$connect": 1, "$disconnect": 1}
    finally:
        gateway.stop()


@pytest.mark.parametrize("taken", ["websocket", "management"])
def test_a_taken_port_fails_the_gateway_at_once_naming_it_and_leaves_the_other_free(taken):
    """Bound as it is made, not later in its loop: the runner names the port and its setting."""
    ports = {"websocket": free_port(), "management": free_port()}
    with socket.create_server(("127.0.0.1", ports[taken])):
        with pytest.raises(PortTaken) as raised:
            PushGateway("127.0.0.1", ports["websocket"], ports["management"], print, print)
    assert raised.value.port == ports[taken]
    for port in ports.values():
        ensure_free("127.0.0.1", port)
