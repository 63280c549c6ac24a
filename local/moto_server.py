"""moto's server, with DynamoDB's per-item atomicity.

DynamoDB applies each conditional write atomically: of two writers racing on one item,
exactly one condition holds. moto's threaded server checks a condition and writes in two
steps without a lock, so under load two racing claims can both win there. The service's
correctness rests on that atomicity (claims, idempotency keys, quotas), so the embedded
stack serialises DynamoDB requests; S3 and SQS stay concurrent.
"""
from __future__ import annotations

import threading

from moto import server
from moto.moto_server.werkzeug_app import DomainDispatcherApplication

_dynamodb = threading.Lock()
_dispatch = DomainDispatcherApplication.__call__


def _serialised(self, environ, start_response):
    if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
        with _dynamodb:
            return _dispatch(self, environ, start_response)
    return _dispatch(self, environ, start_response)


DomainDispatcherApplication.__call__ = _serialised

if __name__ == "__main__":
    server.main()
