"""The 405 routes: every method a path lacks is answered by the app itself, 405 with `Allow`
as problem+json, so API Gateway sends it on instead of answering with its own error. It
comes before authentication: which methods a path has is public.

OPTIONS stays with CORS preflight; methods outside OTHER_METHODS (TRACE, say) never reach
the app: API Gateway refuses them, and local/gateway.py answers them like this.
"""
from __future__ import annotations

from chalicelib.domain.vocabulary import ErrorCode
from chalicelib.http import responses

OTHER_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
_NOT_ALLOWED_VIEW = "method_not_allowed"


def allowed_methods(app, path: str) -> list[str]:
    """The methods the route at `path` really has (its 405 answers aside)."""
    return sorted(method for method, entry in app.routes[path].items()
                  if entry.view_name != _NOT_ALLOWED_VIEW)


def add_not_allowed_routes(app, content_types: list[str]) -> None:
    """Call it last: it covers only the routes declared before it."""
    for path in list(app.routes):
        missing = [m for m in OTHER_METHODS if m not in app.routes[path]]
        if missing:
            app.route(path, methods=missing, content_types=content_types,
                      name=_NOT_ALLOWED_VIEW)(_not_allowed(app, path))


def _not_allowed(app, path: str):
    def method_not_allowed(**_params):
        return responses.problem(ErrorCode.METHOD_NOT_ALLOWED,
                                 f"{app.current_request.method} is not allowed here",
                                 allow=allowed_methods(app, path))

    return method_not_allowed
