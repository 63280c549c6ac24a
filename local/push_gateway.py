"""API Gateway's WebSocket API, played locally (`chalice local` serves no WebSockets).

Two ports: the WebSocket one clients connect to, and the management API that
PostToConnection (app.websocket_api.send, or chalicelib/adapters/apigw_push.py) posts to.
The app's own handlers run for each connect and disconnect, given events in API Gateway's
shape; a connect is refused with the status the handler answers, before any upgrade, as
API Gateway does. The API has no $default route, so a client's message runs nothing: it is
answered with the error frame API Gateway sends when no route matches (`no_route`), and the
connection stays open; ping frames are answered with pong. A send is handed to the
connection and answered at once, never waiting for the client to read it, so a slow client
delays no one: past `MAX_PENDING` unsent messages its connection is closed (API Gateway
drops such a client too).
"""
from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import socket
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Optional

from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from chalicelib.runtime.logs import get_logger
from local.ports import binding

log = get_logger("push_gateway")
STAGE = "local"
API_ID = "local"
MAX_PENDING = 256
_SEQUENCE = itertools.count()


def no_route(cid: str) -> str:
    """What API Gateway sends back for a message that matches no route when there is no
    $default route: no function runs, the connection stays open."""
    return json.dumps({"message": "Forbidden", "connectionId": cid, "requestId": connection_id()})


def connection_id() -> str:
    """API Gateway's are 16 characters of base64-ish text, e.g. `L0SM9cOFvHcCIhw=`."""
    return secrets.token_urlsafe(12)


class PushGateway:
    def __init__(self, host: str, port: int, management_port: int, connect: Callable, disconnect: Callable):
        self.host, self.port, self.management_port = host, port, management_port
        self._connect, self._disconnect = connect, disconnect
        self._connections: dict[str, ServerConnection] = {}
        self._pending: dict[str, int] = {}
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._stop: Optional[asyncio.Future] = None
        # Both ports bound here, so that a taken one fails the caller at once (PortTaken).
        with binding(port):
            self._socket = socket.create_server((host, port))
        try:
            with binding(management_port):
                self._management = ThreadingHTTPServer((host, management_port), _management_handler(self))
        except BaseException:
            self._socket.close()
            raise
        self._management.daemon_threads = True

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    @property
    def management_url(self) -> str:
        return f"http://{self.host}:{self.management_port}"

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        threading.Thread(target=self._loop.run_forever, name="push-gateway", daemon=True).start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        threading.Thread(target=self._management.serve_forever, name="push-management", daemon=True).start()
        if not self._started.wait(10):
            raise RuntimeError("the push gateway did not start")

    def stop(self) -> None:
        self._management.shutdown()
        self._management.server_close()
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set_result, None)
        time.sleep(0.1)
        self._loop.call_soon_threadsafe(self._loop.stop)

    async def _serve(self) -> None:
        self._stop = self._loop.create_future()
        async with serve(self._handle, sock=self._socket, process_request=self._on_connect,
                         select_subprotocol=self._subprotocol, ping_interval=None):
            self._started.set()
            await self._stop

    # -- the WebSocket side ---------------------------------------------------------------
    def _event(self, route: str, connection: str, headers: Optional[Headers] = None) -> dict:
        context = {"routeKey": route, "eventType": {"$connect": "CONNECT", "$disconnect": "DISCONNECT"}
                   .get(route, "MESSAGE"), "connectionId": connection, "domainName": f"{self.host}:{self.port}",
                   "stage": STAGE, "apiId": API_ID, "requestId": str(next(_SEQUENCE)),
                   "connectedAt": int(time.time() * 1000), "requestTimeEpoch": int(time.time() * 1000)}
        event = {"requestContext": context, "isBase64Encoded": False}
        if headers is not None:
            event["headers"] = {k: v for k, v in headers.raw_items()}
            event["multiValueHeaders"] = {k: headers.get_all(k) for k in headers}
        return event

    async def _on_connect(self, connection: ServerConnection, request: Request) -> Optional[Response]:
        connection.push_id = connection_id()
        event = self._event("$connect", connection.push_id, request.headers)
        answer = await self._loop.run_in_executor(None, self._connect, event, None)
        status = int((answer or {}).get("statusCode", 200))
        if status // 100 != 2:
            return connection.respond(HTTPStatus(status), "")
        connection.push_protocol = ((answer or {}).get("headers") or {}).get("Sec-WebSocket-Protocol")
        return None

    @staticmethod
    def _subprotocol(connection: ServerConnection, offered):
        chosen = getattr(connection, "push_protocol", None)
        return chosen if chosen in offered else None

    async def _handle(self, connection: ServerConnection) -> None:
        cid = connection.push_id
        with self._lock:
            self._connections[cid] = connection
            self._pending[cid] = 0
        try:
            async for _ in connection:
                await connection.send(no_route(cid))
        except Exception:
            pass
        finally:
            with self._lock:
                self._connections.pop(cid, None)
                self._pending.pop(cid, None)
            await self._loop.run_in_executor(None, self._disconnect, self._event("$disconnect", cid), None)

    # -- the management API ---------------------------------------------------------------
    def post(self, cid: str, data: bytes) -> bool:
        """False: no such connection (GoneException)."""
        with self._lock:
            connection = self._connections.get(cid)
            if connection is None:
                return False
            if self._pending[cid] >= MAX_PENDING:
                log.warning("push_client_too_slow", connection_id=cid)
                asyncio.run_coroutine_threadsafe(connection.close(1008, "too slow"), self._loop)
                return True
            self._pending[cid] += 1
        asyncio.run_coroutine_threadsafe(self._send(cid, connection, data.decode()), self._loop)
        return True

    async def _send(self, cid: str, connection: ServerConnection, text: str) -> None:
        try:
            await connection.send(text)
        except Exception:
            pass
        finally:
            with self._lock:
                if cid in self._pending:
                    self._pending[cid] -= 1

    def close(self, cid: str) -> bool:
        with self._lock:
            connection = self._connections.get(cid)
        if connection is None:
            return False
        asyncio.run_coroutine_threadsafe(connection.close(), self._loop)
        return True


def _management_handler(gateway: PushGateway):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _connection(self) -> Optional[str]:
            path = self.path.split("?", 1)[0].rstrip("/")
            marker = "/@connections/"
            return path.split(marker, 1)[1] if marker in path else None

        def _answer(self, status: int, error: Optional[str] = None) -> None:
            body = json.dumps({"message": error}).encode() if error else b""
            self.send_response(status)
            if error:
                self.send_header("x-amzn-ErrorType", error)  # how botocore names the exception
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            cid = self._connection()
            if cid is None:
                return self._answer(404, "NotFoundException")
            self._answer(200) if gateway.post(cid, data) else self._answer(410, "GoneException")

        def do_DELETE(self):
            cid = self._connection()
            self._answer(204) if cid and gateway.close(cid) else self._answer(410, "GoneException")

        def log_message(self, format, *args):
            pass

    return Handler
