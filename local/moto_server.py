"""`python -m local.moto_server`: moto's server, made to behave as the real services do where
the service relies on it.

- DynamoDB applies each conditional write atomically: of two writers racing on one item,
  exactly one condition holds. moto's threaded server checks a condition and writes in two
  steps without a lock, so under load two racing claims can both win there. The service's
  correctness rests on that atomicity (claims, idempotency keys, quotas), so DynamoDB
  requests are serialised here; S3 and SQS stay concurrent.
- By default moto's server answers every cross-origin request with "allow all" (flask-cors),
  so a bucket without CORS would work here and fail in the cloud. That is turned off
  (MOTO_DISABLE_GLOBAL_CORS=true, set before moto is imported) so the bucket's own CORS rules
  from infra/template.yaml decide, as in S3. moto 5.2 then honours them on preflights and on
  reads, but leaves them off the answer to a browser's form upload (presigned POST); this
  adds them there, as S3 does. (moto matches a rule on the origin only, not the method; the
  template's methods are checked by tests instead.)
- moto 5.2 writes every answer by walking the service's model, and for each member of each
  structure it tries the names the value may go by (aliases, snake_case), a dozen calls each:
  a DynamoDB item of 25 attributes asks about 1,000 times, some 0.3 of the server's CPU for a
  GetItem, and moto's servers are the largest share of the test suite's CPU. Those names depend
  only on the model's shape, the member and the value's class, so each is worked out once.
- And to tell which service a request is for, moto lists its own package's folders (a
  listdir and some 180 stats, twice a request): the list is read once.
"""
import logging
import os
import sys
import threading

os.environ["MOTO_DISABLE_GLOBAL_CORS"] = "true"

from moto import backends  # noqa: E402
from moto.core import serialize  # noqa: E402
from moto.moto_server.werkzeug_app import DomainDispatcherApplication  # noqa: E402
from moto.s3.responses import S3Response  # noqa: E402
from moto.server import main  # noqa: E402

_dynamodb = threading.Lock()
_dispatch = DomainDispatcherApplication.__call__


def _serialised(self, environ, start_response):
    if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
        with _dynamodb:
            return _dispatch(self, environ, start_response)
    return _dispatch(self, environ, start_response)


DomainDispatcherApplication.__call__ = _serialised

_bucket_response_post = S3Response._bucket_response_post


def _bucket_response_post_with_cors(self, request, bucket_name):
    status, headers, body = _bucket_response_post(self, request, bucket_name)
    return status, {**self._get_cors_headers_other(), **headers}, body


S3Response._bucket_response_post = _bucket_response_post_with_cors

def _names_once(possible_keys):
    """get_possible_keys, worked out once for each picker, value class, shape and member."""
    found: dict = {}
    lock = threading.Lock()

    def names(self, context):
        obj, shape = context.obj, context.shape
        if "Meta" in getattr(obj, "__dict__", ()):  # aliases of the value's own, not its class's
            return tuple(possible_keys(self, context))
        # A picker is made for each answer; the names depend on its alias providers alone.
        key = (type(self), tuple(self.alias_providers), type(obj), id(shape), context.key)
        hit = found.get(key)
        if hit is None or hit[0] is not shape:  # the model's shapes live on; an id reused: again
            hit = (shape, tuple(possible_keys(self, context)))
            with lock:
                found[key] = hit
        return hit[1]

    return names


serialize.XFormedAttributePicker.get_possible_keys = _names_once(serialize.XFormedAttributePicker.get_possible_keys)
_MODULES = tuple(backends.list_of_moto_modules())  # the installed package's: fixed while it runs
backends.list_of_moto_modules = lambda: _MODULES

if __name__ == "__main__":
    # No line a request: the runner sends this server's output nowhere, and formatting them
    # took about a tenth of its CPU (py-spy, during the test suite).
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    sys.exit(main(sys.argv[1:]))
