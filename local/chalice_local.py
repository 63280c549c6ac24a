"""`chalice local`, as its own command line runs it, tuned for many clients and kept-alive
connections, with problem+json for what API Gateway would answer itself (local/gateway.py),
and its access log in the service's JSON shape.

- socketserver's default listen backlog of 5 resets connections when a burst of clients
  (twenty concurrent uploads, say) connects at once; API Gateway has no such limit.
- chalice's handler writes the status line and headers, then the body, straight to the
  socket. On a kept-alive connection the body then waits for the client's delayed ACK of the
  headers (Nagle's algorithm): about 40 ms on every request after the first. A buffered
  wfile sends the whole response in one write (http.server flushes it after each request),
  and TCP_NODELAY sends what is written at once, as the socketserver docs advise.
- Every request the app answers is logged by the app itself (app.py's middleware: the line
  `http_request`, as in the cloud, for every request with LOG_EVERY_REQUEST, the runner's
  default); this server writes the same line, in the same JSON, for the requests it answers
  on its own (no such route, say), and JSON for its own complaints.
"""
import os
import sys
import time
from urllib.parse import urlsplit

from chalice import local as chalice_local
from chalice.cli import main

from chalicelib.runtime import correlation
from chalicelib.runtime.logs import configure, get_logger
from local import gateway

chalice_local.ThreadedHTTPServer.request_queue_size = 128
chalice_local.ChaliceRequestHandler.wbufsize = -1  # io.DEFAULT_BUFFER_SIZE
chalice_local.ChaliceRequestHandler.disable_nagle_algorithm = True
log = get_logger("http")


class AccessLogHandler(gateway.ProblemRequestHandler):
    def handle_one_request(self) -> None:
        correlation.end()  # a kept-alive connection's last request is done
        self._started = None
        super().handle_one_request()

    def parse_request(self) -> bool:
        self._started = time.monotonic()  # from its request line, not from the idle wait
        return super().parse_request()

    def log_request(self, code="-", size="-") -> None:
        if correlation.current() is not None:
            return  # the app answered, and wrote the line itself if it was to be written
        started = getattr(self, "_started", None)
        # A request line http.server could not read leaves no method or path.
        log.info("http_request", method=getattr(self, "command", None),
                 route=urlsplit(getattr(self, "path", None) or "").path,
                 status=int(code) if str(code).isdigit() else code,
                 ms=round((time.monotonic() - started) * 1000, 1) if started else None)

    def log_message(self, format, *args) -> None:
        log.warning("http_server_message", message=format % args)


gateway.install(AccessLogHandler)

if __name__ == "__main__":
    configure()
    # The access log: a line for every request, as the runner sets it (app.py reads it).
    os.environ.setdefault("LOG_EVERY_REQUEST", "1")
    sys.argv[0] = "chalice"
    sys.exit(main())
