"""build_use_cases(settings): the one composition root."""
from __future__ import annotations

import functools
from typing import Optional

from chalicelib.adapters import sdk_limits
from chalicelib.adapters.botocore_clients import Clients
from chalicelib.adapters.cloudwatch_age import QueueAgeMetric
from chalicelib.adapters.dynamo_jobs import DynamoJobStore
from chalicelib.adapters.dynamo_keys import DynamoKeys
from chalicelib.adapters.dynamo_rates import DynamoRateStore
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.adapters.dynamo_waits import DynamoWaitSlots
from chalicelib.adapters.dynamo_webhooks import TURN_PREFIX, DynamoDeliverySlots, DynamoWebhookStore
from chalicelib.adapters.http_webhooks import HttpWebhookSender
from chalicelib.adapters.s3_presign import GetPresigner
from chalicelib.adapters.s3_store import S3Store
from chalicelib.adapters.sqs_depth import SqsDepth
from chalicelib.adapters.sqs_queue import SqsEventsQueue
from chalicelib.adapters.sqs_webhooks import SqsWebhookQueue
from chalicelib.config import Settings
from chalicelib.runtime.deadline import SdkLimits
from chalicelib.runtime.logs import configure
from chalicelib.runtime.metrics import EmfMetrics, Metric, QueueName
from chalicelib.usecases import UseCases
from chalicelib.usecases.context import Context


def _s3_client(clients: Clients, limits: SdkLimits, guard, endpoint_url: Optional[str]):
    # Emulators on 127.0.0.1 have no per-bucket host names.
    config = sdk_limits.client_config(limits, signature_version="s3v4",
                                      s3={"addressing_style": "path" if endpoint_url else "auto"})
    return clients.lazy("s3", endpoint_url, config, prepare=guard)


def _queue(settings: Settings, clients: Clients, limits: SdkLimits, guard, sqs):
    """The events queue: what resends publish to and whose depth sheds uploads."""
    if settings.queue_backend == "amqp":
        from chalicelib.adapters.amqp import AmqpBacklog, AmqpChannel, AmqpPublisher, Topology

        topology = Topology.from_settings(settings)
        channel = AmqpChannel(settings.amqp_url, topology)
        return (AmqpPublisher(channel, topology, settings.amqp_event_shape),
                AmqpBacklog(channel, topology))
    if settings.queue_backend != "sqs":
        raise ValueError(f"QUEUE_BACKEND must be sqs or amqp, got {settings.queue_backend!r}")
    # Only the sweeper asks CloudWatch (the age of the oldest message): made on first use.
    metrics = clients.lazy("cloudwatch", settings.endpoint_url, sdk_limits.client_config(limits),
                           prepare=guard)
    queue = SqsEventsQueue(sqs, settings.events_queue_name, QueueAgeMetric(metrics, settings.events_queue_name))
    return queue, queue


def _cloudfront(settings: Settings, clients: Clients, limits: SdkLimits, guard):
    """CloudFront signed URLs, with the private key read from Secrets Manager on the first
    signature of each warm function (a lazy client: a cold GET of an unfinished job makes none)."""
    from chalicelib.adapters.cloudfront_sign import CloudFrontPresigner

    secrets = clients.lazy("secretsmanager", settings.endpoint_url, sdk_limits.client_config(limits),
                           prepare=guard)
    return CloudFrontPresigner(
        settings.cloudfront_domain, settings.cloudfront_key_pair_id,
        lambda: secrets.get_secret_value(SecretId=settings.cloudfront_private_key_secret)["SecretString"],
        settings.renditions_prefix)


def _edge_cache(settings: Settings, clients: Clients, limits: SdkLimits, guard):
    """The distribution a DELETE invalidates (INVALIDATE_ON_DELETE): its own short timeouts
    and one attempt, so that a slow CloudFront costs a DELETE at most those (a lazy client: a
    GET makes none)."""
    from botocore.config import Config

    from chalicelib.adapters.cloudfront_invalidate import CloudFrontInvalidator

    wait = min(settings.invalidation_timeout_seconds, limits.read_timeout)
    config = Config(connect_timeout=wait, read_timeout=wait, retries={"mode": "standard", "max_attempts": 1})
    client = clients.lazy("cloudfront", settings.endpoint_url, config, prepare=guard)
    return CloudFrontInvalidator(client, settings.cloudfront_distribution_id, settings.renditions_prefix)


def _job_body(job, urls, with_owner: bool = False) -> dict:
    # Imported on the first body sent: a worker or sweeper sends none, and loads no http/.
    from chalicelib.http.views import job_body

    return job_body(job, urls, with_owner)


def _push_body(job, urls) -> dict:
    from chalicelib.http.views import push_body  # on the first message sent, as _job_body

    return push_body(job, urls)


def build_use_cases(settings: Settings) -> UseCases:
    configure()
    # Fail fast and let the caller decide (an API answers 503, a worker retries the
    # message): one attempt is a small part of even the shortest function's time.
    limits = SdkLimits.for_settings(settings)
    guard = functools.partial(sdk_limits.guard, limits=limits)  # on every client, once made
    clients = Clients(settings.region)
    # Storage's client is made on first use: most GETs (a job not ready yet) never need it.
    storage_url, presign_url = settings.storage_endpoint_url, settings.presign_endpoint_url
    storage = _s3_client(clients, limits, guard, storage_url)
    presign = storage if presign_url == storage_url else _s3_client(clients, limits, guard, presign_url)
    # A ready job's URLs are signed without the S3 client, which a GET then never makes.
    get_presigner = GetPresigner(lambda: clients.session.get_credentials(), settings.region, presign_url,
                                 client=presign)
    if settings.delivery == "cloudfront":
        get_presigner = _cloudfront(settings, clients, limits, guard)
    objects = S3Store(storage, settings.bucket, presign_client=presign, get_presigner=get_presigner)
    table = DynamoTable(settings.table, settings.region, settings.endpoint_url, clients,
                        connection=sdk_limits.pynamodb_connection(limits), prepare_client=guard)
    jobs = DynamoJobStore(table)
    # SQS carries the webhooks and the dead-letter gauges whatever carries the storage events.
    # Made on first use: uploads, job endings, deliveries and sweeps need it, never a GET.
    sqs = clients.lazy("sqs", settings.endpoint_url, sdk_limits.client_config(limits), prepare=guard)
    publisher, backlog = _queue(settings, clients, limits, guard, sqs)
    gauges = {
        (Metric.DEAD_LETTERS, QueueName.WEBHOOKS): SqsDepth(sqs, settings.webhook_dead_letter_queue_name),
        (Metric.QUEUE_DEPTH, QueueName.WEBHOOKS): SqsDepth(sqs, settings.webhook_queue_name),
    }
    if settings.queue_backend == "sqs":
        gauges[(Metric.DEAD_LETTERS, QueueName.EVENTS)] = SqsDepth(sqs, settings.events_dead_letter_queue_name)
        gauges[(Metric.QUEUE_DEPTH, QueueName.EVENTS)] = backlog
    use_cases = UseCases(Context(
        settings=settings, jobs=jobs, objects=objects, job_body=_job_body, push_body=_push_body,
        publisher=publisher, backlog=backlog,
        rates=DynamoRateStore(table),
        metrics=EmfMetrics(settings.metrics_service),
        webhooks=DynamoWebhookStore(table),
        webhook_queue=SqsWebhookQueue(sqs, settings.webhook_queue_name, settings.webhook_dead_letter_queue_name),
        webhook_sender=HttpWebhookSender(),
        delivery_slots=DynamoDeliverySlots(table),
        webhook_turns=DynamoRateStore(table, prefix=TURN_PREFIX),
        wait_slots=DynamoWaitSlots(table),
        keys=DynamoKeys(table),
        gauges=gauges,
        edge_cache=_edge_cache(settings, clients, limits, guard) if settings.invalidate_on_delete else None,
        load_clients=functools.partial(clients.load, "s3", "dynamodb", "sqs"),
    ))
    if settings.serves_push:
        _add_push(use_cases, settings, clients, limits, guard, table)
    return use_cases


def _add_push(use_cases: UseCases, settings: Settings, clients: Clients, limits: SdkLimits, guard,
              table: DynamoTable) -> None:
    """The registry, the sender and the trigger (chalicelib/usecases/push.py)."""
    from chalicelib.adapters.apigw_push import ApiGatewayPushSender
    from chalicelib.adapters.dynamo_push import DynamoJobChanges, DynamoPushConnections
    from chalicelib.usecases.push import Fanout, PushingJobStore

    ctx = use_cases.ctx
    ctx.push_connections = DynamoPushConnections(table)
    ctx.push_sender = ApiGatewayPushSender(clients.lazy(
        "apigatewaymanagementapi", settings.push_management_url or None,
        sdk_limits.client_config(limits), prepare=guard))
    if settings.push_stream_arn:
        ctx.job_changes = DynamoJobChanges()
    else:  # no stream: each status write hands its job to the fan-out once it has landed
        ctx.jobs = PushingJobStore(ctx.jobs, Fanout(lambda job: use_cases.push.publish(job), ctx.metrics))
