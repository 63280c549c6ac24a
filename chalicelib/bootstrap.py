"""build_use_cases(settings): the one composition root."""
from __future__ import annotations

from typing import Optional

from botocore.config import Config

from chalicelib.adapters.dynamo_jobs import DynamoJobStore
from chalicelib.adapters.dynamo_webhooks import DynamoWebhookStore
from chalicelib.adapters.http_webhooks import HttpWebhookSender
from chalicelib.adapters.s3_store import S3Store
from chalicelib.adapters.sqs_depth import SqsDepth
from chalicelib.adapters.sqs_queue import SqsQueue
from chalicelib.adapters.sqs_webhooks import SqsWebhookQueue
from chalicelib.clients import Clients
from chalicelib.config import Settings
from chalicelib.logs import configure
from chalicelib.metrics import EmfMetrics, Metric, QueueName
from chalicelib.usecases import UseCases
from chalicelib.usecases.context import Context

# Fail fast and let the caller decide: an API answers 503, a worker retries the message.
_CLIENT_CONFIG = dict(connect_timeout=2, read_timeout=10, retries={"mode": "standard", "max_attempts": 3})


def _s3_config(endpoint_url: Optional[str]) -> Config:
    return Config(
        signature_version="s3v4",
        # Emulators on 127.0.0.1 have no per-bucket host names.
        s3={"addressing_style": "path" if endpoint_url else "auto"},
        **_CLIENT_CONFIG,
    )


def _s3_client(settings: Settings, endpoint_url):
    return Clients(settings.region).create("s3", endpoint_url, _s3_config(endpoint_url))


def _queue(settings: Settings, clients: Clients):
    """The events queue: what re-drives publish to and whose depth sheds uploads."""
    if settings.queue_backend == "amqp":
        from chalicelib.adapters.amqp import AmqpBacklog, AmqpChannel, AmqpPublisher, Topology

        topology = Topology.from_settings(settings)
        channel = AmqpChannel(settings.amqp_url, topology)
        return AmqpPublisher(channel, topology), AmqpBacklog(channel, topology)
    if settings.queue_backend != "sqs":
        raise ValueError(f"QUEUE_BACKEND must be sqs or amqp, got {settings.queue_backend!r}")
    # Made now: it is small once the session is loaded, and every upload and sweep needs it.
    sqs = clients.create("sqs", settings.endpoint_url, Config(**_CLIENT_CONFIG))
    queue = SqsQueue(sqs, settings.queue_name)
    return queue, queue


def build_use_cases(settings: Settings) -> UseCases:
    configure()
    clients = Clients(settings.region)
    # Storage's client is made on first use: most GETs (a job not ready yet) never need it.
    storage_url, presign_url = settings.storage_endpoint_url, settings.presign_endpoint_url
    storage = clients.lazy("s3", storage_url, _s3_config(storage_url))
    presign = storage if presign_url == storage_url else clients.lazy("s3", presign_url, _s3_config(presign_url))
    objects = S3Store(storage, settings.bucket, presign_client=presign)
    jobs = DynamoJobStore(settings.table, settings.region, settings.endpoint_url, clients)
    publisher, backlog = _queue(settings, clients)
    # Webhooks and the dead-letter gauges are on SQS whatever carries the storage events.
    # Made on first use: only job endings, deliveries and sweeps need it, never a GET.
    sqs = clients.lazy("sqs", settings.endpoint_url, Config(**_CLIENT_CONFIG))
    gauges = {
        (Metric.DEAD_LETTERS, QueueName.WEBHOOKS): SqsDepth(sqs, settings.webhooks_dlq_name),
        (Metric.QUEUE_DEPTH, QueueName.WEBHOOKS): SqsDepth(sqs, settings.webhook_queue_name),
    }
    if settings.queue_backend == "sqs":
        gauges[(Metric.DEAD_LETTERS, QueueName.EVENTS)] = SqsDepth(sqs, settings.events_dlq_name)
        gauges[(Metric.QUEUE_DEPTH, QueueName.EVENTS)] = backlog
    return UseCases(Context(
        settings=settings, jobs=jobs, objects=objects, publisher=publisher, backlog=backlog,
        metrics=EmfMetrics(settings.metrics_service),
        webhooks=DynamoWebhookStore(settings.table, settings.region, settings.endpoint_url, clients),
        webhook_queue=SqsWebhookQueue(sqs, settings.webhook_queue_name),
        webhook_sender=HttpWebhookSender(),
        gauges=gauges,
    ))
