"""Context: what every use case is given. The same ports for all of them; no SDK here."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import cached_property
from typing import TYPE_CHECKING, Callable, Optional

from chalicelib.config import Settings
from chalicelib.domain import renditions as rendition_table
from chalicelib.domain.delivery import UrlWindow
from chalicelib.domain.jobs import Job
from chalicelib.domain.renditions import RenditionName, RenditionSpec
from chalicelib.domain.objectkeys import ObjectKeys
from chalicelib.ports import (
    BacklogGauge,
    DeliverySlots,
    EdgeCache,
    EventPublisher,
    JobStore,
    JobChanges,
    Keys,
    ObjectStore,
    PushConnections,
    PushSender,
    RateStore,
    WebhookQueue,
    WebhookSender,
    WaitSlots,
    WebhookStore,
)
from chalicelib.runtime.metrics import Metric, Metrics, QueueName
from chalicelib.usecases.results import Urls
from chalicelib.usecases.webhook_urls import Resolver, system_resolver

if TYPE_CHECKING:
    from chalicelib.imaging.limits import DecodeLimits


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def new_job_id() -> str:
    return str(uuid.uuid4())  # 122 random bits


@dataclass(kw_only=True)
class Context:
    settings: Settings
    jobs: JobStore
    objects: ObjectStore
    # The job as GET shows it (chalicelib/http/views.py's job_body and push_body), for what
    # webhooks and push send: handed over by bootstrap, since use cases never import http/.
    job_body: Callable[[Job, Optional[Urls], bool], dict]
    push_body: Callable[[Job, Optional[Urls]], dict]
    publisher: EventPublisher
    backlog: BacklogGauge
    # Each owner's request rate, shared by every API process.
    rates: RateStore
    metrics: Metrics
    webhooks: WebhookStore
    webhook_queue: WebhookQueue
    webhook_sender: WebhookSender
    # Each receiver's deliveries in flight, and the turns of its deferred events, shared by
    # every delivery function.
    delivery_slots: DeliverySlots
    webhook_turns: RateStore
    # Held requests per owner (Prefer: wait).
    wait_slots: WaitSlots
    # The deployment's own secrets (the key of the list's page tokens).
    keys: Keys
    clock: Callable[[], datetime] = utcnow
    new_id: Callable[[], str] = new_job_id
    resolve: Resolver = system_resolver
    # Push (chalicelib/usecases/push.py): None when the stage has no WebSocket API.
    push_connections: Optional[PushConnections] = None
    push_sender: Optional[PushSender] = None
    job_changes: Optional[JobChanges] = None  # the table's stream, read by push_job_changes
    # The CDN a DELETE invalidates (INVALIDATE_ON_DELETE): None when it is not asked to.
    edge_cache: Optional[EdgeCache] = None
    # Queue depths the sweeper reports: (QUEUE_DEPTH or DEAD_LETTERS, which queue) -> gauge.
    gauges: dict[tuple[Metric, QueueName], BacklogGauge] = field(default_factory=dict)
    # Loads what the SDK's clients are made from, ahead of a first call: for a process that
    # builds its worker before any event comes (the local runner), so the first job does not
    # parse the SDK's models.
    load_clients: Callable[[], None] = lambda: None

    @cached_property
    def object_keys(self) -> ObjectKeys:
        return ObjectKeys(self.settings.originals_prefix, self.settings.renditions_prefix)

    @cached_property
    def renditions(self) -> tuple[RenditionSpec, ...]:
        """What the worker makes and clean-up deletes, from the one table of renditions."""
        return rendition_table.rendition_specs(self.settings)

    @property
    def rendition_names(self) -> list[RenditionName]:
        return [spec.name for spec in self.renditions]

    @cached_property
    def url_window(self) -> UrlWindow:
        return UrlWindow(self.settings.url_window_seconds, self.settings.url_ttl_seconds)

    @cached_property
    def retention(self) -> timedelta:
        return timedelta(seconds=self.settings.retention_seconds)

    @cached_property
    def queue_timeout(self) -> timedelta:
        return timedelta(seconds=self.settings.queue_timeout_seconds)

    @cached_property
    def upload_grace(self) -> timedelta:
        """How long past a direct upload's deadline (its URLs' expiry) the job still waits for
        its file: storage checks a URL's expiry when the request arrives, so a transfer begun
        just before may still be arriving. The largest single request (a whole file by POST
        or PUT; a part is smaller) at the slowest uplink planned for, rounded up."""
        s = self.settings
        return timedelta(seconds=-(-s.max_direct_upload_bytes // s.slowest_uplink_bytes_per_second))

    @cached_property
    def decode_limits(self) -> DecodeLimits:
        from chalicelib.imaging.limits import DecodeLimits  # uploads and the worker only, not a GET

        return DecodeLimits.of(self.settings)

    @cached_property
    def lease(self) -> timedelta:
        return timedelta(seconds=self.settings.lease_seconds)
