"""What API Gateway does in front of the app, done for `chalice local`.

`chalice local`'s own request handler answers some requests itself, and not as the contract
wants: 501 HTML for methods it has no handler for (TRACE), 403 `Missing Authentication
Token` for unknown paths, HTML for a malformed request line, and it reads any body whole
before the app sees it. This handler answers all of those with problem+json, and refuses a
body over the largest any route takes from its Content-Length, without reading it.
"""
from __future__ import annotations

from typing import Optional

from chalice import local as chalice_local

from chalicelib.domain.vocabulary import ErrorCode
from chalicelib.http import methods, request_body, responses
from local import api_docs

# What API Gateway answers to a path it does not have: its gateway response
# MISSING_AUTHENTICATION_TOKEN, which infra/gateway_responses.py sets to this code.
UNKNOWN_PATH_RESPONSE = "MISSING_AUTHENTICATION_TOKEN"


def _app():
    # The module `chalice local` imported: its routes and settings.
    import app

    return app


class ProblemRequestHandler(chalice_local.ChaliceRequestHandler):
    def __getattr__(self, name: str):
        # BaseHTTPRequestHandler looks up do_<METHOD> and answers 501 HTML without one.
        if name.startswith("do_"):
            return self._unknown_method
        raise AttributeError(name)

    def _generic_handle(self) -> None:
        if self._refused_before_reading():
            return
        if api_docs.serves(self.command, self.path):
            page = api_docs.respond(self.path, self.headers.get("host") or self.server.server_address[0])
            if page is not None:
                self._send_http_response(*page)
                return
        super()._generic_handle()

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = do_PATCH = do_OPTIONS = _generic_handle

    def _unknown_method(self) -> None:
        if self._refused_before_reading():
            return
        route = self._route()
        if route is None:
            self._problem(self._unknown_path_code(), "There is no such resource", close=True)
            return
        self._problem(ErrorCode.METHOD_NOT_ALLOWED, "This method is not allowed here; see Allow",
                      allow=methods.allowed_methods(_app().app, route), close=True)

    def _refused_before_reading(self) -> bool:
        """Answers (and closes the connection) when the body must not be read."""
        if self.headers.get("transfer-encoding"):
            # http.server does not decode chunked bodies; one left unread would be taken
            # for the next request on this connection.
            self._problem(ErrorCode.INVALID_REQUEST, "Send a Content-Length; chunked bodies are not taken",
                          close=True)
            return True
        lengths = self.headers.get_all("content-length") or []
        if len(lengths) > 1 or (lengths and not lengths[0].strip().isdigit()):
            self._problem(ErrorCode.INVALID_REQUEST, "The Content-Length is not valid", close=True)
            return True
        limit = request_body.max_request_bytes(_app().settings.max_upload_bytes)
        if lengths and int(lengths[0]) > limit:
            self._problem(ErrorCode.FILE_TOO_LARGE, f"The request body is larger than {limit} bytes",
                          close=True)
            return True
        return False

    def _route(self) -> Optional[str]:
        """The app's route for this path, matched as `chalice local` matches it."""
        try:
            return chalice_local.RouteMatcher(list(_app().app.routes)).match_route(self.path).route
        except ValueError:
            return None

    def _unknown_path_code(self):
        from infra.gateway_responses import RESPONSES

        return ErrorCode(RESPONSES[UNKNOWN_PATH_RESPONSE])

    def _send_error_response(self, error: chalice_local.LocalGatewayException) -> None:
        # Only an unknown path gets here: the app checks tokens itself locally.
        self._problem(self._unknown_path_code(), "There is no such resource")

    def send_error(self, code: int, message: Optional[str] = None, explain: Optional[str] = None) -> None:
        """http.server's own refusals (a malformed request line or headers), as problem+json."""
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
            # A line it could not parse counts as HTTP/0.9, which would get a bare body:
            # nobody speaks 0.9, so answer with a status line and headers.
            self.request_version = self.protocol_version
        self._problem(ErrorCode.INVALID_REQUEST if code < 500 else ErrorCode.INTERNAL_ERROR,
                      "The request could not be read", close=True)

    def _problem(self, code, detail: str, allow=None, close: bool = False) -> None:
        response = responses.problem(code, detail, allow=allow).to_dict()
        headers = dict(response["headers"])
        if close:
            self.close_connection = True
            headers["Connection"] = "close"
        self._send_http_response(response["statusCode"], headers, response["body"])

    def _send_http_response_with_body(self, code: int, headers: dict, body) -> None:
        if self.command != "HEAD":
            super()._send_http_response_with_body(code, headers, body)
            return
        # A HEAD answer has the headers a GET would have and no body.
        headers = dict(headers)
        headers["Content-Length"] = str(len(body if isinstance(body, bytes) else body.encode()))
        self.send_response(code)
        self._send_headers(headers)


class LocalDevServer(chalice_local.LocalDevServer):
    handler_cls: type = ProblemRequestHandler

    def __init__(self, app_object, config, host: str, port: int, **kwargs) -> None:
        kwargs.setdefault("handler_cls", self.handler_cls)
        super().__init__(app_object, config, host, port, **kwargs)


def install(handler_cls: type = ProblemRequestHandler) -> None:
    """Make `chalice local` serve through ProblemRequestHandler (or a subclass of it)."""
    LocalDevServer.handler_cls = handler_cls
    chalice_local.LocalDevServer = LocalDevServer

