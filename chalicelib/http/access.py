"""Each API request as one JSON log line and a few metrics (app.py's HTTP middleware is
`observe`). The line carries the correlation id like every other."""
from __future__ import annotations

import time
from typing import Any, Mapping, Optional

from chalicelib.domain.vocabulary import ErrorCode
from chalicelib.runtime import correlation
from chalicelib.runtime.metrics import Dimension, Metric, Metrics

# Refusals that protect the service: counted as shed load, not as faults.
SHED = frozenset({ErrorCode.OVERLOADED, ErrorCode.RATE_LIMITED})


def observe(request, get_response, metrics: Metrics, log, log_success: bool):
    """One request: a correlation id (the Lambda request id) on its log lines, in problem
    bodies as `instance` and in the X-Request-Id header; then its metrics, and its access
    line if it was an error or `log_success` is set (the local runner)."""
    request_id = correlation.begin(correlation.of_context(request.lambda_context))
    started = time.monotonic()
    response = get_response(request)
    response.headers["X-Request-Id"] = request_id
    request_done(metrics, log, request.method, request.path, request.uri_params,
                 response.status_code, response.body, (time.monotonic() - started) * 1000,
                 log_success=log_success)
    return response


def problem_code(body: Any) -> Optional[ErrorCode]:
    if isinstance(body, Mapping):
        try:
            return ErrorCode(body.get("code"))
        except ValueError:
            return None
    return None


def request_done(metrics: Metrics, log, method: str, route: str, params: Optional[Mapping[str, str]],
                 status: int, body: Any, elapsed_ms: float, log_success: bool = True) -> None:
    """`log_success` False: a line only for an error answer (the cloud's choice, see
    Settings.log_every_request); the metrics count every request."""
    code = problem_code(body) if status >= 400 else None
    if status >= 400 or log_success:
        fields = {"method": method, "route": route, "status": status, "ms": round(elapsed_ms, 1)}
        if code is not None:
            fields["code"] = code.value
        if params and "job_id" in params:
            fields["job_id"] = params["job_id"]
        log.info("http_request", **fields)
    metrics.emit({Metric.API_REQUESTS: 1, Metric.API_LATENCY: elapsed_ms})
    if status >= 400:
        values = {Metric.API_PROBLEMS: 1}
        if code in SHED:
            values[Metric.REQUESTS_SHED] = 1
        elif status >= 500:
            values[Metric.API_SERVER_ERRORS] = 1
        # A status Chalice answered itself has no code of ours: its status says enough.
        metrics.emit(values, {Dimension.CODE: code} if code is not None else None)
