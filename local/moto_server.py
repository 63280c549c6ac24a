"""`python -m local.moto_server -H host -p port`: moto's server, made to behave as the real
services do where the service relies on it.

- It is served by waitress, not by moto's own runner (werkzeug's development server), which
  closes the connection after every answer: every botocore call paid a new TCP connection,
  where AWS keeps connections alive and botocore reuses them (here that saves a PutObject or a
  GetObject about 0.3 ms of the client's CPU and 0.5 of the server's). waitress reads a
  request's whole body before the app sees it, so an upload cut short (fewer bytes than its
  Content-Length, then the connection closed) never reaches moto, and nothing of it is stored,
  as in S3. Where waitress would answer otherwise than moto's handler on werkzeug did, it is
  made to answer as that did: user metadata named with underscores (x-amz-meta-my_key) is
  kept, RAW_URI (the path as sent: S3 keys with %2F) is set, headers go out named as moto
  wrote them, and a 204 or 304 keeps the connection.
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
import argparse
import os
import signal
import sys
import threading

os.environ["MOTO_DISABLE_GLOBAL_CORS"] = "true"

from moto import backends  # noqa: E402
from moto.core import serialize  # noqa: E402
from moto.core.request import PRESERVED_HEADER_NAMES_ENVIRON_KEY, should_preserve_original_header_name  # noqa: E402
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app  # noqa: E402
from moto.s3.responses import S3Response  # noqa: E402
from waitress.channel import HTTPChannel  # noqa: E402
from waitress.parser import HTTPRequestParser, get_header_lines  # noqa: E402
from waitress.rfc7230 import HEADER_FIELD_RE  # noqa: E402
from waitress.server import BaseWSGIServer, create_server  # noqa: E402
from waitress.task import WSGITask  # noqa: E402

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


# waitress' settings. Threads: werkzeug's server gave each request a thread of its own; here a
# pool answers them, and a request waits for a free thread. DynamoDB requests hold theirs while
# they queue on the lock above, and SQS long polls for their wait. The suite's servers have had
# up to 32 requests in flight at once (a runner's API taking 20 uploads at once, its pollers;
# the tests' own bursts of 20): twice that. An idle thread costs nothing but its stack.
THREADS = 64
# Every connection open costs the server about 2.5 us a request (waitress' loop asks each one
# whether it has work), and clients that are garbage keep theirs until collected: a connection
# idle for 20 s is closed (checked every 10 s). A client that comes back later connects again
# (botocore checks a pooled connection before it reuses it).
CHANNEL_TIMEOUT, CLEANUP_INTERVAL = 20, 10
# Far above the suite's peak (60 open at once); poll(), since select() stops at 1,024 descriptors.
CONNECTION_LIMIT = 1000
# S3's limit for one PUT (5 GiB): a larger body is S3's to refuse, not this server's.
MAX_BODY = 5 * 1024**3 + 1
# Bodies up to 64 MiB stay in memory (the largest direct upload is 50 MiB), larger ones go to a
# temporary file; and they are read in 64 KiB pieces, not 8: a 40 MB PUT then costs the server
# about the CPU it did on werkzeug (about 200 ms; 340 with waitress' defaults).
INBUF_OVERFLOW = 64 * 1024**2
RECV_BYTES = 64 * 1024


class _Parser(HTTPRequestParser):
    def parse_header(self, header_plus):
        super().parse_header(header_plus)
        self.preserved_names = {}
        if b"x-amz-meta-" not in header_plus.lower():
            return
        # waitress skips every header whose name has an underscore (so does werkzeug: one could
        # stand in for its dashed twin); S3 keeps user metadata's, and so did moto's handler.
        values: dict = {}
        for line in get_header_lines(header_plus[header_plus.index(b"\r\n") + 2:]):
            name, value = HEADER_FIELD_RE.match(line).group("name", "value")
            name = name.decode("latin-1")
            key = name.upper().replace("-", "_")
            if not should_preserve_original_header_name(name) or (key in self.headers and key not in values):
                continue  # a dashed header of that name was sent: it wins, as in moto's handler
            self.preserved_names.setdefault("HTTP_" + key, name)
            values.setdefault(key, []).append(value.strip(b" \t").decode("latin-1"))
        for key, parts in values.items():
            self.headers[key] = ",".join(parts)


class _Task(WSGITask):
    def get_environment(self):
        environ = super().get_environment()
        environ["RAW_URI"] = environ["REQUEST_URI"]  # moto matches S3 keys on the path as sent
        environ[PRESERVED_HEADER_NAMES_ENVIRON_KEY] = self.request.preserved_names
        return environ

    def build_response_header(self):
        # waitress capitalises every name it sends (x-amz-meta-my_key: X-Amz-Meta-My_key), and
        # botocore hands user metadata's names on as they came: sent as moto wrote them, as S3 does.
        written = {_capitalised(name): name for name, _ in self.response_headers}
        super().build_response_header()
        if (not self.has_body and ("Connection", "close") in self.response_headers and self.version == "1.1"
                and self.request.headers.get("CONNECTION", "").lower() != "close"):
            # A 204 or 304 has no body, so needs no length to end it; waitress closes after one
            # all the same (a DeleteObject, a presigned POST's answer), S3 does not.
            self.close_on_finish = False
            self.response_headers.remove(("Connection", "close"))
        self.response_headers = [(written.get(name, name), value) for name, value in self.response_headers]
        lines = [f"HTTP/{self.version} {self.status}"]
        lines += ["%s: %s" % header for header in sorted(self.response_headers, key=lambda header: header[0])]
        return ("%s\r\n\r\n" % "\r\n".join(lines)).encode("latin-1")


def _capitalised(name: str) -> str:
    return "-".join(part.capitalize() for part in name.split("-"))


class _Channel(HTTPChannel):
    parser_class = _Parser
    task_class = _Task


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=int(os.environ.get("MOTO_PORT", 5000)))
    args = parser.parse_args(argv)
    os.environ.setdefault("MOTO_PORT", str(args.port))  # as moto's main: what its answers' URLs name
    listeners: dict = {}
    server = create_server(
        DomainDispatcherApplication(create_backend_app), map=listeners, host=args.host, port=args.port,
        threads=THREADS, channel_timeout=CHANNEL_TIMEOUT, cleanup_interval=CLEANUP_INTERVAL,
        connection_limit=CONNECTION_LIMIT, asyncore_use_poll=True, max_request_body_size=MAX_BODY,
        inbuf_overflow=INBUF_OVERFLOW, recv_bytes=RECV_BYTES, expose_tracebacks=False, ident="moto")
    for listener in listeners.values():  # one a listening address
        if isinstance(listener, BaseWSGIServer):
            listener.channel_class = _Channel
    # Gone at once: moto holds everything in memory, so there is nothing to finish, where
    # waitress would wait up to 5 s for the requests in flight (a long poll) and Python would
    # then tear moto's modules down (7.7 s for a stop during a 5 s poll, 1.7 s idle).
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: os._exit(0))
    server.run()  # waitress logs no line a request; its warnings go to stderr


if __name__ == "__main__":
    main(sys.argv[1:])
