"""Settings.from_environ: the only reader of environment variables."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Mapping, Optional

MIB = 1024 * 1024
DAY = 24 * 3600


@dataclass(frozen=True)
class Settings:
    region: str = "us-east-1"
    # One endpoint for S3, SQS and DynamoDB: moto's server, LocalStack, or None for AWS.
    endpoint_url: Optional[str] = None
    # S3 somewhere else than the other services (MinIO beside LocalStack, say).
    s3_endpoint_url: Optional[str] = None
    # The S3 endpoint clients can reach, for presigned URLs (MinIO behind a proxy, say).
    public_s3_endpoint_url: Optional[str] = None
    # Where object-created events arrive: "sqs" (AWS, LocalStack, embedded) or "amqp" (MinIO).
    queue_backend: str = "sqs"
    amqp_url: str = "amqp://guest:guest@127.0.0.1:5672/%2F"
    amqp_exchange: str = "image-jobs"
    amqp_routing_key: str = "image-jobs.originals"
    amqp_queue: str = "image-jobs-events"
    # Deliveries of one message before the broker dead-letters it; more than the job's
    # attempts, so the job's own limit ends a failing job first.
    amqp_delivery_limit: int = 20
    # The dead-letter queue is bounded: at most this many messages (the oldest go first),
    # each kept at most this long (SQS's own longest retention).
    amqp_dead_letter_max_length: int = 10_000
    amqp_dead_letter_ttl_seconds: int = 14 * DAY
    # Uploads answer 503 overloaded while more events than this wait in the queue.
    max_backlog: int = 10_000
    backlog_cache_seconds: int = 5
    bucket: str = "image-jobs"
    table: str = "image-jobs"
    queue_name: str = "image-jobs-events"
    originals_prefix: str = "originals/"
    renditions_prefix: str = "renditions/"
    auth_mode: str = "jwt"  # "jwt": HS256 checked by the app; "cognito": API Gateway did it
    jwt_secret: str = "dev-secret-change-me"
    # The user pool whose tokens API Gateway's authorizer accepts (auth_mode "cognito" only).
    cognito_user_pool_arn: Optional[str] = None
    # Where the app's routes live. API Gateway puts its stage name first in every URL, so the
    # cloud stages (stage "api") route under /v1 and clients still see /api/v1/... as here.
    route_prefix: str = "/api/v1"
    # The one origin whose pages may call the API from a browser (web/), or "*" for any: tokens
    # travel in the Authorization header, never in cookies, so "*" exposes nothing by itself.
    cors_allow_origin: str = "*"
    max_upload_bytes: int = 4 * MIB
    max_direct_upload_bytes: int = 50 * MIB
    max_pixels: int = 50_000_000
    retry_after_seconds: int = 2
    url_ttl_seconds: int = 3600
    retention_seconds: int = 7 * DAY
    lease_seconds: int = 120
    max_attempts: int = 3
    upload_url_ttl_seconds: int = 900
    idempotency_ttl_seconds: int = DAY
    # A queued job that no worker claims within this is re-driven once, then failed.
    queue_timeout_seconds: int = 600
    # An original or rendition with no job is deleted once it is older than this.
    orphan_grace_seconds: int = 3600
    sweep_interval_seconds: int = 60
    # The sweep asks every shard of every status (docs/scale.md §6.1) in a pool of this many
    # threads, and takes no new shard after this many seconds of its run (the function's
    # timeout is 50 s): what is left stays due, and the next run starts there.
    sweep_threads: int = 16
    sweep_budget_seconds: int = 40
    # Also ask the old unsharded `sweep` index for jobs written before sweep_key existed.
    # Rollout step 3 (docs/deploy.md) turns it off, retention + 1 day after step 2.
    sweep_legacy_index: bool = True
    # The orphan scan lists the bucket: its cost grows with the bucket, so it runs rarely.
    orphan_sweep_interval_seconds: int = DAY
    # Backpressure in the cloud: at most this many worker Lambdas read the queue at once
    # (the SQS event source's maximum concurrency; AWS accepts 2 to 1000).
    worker_max_concurrency: int = 5
    # The decode budget (chalicelib/budget.py): refused at upload from the structure alone.
    max_scans: int = 64
    max_frames: int = 1000
    max_metadata_bytes: int = 1024 * 1024
    # CPU seconds one image may use in the worker's decoding child (chalicelib/sandbox.py);
    # past it the job fails image_too_complex. 0 decodes in-process, without a limit.
    decode_cpu_seconds: int = 6
    # The worker function's timeout (.chalice/config.json, handle_object_created); the local
    # worker gives each job the same time.
    worker_timeout_seconds: int = 60
    # Fairness: unfinished jobs one owner may have at once, and its request rate (a token
    # bucket per owner: this many requests a second, bursts up to owner_burst).
    max_active_jobs: int = 20
    # API Gateway's throttle for the whole stage, in front of every owner (cloud only).
    api_rate_limit: int = 1000
    api_burst_limit: int = 2000
    owner_requests_per_second: int = 10
    owner_burst: int = 40
    display_box: int = 1280
    thumb_size: int = 256
    jpeg_quality: int = 85

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "Settings":
        values = {}
        for field in fields(cls):
            raw = environ.get(env_name(field.name))
            if raw is None or raw == "":
                continue
            values[field.name] = _parse(field.name, field.type, raw)
        settings = cls(**values)
        settings._check()
        return settings

    def _check(self) -> None:
        """What would otherwise fail only at deploy time, or silently in the cloud."""
        if self.auth_mode == "cognito" and not self.cognito_user_pool_arn:
            raise ValueError("AUTH_MODE=cognito needs COGNITO_USER_POOL_ARN, a stack output: "
                             "run python -m infra.stage_config <stage> (docs/deploy.md)")
        if not self.route_prefix.startswith("/") or self.route_prefix.endswith("/"):
            raise ValueError("ROUTE_PREFIX must start with '/' and not end with one, "
                             f"got {self.route_prefix!r}")
        if self.decode_cpu_seconds and self.decode_cpu_seconds * 2 >= self.worker_timeout_seconds:
            raise ValueError("DECODE_CPU_SECONDS must leave the worker time to store the result: "
                             f"under half of WORKER_TIMEOUT_SECONDS ({self.worker_timeout_seconds})")
        if not 2 <= self.worker_max_concurrency <= 1000:
            raise ValueError("WORKER_MAX_CONCURRENCY must be between 2 and 1000, "
                             f"got {self.worker_max_concurrency}")

    @property
    def storage_endpoint_url(self) -> Optional[str]:
        return self.s3_endpoint_url or self.endpoint_url

    @property
    def presign_endpoint_url(self) -> Optional[str]:
        return self.public_s3_endpoint_url or self.storage_endpoint_url


# Names that follow AWS's own variables or read better than the field's name upper-cased.
_ENV_NAMES = {
    "region": "AWS_REGION",
    "endpoint_url": "AWS_ENDPOINT_URL",
    "bucket": "IMAGES_BUCKET",
    "table": "JOBS_TABLE",
    "queue_name": "JOBS_QUEUE",
    "jwt_secret": "AUTH_JWT_SECRET",
}


# Settings where 0 means "off".
_MAY_BE_ZERO = frozenset({"decode_cpu_seconds"})


def env_name(field_name: str) -> str:
    return _ENV_NAMES.get(field_name, field_name.upper())


LOCAL_COMPONENTS = ("api", "web", "worker", "sweeper", "bridge")


@dataclass(frozen=True)
class RunnerSettings:
    """The local runner's own settings (`python -m local`); never read in the cloud."""

    api_port: int = 8000
    # The web page (web/), and the subject of the dev token it is given.
    web_port: int = 8080
    web_subject: str = "web"
    # moto's server, or where a LocalStack listens (LocalStack's own default port).
    aws_port: int = 4566
    # False: use the services at AWS_ENDPOINT_URL (a real LocalStack) instead of moto's.
    embedded_aws: bool = True
    # Which parts to run, comma-separated, of LOCAL_COMPONENTS.
    local_components: str = ",".join(LOCAL_COMPONENTS)
    # Jobs processed in parallel; 0: one per core.
    worker_concurrency: int = 0
    # Forward storage's SQS events to RabbitMQ in MinIO's shape; None: only on the embedded
    # stack with QUEUE_BACKEND=amqp (which has no MinIO to notify RabbitMQ itself).
    amqp_bridge: Optional[bool] = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "RunnerSettings":
        values = {}
        for field in fields(cls):
            raw = environ.get(field.name.upper())
            if raw is not None and raw != "":
                values[field.name] = _parse(field.name, field.type, raw)
        runner = cls(**values)
        unknown = set(runner.components) - set(LOCAL_COMPONENTS)
        if unknown:
            raise ValueError(f"LOCAL_COMPONENTS: unknown {sorted(unknown)}; choose from {LOCAL_COMPONENTS}")
        return runner

    @property
    def components(self) -> set[str]:
        return set(filter(None, self.local_components.split(",")))


def _parse(name: str, kind: str, raw: str):
    if kind in ("bool", "Optional[bool]"):
        if raw not in ("0", "1"):
            raise ValueError(f"{env_name(name)} must be 0 or 1, got {raw!r}")
        return raw == "1"
    if kind == "int":
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"{env_name(name)} must be an integer, got {raw!r}") from None
        if value < 0 or (value == 0 and name not in _MAY_BE_ZERO):
            raise ValueError(f"{env_name(name)} must be positive, got {value}")
        return value
    return raw
