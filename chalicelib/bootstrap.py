"""build_use_cases(settings): the one composition root."""
from __future__ import annotations

import boto3
from botocore.config import Config

from chalicelib.adapters.dynamo_jobs import DynamoJobStore
from chalicelib.adapters.s3_store import S3Store
from chalicelib.adapters.sqs_queue import SqsQueue
from chalicelib.config import Settings
from chalicelib.logs import configure
from chalicelib.usecases import UseCases
from chalicelib.usecases.context import Context

# Fail fast and let the caller decide: an API answers 503, a worker retries the message.
_CLIENT_CONFIG = dict(connect_timeout=2, read_timeout=10, retries={"mode": "standard", "max_attempts": 3})


def _s3_client(settings: Settings, endpoint_url):
    config = Config(
        signature_version="s3v4",
        # Emulators on 127.0.0.1 have no per-bucket host names.
        s3={"addressing_style": "path" if endpoint_url else "auto"},
        **_CLIENT_CONFIG,
    )
    return boto3.session.Session().client(
        "s3", region_name=settings.region, endpoint_url=endpoint_url, config=config
    )


def _queue(settings: Settings):
    """The events queue: what re-drives publish to and whose depth sheds uploads."""
    if settings.queue_backend == "amqp":
        from chalicelib.adapters.amqp import AmqpBacklog, AmqpChannel, AmqpPublisher, Topology

        topology = Topology.from_settings(settings)
        channel = AmqpChannel(settings.amqp_url, topology)
        return AmqpPublisher(channel, topology), AmqpBacklog(channel, topology)
    if settings.queue_backend != "sqs":
        raise ValueError(f"QUEUE_BACKEND must be sqs or amqp, got {settings.queue_backend!r}")
    sqs = boto3.session.Session().client(
        "sqs", region_name=settings.region, endpoint_url=settings.endpoint_url,
        config=Config(**_CLIENT_CONFIG),
    )
    queue = SqsQueue(sqs, settings.queue_name)
    return queue, queue


def build_use_cases(settings: Settings) -> UseCases:
    configure()
    objects = S3Store(
        _s3_client(settings, settings.storage_endpoint_url),
        settings.bucket,
        presign_client=_s3_client(settings, settings.presign_endpoint_url),
    )
    jobs = DynamoJobStore(settings.table, settings.region, settings.endpoint_url)
    publisher, backlog = _queue(settings)
    return UseCases(Context(settings=settings, jobs=jobs, objects=objects, publisher=publisher,
                            backlog=backlog))
