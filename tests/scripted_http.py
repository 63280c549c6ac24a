"""An HTTP server on a free loopback port that answers each GET as a test scripts it, and
keeps every request's path and headers: for what local/ polls (LocalStack's init, the API)."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedServer:
    """answer(path, headers) -> (status, JSON-able body, or bytes as they are)."""

    def __init__(self, answer):
        self.answer = answer
        self.requests: list[tuple[str, dict]] = []
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                scripted.requests.append((self.path, dict(self.headers)))
                status, body = scripted.answer(self.path, self.headers)
                raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *_):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_):
        self.server.shutdown()
        self.server.server_close()
