"""The web page (web/) on its own port, with a dev token: local mode only.

A thread of the local runner, not a Chalice route: app.py is what the cloud deploys, and the
cloud must never hand out tokens. Here the page and the API are on different ports, so the
browser checks the API's and the bucket's CORS exactly as it would against the cloud.

GET /config.json answers {"api", "token", "max_upload_bytes", "multipart_min_bytes",
"formats"}: the API's address, a fresh HS256 token for the subject WEB_SUBJECT, the size over
which the page uploads straight to storage, the size from which it sends parts, and the extra
formats the stage makes (RENDITION_FORMATS), which the page asks for on every upload. Only
pages of this server can read it: it has
no CORS header, and the Host must be this server's own (no DNS rebinding).
"""
from __future__ import annotations

import json
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from chalicelib.http.auth import mint_token
from chalicelib.runtime.logs import get_logger

WEB_ROOT = Path(__file__).resolve().parent.parent / "web"
TOKEN_TTL_SECONDS = 12 * 3600
log = get_logger("web")


class PageServer:
    """Serves web/ and /config.json on host:port until stop()."""

    def __init__(self, host: str, port: int, api_url: str, storage_url: str | None,
                 jwt_secret: str, subject: str, max_upload_bytes: int, multipart_min_bytes: int,
                 formats: tuple[str, ...] = (), push_url: str | None = None):
        def config() -> dict:
            token = mint_token(subject, jwt_secret, TOKEN_TTL_SECONDS, int(time.time()))
            return {"api": api_url, "token": token, "max_upload_bytes": max_upload_bytes,
                    "multipart_min_bytes": multipart_min_bytes, "formats": list(formats)}

        handler = partial(_Handler, config=config, csp=_csp(api_url, storage_url, push_url),
                          directory=str(WEB_ROOT))
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self.url = f"http://{host}:{self._server.server_port}/"
        self._thread = threading.Thread(target=self._server.serve_forever, name="web", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _csp(api_url: str, storage_url: str | None, push_url: str | None = None) -> str:
    """Scripts only from here; network only to the API, storage (presigned URLs) and the
    push socket."""
    storage = _origin(storage_url) if storage_url else "https:"
    push = f" {_origin(push_url)}" if push_url else ""
    return (f"default-src 'self'; script-src 'self'; style-src 'self'; "
            f"connect-src 'self' {_origin(api_url)} {storage}{push}; img-src 'self' {storage} blob: data:; "
            f"object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'")


class _Handler(SimpleHTTPRequestHandler):
    def __init__(self, *args, config, csp: str, **kwargs):
        self._config = config
        self._csp = csp
        super().__init__(*args, **kwargs)

    def do_GET(self):
        if not self._own_host():
            self.send_error(421, "Misdirected Request")
            return
        if urlsplit(self.path).path == "/config.json":
            body = json.dumps(self._config()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def do_HEAD(self):
        if not self._own_host():
            self.send_error(421, "Misdirected Request")
            return
        super().do_HEAD()

    def _own_host(self) -> bool:
        host, port = self.server.server_address[:2]
        return self.headers.get("Host", "") in {f"{host}:{port}", f"localhost:{port}"}

    def end_headers(self):
        # Always fresh (the page changes while one develops it; config.json holds a token).
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Security-Policy", self._csp)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        super().end_headers()

    def list_directory(self, path):
        self.send_error(404, "File not found")
        return None

    def log_message(self, format, *args):
        log.info("web_request", line=format % args)
