"""A TCP port that forwards to another and can be cut: a backend 'failing for a while'."""
from __future__ import annotations

import socket
import threading
import time


class TcpProxy:
    """A port that forwards to another and can be cut: storage 'failing for a while'."""

    def __init__(self, target_port: int):
        self.target = ("127.0.0.1", target_port)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        self._server = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._to_drop = 0
        self.dropped = 0  # answers cut so far by drop_answers()
        self.bytes_up = 0  # bytes the clients sent through to the target, requests' heads included
        self.pause = 0.0  # seconds after each chunk sent up: a slow uplink, so a send takes a while
        self.accepted = 0  # connections taken so far
        self.up()

    def up(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(64)
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def down(self) -> None:
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            # shutdown() wakes the thread blocked in accept(); close() alone would leave the
            # kernel's listening socket accepting until that call returned.
            try:
                server.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            server.close()
        with self._lock:
            for conn in self._conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                conn.close()
            self._conns.clear()

    def drop_answers(self, count: int = 1) -> None:
        """Cut each of the next `count` connections at the first byte of the answer: the
        request reached the server, which did the work and answered; the client hears nothing."""
        with self._lock:
            self._to_drop += count

    def _accept(self, server) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._server is not server:
                    # Cut while this one was being connected: down() has already cleared the
                    # connections it knew, so this one must not live through the outage.
                    client.close()
                    upstream.close()
                    return
                self.accepted += 1
                self._conns += [client, upstream]
                drop, self._to_drop = self._to_drop > 0, max(0, self._to_drop - 1)
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            answer = self._cut_at_answer if drop else self._pump
            threading.Thread(target=answer, args=(upstream, client), daemon=True).start()

    def _cut_at_answer(self, upstream, client) -> None:
        try:
            upstream.recv(1)  # the server has started answering: its work is done
        except OSError:
            pass
        with self._lock:
            self.dropped += 1
        for s in (client, upstream):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _pump(self, src, dst, counted: bool = False) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                if counted:
                    with self._lock:
                        self.bytes_up += len(data)
                    if self.pause:
                        time.sleep(self.pause)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
