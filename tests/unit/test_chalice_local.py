"""The local API server (local/chalice_local.py) on a kept-alive connection: each response
leaves in one write, with Nagle's algorithm off, so no response waits for a delayed ACK."""
from __future__ import annotations

import http.client
import io
import socket
import threading

import pytest
from chalice import Chalice
from chalice import local as chalice_local
from chalice.config import Config

import local.chalice_local  # noqa: F401  (applies the server settings under test)


class _RecordingIO(socket.SocketIO):
    def __init__(self, sock: socket.socket, writes: list[bytes]):
        super().__init__(sock, "wb")
        self._writes = writes

    def write(self, data):
        self._writes.append(bytes(data))
        return super().write(data)


class _RecordingSocket:
    """The accepted socket, noting its options and every write that reaches the kernel."""

    def __init__(self, sock: socket.socket):
        self._sock = sock
        self.options: dict[tuple[int, int], int] = {}
        self.writes: list[bytes] = []

    def setsockopt(self, level, option, value):
        self.options[level, option] = int(value)
        self._sock.setsockopt(level, option, value)

    def sendall(self, data):  # what an unbuffered wfile (wbufsize 0) calls
        self.writes.append(bytes(data))
        self._sock.sendall(data)

    def makefile(self, mode, buffering=None):
        if "w" not in mode:
            return self._sock.makefile(mode, buffering)
        raw = _RecordingIO(self._sock, self.writes)
        if buffering == 0:
            return raw
        size = io.DEFAULT_BUFFER_SIZE if buffering in (None, -1) else buffering
        return io.BufferedWriter(raw, size)

    def __getattr__(self, name):
        return getattr(self._sock, name)


class _RecordingServer(chalice_local.ThreadedHTTPServer):
    accepted: list[_RecordingSocket]

    def get_request(self):
        sock, address = super().get_request()
        wrapped = _RecordingSocket(sock)
        self.accepted.append(wrapped)
        return wrapped, address


@pytest.fixture
def server():
    app = Chalice(app_name="keep-alive")

    @app.route("/ping")
    def ping():
        return {"pong": True, "padding": "x" * 300}

    _RecordingServer.accepted = []
    dev = chalice_local.LocalDevServer(app, Config.create(), "127.0.0.1", 0,
                                       server_cls=_RecordingServer)
    thread = threading.Thread(target=dev.serve_forever, daemon=True)
    thread.start()
    yield dev.server
    dev.shutdown()
    dev.server.server_close()
    thread.join(5)


def test_kept_alive_responses_leave_in_one_write_each_with_nagle_off(server):
    connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
    bodies = []
    for _ in range(3):
        connection.request("GET", "/ping")
        response = connection.getresponse()
        assert response.status == 200
        assert response.getheader("Connection") != "close"
        bodies.append(response.read())
    connection.close()

    assert all(b'"pong":true' in body.replace(b" ", b"") for body in bodies)
    [sock] = server.accepted  # all three requests went over one connection
    assert sock.options.get((socket.IPPROTO_TCP, socket.TCP_NODELAY)) == 1
    # Headers and body together: one write per response, never headers then body.
    assert len(sock.writes) == 3
    assert all(write.startswith(b"HTTP/1.1 200") and write.endswith(body)
               for write, body in zip(sock.writes, bodies))
