"""`chalice local`, as its own command line runs it, tuned for many clients and kept-alive
connections, with problem+json for what API Gateway would answer itself (local/gateway.py).

- socketserver's default listen backlog of 5 resets connections when a burst of clients
  (twenty concurrent uploads, say) connects at once; API Gateway has no such limit.
- chalice's handler writes the status line and headers, then the body, straight to the
  socket. On a kept-alive connection the body then waits for the client's delayed ACK of the
  headers (Nagle's algorithm): about 40 ms on every request after the first. A buffered
  wfile sends the whole response in one write (http.server flushes it after each request),
  and TCP_NODELAY sends what is written at once, as the socketserver docs advise.
"""
import sys

from chalice import local as chalice_local
from chalice.cli import main

from local import gateway

chalice_local.ThreadedHTTPServer.request_queue_size = 128
chalice_local.ChaliceRequestHandler.wbufsize = -1  # io.DEFAULT_BUFFER_SIZE
chalice_local.ChaliceRequestHandler.disable_nagle_algorithm = True
gateway.install()

if __name__ == "__main__":
    sys.argv[0] = "chalice"
    sys.exit(main())
