"""`chalice local`, as its own command line runs it, with a deeper listen backlog.

socketserver's default backlog of 5 resets connections when a burst of clients (twenty
concurrent uploads, say) connects at once; API Gateway has no such limit.
"""
import sys

from chalice import local as chalice_local
from chalice.cli import main

chalice_local.ThreadedHTTPServer.request_queue_size = 128

if __name__ == "__main__":
    sys.argv[0] = "chalice"
    sys.exit(main())
