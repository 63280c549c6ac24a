"""`chalice local`, as its own command line runs it, with a deeper listen backlog and
problem+json for what API Gateway would answer itself (local/gateway.py).

socketserver's default backlog of 5 resets connections when a burst of clients (twenty
concurrent uploads, say) connects at once; API Gateway has no such limit.
"""
import sys

from chalice import local as chalice_local
from chalice.cli import main

from local import gateway

chalice_local.ThreadedHTTPServer.request_queue_size = 128
gateway.install()

if __name__ == "__main__":
    sys.argv[0] = "chalice"
    sys.exit(main())
