"""LocalStack's runtime, started by local/localstack.py with LocalStack's own Python (3.13).

The same as `python -m localstack.runtime.main`, except for one thing: LocalStack 2026.3's
twisted gateway ignores the host of GATEWAY_LISTEN for IPv4 addresses ("TODO: interface = host?"
in localstack/runtime/server/twisted.py) and listens on every interface. Here it is handed the
host, so that LocalStack answers on 127.0.0.1 only.
"""
import os

from twisted.internet import endpoints

import localstack.runtime.server.twisted as gateway_server

LISTEN_HOST = os.environ["GATEWAY_LISTEN"].rsplit(":", 1)[0]


class _LoopbackEndpoints:
    """Stands in for twisted.internet.endpoints in that one module."""

    TCP6ServerEndpoint = endpoints.TCP6ServerEndpoint

    @staticmethod
    def TCP4ServerEndpoint(reactor, port, backlog=50, interface=""):
        return endpoints.TCP4ServerEndpoint(reactor, port, backlog, interface or LISTEN_HOST)


assert gateway_server.endpoints is endpoints, "LocalStack's gateway changed: check this patch"
gateway_server.endpoints = _LoopbackEndpoints

from localstack.runtime.main import main  # noqa: E402  (after the patch)

main()
