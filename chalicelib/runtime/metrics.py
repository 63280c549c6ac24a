"""Metrics, as CloudWatch Embedded Metric Format (EMF) lines on stdout.

Lambda sends stdout to CloudWatch Logs, which turns each EMF line into metric data points:
no API call, no extra permission, nothing to wait for. The local runner prints the same
lines, and `make stats` (local/stats.py) summarises them.

The lines are built by Powertools for AWS Lambda (`EphemeralMetrics`: one instance per line,
so threads never share a metric set). Dimensions are kept low-cardinality by construction:
their values must be members of an Enum (an error code, a route, a queue), never free text
such as a job id or an owner.
"""
from __future__ import annotations

import json
import sys
from enum import Enum, StrEnum
from typing import Callable, Mapping, Optional, Protocol

from chalicelib.runtime.logs import get_logger, write_line

NAMESPACE = "ImageJobs"
log = get_logger("metrics")


class Metric(StrEnum):
    JOBS_ACCEPTED = "JobsAccepted"          # a new job (not a replay), by Route
    UPLOADS_CREATED = "UploadsCreated"      # a new direct upload, by Method
    UPLOADS_RESUMED = "UploadsResumed"      # an upload's state asked again (GET .../upload), by Method
    JOBS_READY = "JobsReady"
    JOBS_FAILED = "JobsFailed"              # in all, and by Code
    JOBS_CANCELLED = "JobsCancelled"
    QUEUE_WAIT = "QueueWait"                # created -> first claimed
    PROCESSING_TIME = "ProcessingTime"      # claimed -> this attempt's result written
    END_TO_END = "EndToEnd"                 # created -> ready
    ATTEMPTS = "Attempts"                   # of a job that the worker finished
    RESENDS = "Redrives"                    # events the sweeper sent again (the older word, kept)
    API_REQUESTS = "ApiRequests"
    API_LATENCY = "ApiLatency"
    API_PROBLEMS = "ApiProblems"            # error answers, in all and by Code
    API_SERVER_ERRORS = "ApiServerErrors"   # 5xx that are faults, not load shedding
    REQUESTS_SHED = "RequestsShed"          # overloaded and rate_limited, by Code
    WEBHOOKS_QUEUED = "WebhooksQueued"
    WEBHOOK_DELIVERIES = "WebhookDeliveries"
    WEBHOOK_FAILURES = "WebhookFailures"    # failed attempts, by Reason
    WEBHOOK_LATENCY = "WebhookLatency"
    WEBHOOKS_DEFERRED = "WebhooksDeferred"  # held back while the owner's endpoint is failing
    WEBHOOKS_DROPPED = "WebhooksDropped"    # nothing left to send, by Reason
    WAITS_HELD = "WaitsHeld"                # requests held for Prefer: wait
    WAITS_REFUSED = "WaitsRefused"          # answered at once instead: owner's slots full, or loaded
    WAIT_TIME = "WaitTime"                  # how long a held request was held
    PUSH_CONNECTS = "PushConnects"          # WebSocket connections accepted
    PUSH_REFUSED = "PushRefused"            # connects refused, by Reason
    PUSH_DISCONNECTS = "PushDisconnects"    # disconnects the gateway reported
    PUSH_MESSAGES = "PushMessages"          # job changes handed to a connection
    PUSH_GONE = "PushGone"                  # connections found closed by a send, and forgotten
    PUSH_FAILURES = "PushFailures"          # changes not sent: gateway or table down, fan-out full
    PUSH_LATENCY = "PushLatency"            # the status change's write -> handed to the gateway
    EDGE_INVALIDATIONS_FAILED = "EdgeInvalidationsFailed"  # a DELETE's CDN invalidation not taken
    QUEUE_DEPTH = "QueueDepth"              # by Queue
    DEAD_LETTERS = "DeadLetters"            # messages in a dead-letter queue, by Queue


_MILLISECONDS = {Metric.QUEUE_WAIT, Metric.PROCESSING_TIME, Metric.END_TO_END,
                 Metric.API_LATENCY, Metric.WEBHOOK_LATENCY, Metric.WAIT_TIME,
                 Metric.PUSH_LATENCY}


def unit_of(metric: Metric) -> str:
    return "Milliseconds" if metric in _MILLISECONDS else "Count"


class Dimension(StrEnum):
    CODE = "Code"
    ROUTE = "Route"
    QUEUE = "Queue"
    REASON = "Reason"
    METHOD = "Method"                       # an UploadMethod


class Route(StrEnum):
    IMAGES = "images"
    UPLOADS = "uploads"


class QueueName(StrEnum):
    EVENTS = "events"
    WEBHOOKS = "webhooks"


class Metrics(Protocol):
    def emit(self, values: Mapping[Metric, float],
             dimensions: Optional[Mapping[Dimension, Enum]] = None) -> None:
        """Record `values` at once. With `dimensions`, each metric is recorded both in all
        (dimension `service` only) and per those dimensions."""
        ...


def emf_line(service: str, values: Mapping[Metric, float],
             dimensions: Optional[Mapping[Dimension, Enum]] = None) -> str:
    from aws_lambda_powertools.metrics import EphemeralMetrics  # 0.1 s: only once something is measured

    for name, value in (dimensions or {}).items():
        if not isinstance(name, Dimension) or not isinstance(value, Enum):
            raise TypeError(f"dimension {name}={value!r}: names are Dimension members and values "
                            "Enum members, so that no id or owner ever becomes a dimension")
    line = EphemeralMetrics(namespace=NAMESPACE, default_dimensions={"service": service})
    if dimensions:
        line.add_dimensions(**{name.value: str(value.value) for name, value in dimensions.items()})
    for metric, value in values.items():
        line.add_metric(name=Metric(metric).value, unit=unit_of(metric), value=value)
    return json.dumps(line.serialize_metric_set(), separators=(",", ":"))


def _stdout(line: str) -> None:
    write_line(sys.stdout, line)  # under the log lines' lock: whole lines, whatever the threads


class EmfMetrics:
    """Metrics as EMF lines. `strict`: raise on a mistake (tests) instead of logging it, so
    that measuring can never fail a request or a job in service."""

    def __init__(self, service: str, write: Callable[[str], None] = _stdout, strict: bool = False):
        self._service = service
        self._write = write
        self._strict = strict

    def emit(self, values: Mapping[Metric, float],
             dimensions: Optional[Mapping[Dimension, Enum]] = None) -> None:
        if not values:
            return
        try:
            self._write(emf_line(self._service, values, dimensions))
        except Exception:
            if self._strict:
                raise
            log.exception("metrics_emit_failed", metrics=sorted(str(m) for m in values))
