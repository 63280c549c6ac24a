"""Settings.from_environ: the only reader of environment variables."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Mapping, Optional

from chalicelib.domain.errors import InvalidRequest
from chalicelib.domain.renditions import EXTRA_FORMATS, RenditionFormat, extra_formats

MIB = 1024 * 1024
DAY = 24 * 3600
AUTH_MODES = ("jwt", "cognito")
# The storages whose event shape an AMQP resend may take: domain/events.py has a builder
# for each (not imported here: a GET loads no event code).
AMQP_EVENT_SHAPES = ("minio", "ceph")
# The bucket's lifecycle aborts multipart uploads left incomplete this long (infra/template.yaml).
INCOMPLETE_UPLOAD_DAYS = 1
# What the worker holds beside its decoding child: the interpreter, the SDKs, Pillow, an
# original at the direct-upload limit and its renditions.
WORKER_OWN_MB = 256
# The contract's local default: public, so it may only ever serve the local runner.
DEFAULT_JWT_SECRET = "dev-secret-change-me"
# What a held request keeps of its invocation's time to read the job and answer.
WAIT_MARGIN_SECONDS = 3
# What the derived settings keep of a timeout: a lease outlives its worker's invocation by
# this much; a sweep's last batch and an orphan scan's last page, begun at the budget's end,
# still fit in the function's timeout (tests/deploy/test_capacity.py).
LEASE_MARGIN_SECONDS = 60
SWEEP_MARGIN_SECONDS = 10
ORPHAN_SCAN_MARGIN_SECONDS = 60


@dataclass(frozen=True)
class Settings:
    region: str = "us-east-1"
    # One endpoint for S3, SQS and DynamoDB: moto's server, LocalStack, or None for AWS.
    endpoint_url: Optional[str] = None
    # S3 somewhere else than the other services (MinIO beside LocalStack, say).
    s3_endpoint_url: Optional[str] = None
    # The S3 endpoint clients can reach, for presigned URLs (MinIO behind a proxy, say).
    public_s3_endpoint_url: Optional[str] = None
    # Where object-created events arrive: "sqs" (AWS, LocalStack, embedded) or "amqp" (MinIO,
    # Ceph's RADOS Gateway).
    queue_backend: str = "sqs"
    # The storage behind AMQP, whose event shape the sweeper's resend publishes: "minio"
    # or "ceph" (the RADOS Gateway).
    amqp_event_shape: str = "minio"
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
    events_queue_name: str = "image-jobs-events"
    originals_prefix: str = "originals/"
    renditions_prefix: str = "renditions/"
    auth_mode: str = "jwt"  # "jwt": HS256 checked by the app; "cognito": API Gateway did it
    jwt_secret: str = DEFAULT_JWT_SECRET
    # Set by `python -m local` for itself: the only place the public default secret may serve.
    local_runner: bool = False
    # Lambda sets this in every function; a runner marker there is a deploy mistake.
    lambda_function_name: Optional[str] = None
    # The user pool whose tokens API Gateway's authorizer accepts (auth_mode "cognito" only).
    cognito_user_pool_arn: Optional[str] = None
    # This app's clients of that pool, comma-separated (the stack's UserPoolClientId): only
    # their ID tokens name an owner, on REST and at push connect (http/auth.py cognito_owner).
    cognito_app_client_ids: str = ""
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
    # A ready job's URLs (chalicelib/domain/delivery.py): the same on every read within a
    # window of url_window_seconds, each valid for at least url_ttl_seconds after it is
    # handed out (so signed for the two together from the window's start).
    url_window_seconds: int = 3600
    url_ttl_seconds: int = 3600
    # How renditions reach apps: "s3", presigned S3 URLs (every local stack), or "cloudfront",
    # CloudFront signed URLs on the stack's distribution (its domain, the trusted public key's
    # id, and the Secrets Manager secret holding the private key's PEM; stack outputs).
    delivery: str = "s3"
    cloudfront_domain: str = ""
    cloudfront_key_pair_id: str = ""
    cloudfront_private_key_secret: str = ""
    # DELIVERY=cloudfront: a DELETE also asks the distribution (its id, a stack output) to drop
    # the job's renditions, so that URLs handed out before it stop serving (docs/contract.md
    # "Delivery"; its price in docs/scale.md). The call waits at most
    # invalidation_timeout_seconds, one attempt: a slow CloudFront never holds the DELETE.
    invalidate_on_delete: bool = False
    cloudfront_distribution_id: str = ""
    invalidation_timeout_seconds: int = 2
    retention_seconds: int = 7 * DAY
    # Unset: worker_timeout_seconds + LEASE_MARGIN_SECONDS (__post_init__).
    lease_seconds: Optional[int] = None
    # The functions' timeouts (lambda_timeout in .chalice/config.json; infra/stage_config.py
    # copies them here). The SDK's timeouts and retries are derived from the shortest, and
    # each invocation's budget from its own (chalicelib/runtime/deadline.py); the local
    # worker gives each job the worker's.
    api_timeout_seconds: int = 25
    worker_timeout_seconds: int = 60
    sweep_timeout_seconds: int = 50
    webhook_function_timeout_seconds: int = 30
    push_stream_timeout_seconds: int = 60
    max_attempts: int = 3
    upload_url_ttl_seconds: int = 900
    # Direct uploads of at least this many bytes may go in parts (method "multipart"), each
    # of multipart_part_bytes but the last (S3 wants at least 5 MiB). A multipart upload
    # may take multipart_upload_ttl_seconds, its part URLs each upload_url_ttl_seconds.
    multipart_min_bytes: int = 16 * MIB
    multipart_part_bytes: int = 8 * MIB
    multipart_upload_ttl_seconds: int = DAY // 2
    # The slowest uplink a phone's upload is planned for (1 Mbit/s): a request begun before
    # its URL expires may take the largest one allowed at this speed to arrive, and the
    # sweeper waits that long past the deadline (Context.upload_grace).
    slowest_uplink_bytes_per_second: int = 125_000
    idempotency_ttl_seconds: int = DAY
    # How long a job may be queued before the sweeper asks whether its message is lost.
    queue_timeout_seconds: int = 600
    # How late storage may deliver an object-created notification (S3: usually seconds).
    event_delay_seconds: int = 60
    # The bucket's lifecycle backstop (infra/template.yaml, ObjectExpirationDays).
    bucket_lifecycle_days: int = 9
    # An original or rendition with no job is deleted once it is older than this.
    orphan_grace_seconds: int = 3600
    sweep_interval_seconds: int = 60
    # The sweep asks every shard of every status (docs/scale.md §6.1) in a pool of this many
    # threads, and takes no new shard after this many seconds of its run (unset: its
    # timeout less SWEEP_MARGIN_SECONDS): what is left stays due, and the next run starts there.
    sweep_threads: int = 16
    sweep_budget_seconds: Optional[int] = None
    # The orphan scan (chalicelib/usecases/orphans.py, docs/scale.md §6.3) runs this often,
    # each run taking the two key ranges of one hex digit (the minute's) where their last run
    # stopped, in a pool of this many threads, no new page after the budget (unset: its
    # timeout less ORPHAN_SCAN_MARGIN_SECONDS). A range starts a new pass over its keys at
    # most once per orphan_pass_seconds.
    orphan_scan_interval_seconds: int = 60
    orphan_scan_timeout_seconds: int = 900
    orphan_scan_budget_seconds: Optional[int] = None
    orphan_scan_threads: int = 2
    orphan_pass_seconds: int = DAY
    # Backpressure in the cloud: at most this many worker Lambdas read the queue at once
    # (the SQS event source's maximum concurrency; AWS accepts 2 to 1000).
    worker_max_concurrency: int = 5
    # The decode budget (chalicelib/imaging/limits.py): refused at upload from the structure alone.
    max_scans: int = 64
    max_frames: int = 1000
    max_metadata_bytes: int = 1024 * 1024
    # CPU seconds one image may use in the worker's decoding child (chalicelib/imaging/sandbox.py);
    # past it the job fails image_too_complex. 0 decodes in-process, without a limit.
    decode_cpu_seconds: int = 6
    # Memory one image may take in the decoding child beyond what it inherits from the
    # worker (the kernel's RLIMIT_DATA); past it the job fails image_too_complex. With the
    # worker's own it must fit the worker function's memory, checked when the worker starts.
    # The worst image under MAX_PIXELS needs about 220 (benchmarks/decode_memory.py).
    decode_memory_mb: int = 512
    # An animated source's animation (chalicelib/imaging/animate.py): made only up to this
    # many frames, and this many pixels in all (frames x width x height of the canvas), since
    # every frame is decoded, resized and coded for every rendition: its cost grows with
    # both. Past either the job is ready with its stills alone and says why (`animation_skipped`).
    # 150 frames of 640x480 or 60 of 1080x1080 fit (benchmarks/animation.py); a sticker or
    # a chat GIF is far less.
    max_animation_frames: int = 500
    max_animation_pixels: int = 120_000_000
    # CPU seconds the animation may use in the decoding child, a call of its own after the
    # stills' (so an animation that cannot be made never costs the job its stills); past it
    # the job is ready without it (`animation_too_complex`). Its memory ceiling is
    # decode_memory_mb, as for the stills.
    animation_cpu_seconds: int = 15
    # Lambda's own variable: the memory of the function this process runs in.
    lambda_function_memory_mb: Optional[int] = None
    # Fairness: unfinished jobs one owner may have at once, and its request rate (a token
    # bucket per owner: this many requests a second, bursts up to owner_burst).
    max_active_jobs: int = 20
    # API Gateway's throttle for the whole stage, in front of every owner (cloud only).
    api_rate_limit: int = 1000
    api_burst_limit: int = 2000
    owner_requests_per_second: int = 10
    owner_burst: int = 40
    # Prefer: wait (RFC 7240): the longest a request is held for a job to change, 0 to never
    # hold; and how many held requests one owner may have at once, across every instance.
    max_wait_seconds: int = 20
    max_waits_per_owner: int = 4
    # Push (docs/contract.md "Push"): the WebSocket URL clients connect to, the management
    # endpoint the fan-out posts to (API Gateway's https://<api>/<stage>; locally the
    # runner's), and the table's stream that drives the fan-out in the cloud (empty: the
    # writes themselves hand each change to the fan-out, as the local runner does). A stage
    # serves push when either is set (`serves_push`): a cloud stage knows its stream before
    # its first deploy creates the WebSocket API, whose URL infra/stage_config.py adds after.
    push_url: str = ""
    push_management_url: str = ""
    push_stream_arn: str = ""
    # Open connections one owner may have at once, across every instance; past it a connect
    # is refused with 429.
    max_push_connections_per_owner: int = 10
    # The stream handler's sends side by side, one job's changes in order (usecases/push.py):
    # enough for a shard written at its full rate (infra/capacity.py, docs/scale.md §9).
    push_send_threads: int = 16
    # The longest a connection is kept in the table past its start: API Gateway closes every
    # connection after 2 hours, so an entry older than this has surely gone.
    push_connection_seconds: int = 7800
    # The boxes of the renditions, in pixels: each row of chalicelib/domain/renditions.py's
    # table names the setting that sizes it.
    display_box: int = 1280
    thumb_box: int = 256
    thumb_512_box: int = 512
    jpeg_quality: int = 85
    # The extra formats an upload may ask for (`?formats=` / "formats"), of webp and avif;
    # empty: JPEG only. Each one's quality is where the worker starts: it raises it per
    # rendition until the SSIM is at least the JPEG's (chalicelib/imaging/render.py).
    rendition_formats: str = "webp,avif"
    webp_quality: int = 85
    avif_quality: int = 70
    # libaom's speed, 0 (smallest, slowest) to 10; picked by bytes against CPU
    # (benchmarks/renditions.py, docs/scale.md).
    avif_speed: int = 9
    # Observability: the `service` dimension of every metric (the stack's name in the cloud,
    # so that two stages in one account never mix), and where dead letters are counted.
    metrics_service: str = "image-jobs"
    # An `http_request` log line for every API request (the local runner's access log), or
    # only for error answers: then a cold GET that logs nothing never loads structlog; every
    # request is counted and timed in the metrics either way.
    log_every_request: bool = False
    events_dead_letter_queue: Optional[str] = None  # default: <events_queue_name>-dlq, as the local stack names it
    # Webhooks (chalicelib/usecases/webhooks.py): their own queue and dead-letter queue.
    webhook_queue_name: str = "image-jobs-webhooks"
    webhook_dead_letter_queue: Optional[str] = None  # default: <webhook_queue_name>-dlq
    # Loopback receivers, over plain http too: the local runner's default, never the cloud's.
    webhook_allow_loopback: bool = False
    # One delivery attempt, connecting and answering together, is cut off after this (the
    # delivery function's own timeout is webhook_function_timeout_seconds).
    webhook_attempt_seconds: int = 5
    # Seconds to wait after each failed attempt (Standard Webhooks' schedule, about 27 hours
    # in all); one attempt more than delays, then the event is dead-lettered. The same steps
    # are the owner's breaker windows while their endpoint is down.
    webhook_retry_delays: str = "5,300,1800,7200,18000,36000,36000"
    # Delivery Lambdas reading the webhook queue at once (the event source's maximum).
    webhook_max_concurrency: int = 5
    # Deliveries to one receiver (an owner's endpoint) in flight at once, across every delivery
    # function: fewer than the functions, so that one slow receiver never holds them all.
    # Unset: 2, or 1 where there are only 2 functions (receiver_slots).
    webhook_receiver_slots: Optional[int] = None

    def __post_init__(self) -> None:
        # Derived from the timeouts unless set. dataclasses.replace copies the values, so a
        # replaced timeout keeps the lease and budgets derived from the old one.
        derived = {"lease_seconds": self.worker_timeout_seconds + LEASE_MARGIN_SECONDS,
                   "sweep_budget_seconds": self.sweep_timeout_seconds - SWEEP_MARGIN_SECONDS,
                   "orphan_scan_budget_seconds": self.orphan_scan_timeout_seconds - ORPHAN_SCAN_MARGIN_SECONDS}
        for name, value in derived.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "Settings":
        values = {}
        for field in fields(cls):
            raw = _read(environ, field.name)
            if raw is None or raw == "":
                continue
            values[field.name] = parse_value(field.name, field.type, raw)
        settings = cls(**values)
        settings._check()
        return settings

    def _check(self) -> None:
        """What would otherwise fail only at deploy time, or silently in the cloud: refuse to
        start rather than run open or lose data."""
        if self.auth_mode not in AUTH_MODES:
            raise ValueError(f"AUTH_MODE must be one of {', '.join(AUTH_MODES)} exactly, got "
                             f"{self.auth_mode!r}: an unknown mode would leave the API without "
                             "an authorizer")
        if self.amqp_event_shape not in AMQP_EVENT_SHAPES:
            raise ValueError(f"AMQP_EVENT_SHAPE must be one of {', '.join(AMQP_EVENT_SHAPES)}, got "
                             f"{self.amqp_event_shape!r}")
        if self.local_runner and self.lambda_function_name:
            raise ValueError("LOCAL_RUNNER is set in a Lambda function: it belongs to "
                             "`python -m local` only; remove it from the stage's variables")
        if self.auth_mode == "jwt" and self.jwt_secret == DEFAULT_JWT_SECRET and not self.local_runner:
            raise ValueError("AUTH_JWT_SECRET is the public default, which only the local runner "
                             "(python -m local) may use: set AUTH_JWT_SECRET to a secret of your "
                             "own, or AUTH_MODE=cognito in the cloud")
        if self.lease_seconds <= self.worker_timeout_seconds:
            raise ValueError(f"LEASE_SECONDS ({self.lease_seconds}) must be longer than "
                             f"WORKER_TIMEOUT_SECONDS ({self.worker_timeout_seconds}): a lease "
                             "that ends while its worker still runs lets two attempts overlap")
        lifecycle = self.bucket_lifecycle_days * DAY
        if self.retention_seconds + DAY > lifecycle:
            raise ValueError(f"RETENTION_SECONDS ({self.retention_seconds}) must end at least a "
                             f"day before the bucket's lifecycle deletes objects "
                             f"(BUCKET_LIFECYCLE_DAYS={self.bucket_lifecycle_days}): it would "
                             "delete the images of jobs that are still ready")
        if self.delivery not in ("s3", "cloudfront"):
            raise ValueError(f"DELIVERY must be s3 or cloudfront, got {self.delivery!r}")
        if self.delivery == "cloudfront" and not (self.cloudfront_domain and self.cloudfront_key_pair_id
                                                  and self.cloudfront_private_key_secret):
            raise ValueError("DELIVERY=cloudfront needs CLOUDFRONT_DOMAIN, CLOUDFRONT_KEY_PAIR_ID and "
                             "CLOUDFRONT_PRIVATE_KEY_SECRET (stack outputs: python -m infra.stage_config)")
        if self.invalidate_on_delete and not (self.delivery == "cloudfront" and self.cloudfront_distribution_id):
            raise ValueError("INVALIDATE_ON_DELETE=1 needs DELIVERY=cloudfront and "
                             "CLOUDFRONT_DISTRIBUTION_ID (a stack output: python -m infra.stage_config)")
        if self.url_window_seconds < 1 or self.url_ttl_seconds < self.url_window_seconds:
            raise ValueError(f"URL_TTL_SECONDS ({self.url_ttl_seconds}) must be at least "
                             f"URL_WINDOW_SECONDS ({self.url_window_seconds}), which must be at least 1: "
                             "a URL handed out at a window's end must live through the next one")
        if self.url_window_seconds + self.url_ttl_seconds > 7 * DAY:
            raise ValueError("URL_WINDOW_SECONDS + URL_TTL_SECONDS must be at most 7 days: SigV4 "
                             "refuses a presigned URL signed for longer")
        if self.multipart_part_bytes < 5 * MIB:
            raise ValueError(f"MULTIPART_PART_BYTES ({self.multipart_part_bytes}) must be at least "
                             "5 MiB: S3 refuses a completion whose parts but the last are smaller")
        if self.multipart_upload_ttl_seconds >= INCOMPLETE_UPLOAD_DAYS * DAY:
            raise ValueError(f"MULTIPART_UPLOAD_TTL_SECONDS ({self.multipart_upload_ttl_seconds}) "
                             f"must end before the bucket aborts incomplete uploads "
                             f"({INCOMPLETE_UPLOAD_DAYS} days): it would abort one still under way")
        if self.slowest_uplink_bytes_per_second < 1:
            raise ValueError("SLOWEST_UPLINK_BYTES_PER_SECOND must be at least 1: the sweeper's "
                             "grace for an upload in flight is derived from it")
        if self.auth_mode == "cognito" and not self.cognito_user_pool_arn:
            raise ValueError("AUTH_MODE=cognito needs COGNITO_USER_POOL_ARN, a stack output: "
                             "run python -m infra.stage_config <stage> (docs/deploy.md)")
        if self.auth_mode == "cognito" and not self.cognito_app_clients:
            raise ValueError("AUTH_MODE=cognito needs COGNITO_APP_CLIENT_IDS, a stack output "
                             "(UserPoolClientId): without it no token names an owner; run "
                             "python -m infra.stage_config <stage> (docs/deploy.md)")
        if not self.route_prefix.startswith("/") or self.route_prefix.endswith("/"):
            raise ValueError("ROUTE_PREFIX must start with '/' and not end with one, "
                             f"got {self.route_prefix!r}")
        if self.sweep_budget_seconds < 1 or self.orphan_scan_budget_seconds < 1:
            raise ValueError(f"SWEEP_BUDGET_SECONDS ({self.sweep_budget_seconds}) and ORPHAN_SCAN_BUDGET_SECONDS "
                             f"({self.orphan_scan_budget_seconds}) must be at least 1: unset, each is its "
                             f"function's timeout less {SWEEP_MARGIN_SECONDS} s and "
                             f"{ORPHAN_SCAN_MARGIN_SECONDS} s")
        if self.orphan_scan_budget_seconds >= self.orphan_scan_timeout_seconds:
            raise ValueError(f"ORPHAN_SCAN_BUDGET_SECONDS ({self.orphan_scan_budget_seconds}) must "
                             f"be under ORPHAN_SCAN_TIMEOUT_SECONDS ({self.orphan_scan_timeout_seconds}): "
                             "a page started at the budget's end must still fit")
        if 16 * self.orphan_scan_interval_seconds <= self.orphan_scan_timeout_seconds:
            raise ValueError(f"16 x ORPHAN_SCAN_INTERVAL_SECONDS ({self.orphan_scan_interval_seconds}) must "
                             f"exceed ORPHAN_SCAN_TIMEOUT_SECONDS ({self.orphan_scan_timeout_seconds}): a "
                             "hex digit's ranges come round every 16 runs, and its last run must have ended")
        if self.decode_cpu_seconds and self.decode_cpu_seconds * 2 >= self.worker_timeout_seconds:
            raise ValueError("DECODE_CPU_SECONDS must leave the worker time to store the result: "
                             f"under half of WORKER_TIMEOUT_SECONDS ({self.worker_timeout_seconds})")
        if self.decode_cpu_seconds and \
                self.decode_cpu_seconds + self.animation_cpu_seconds >= self.worker_timeout_seconds:
            raise ValueError("DECODE_CPU_SECONDS and ANIMATION_CPU_SECONDS together must be under "
                             f"WORKER_TIMEOUT_SECONDS ({self.worker_timeout_seconds}): both calls run in "
                             "one invocation")
        # API Gateway ends a request at 29 s; the hold must also leave the API function time
        # to read the job and answer.
        if not 0 <= self.max_wait_seconds <= min(28, self.api_timeout_seconds - WAIT_MARGIN_SECONDS):
            raise ValueError(f"MAX_WAIT_SECONDS ({self.max_wait_seconds}) must be 0 to "
                             f"{min(28, self.api_timeout_seconds - WAIT_MARGIN_SECONDS)}: under the "
                             f"gateway's 29 s and API_TIMEOUT_SECONDS ({self.api_timeout_seconds}) less "
                             f"{WAIT_MARGIN_SECONDS} s to answer")
        if self.max_push_connections_per_owner < 1:
            raise ValueError("MAX_PUSH_CONNECTIONS_PER_OWNER must be at least 1, "
                             f"got {self.max_push_connections_per_owner}")
        if not 2 <= self.worker_max_concurrency <= 1000:
            raise ValueError("WORKER_MAX_CONCURRENCY must be between 2 and 1000, "
                             f"got {self.worker_max_concurrency}")
        if not 2 <= self.webhook_max_concurrency <= 1000:
            raise ValueError("WEBHOOK_MAX_CONCURRENCY must be between 2 and 1000, "
                             f"got {self.webhook_max_concurrency}")
        if not 1 <= self.receiver_slots < self.webhook_max_concurrency:
            raise ValueError("WEBHOOK_RECEIVER_SLOTS must be at least 1 and below WEBHOOK_MAX_CONCURRENCY "
                             f"({self.webhook_max_concurrency}), got {self.webhook_receiver_slots}")
        try:
            delays = self.webhook_delays
        except ValueError:
            delays = ()
        try:
            self.enabled_formats
        except InvalidRequest:
            raise ValueError("RENDITION_FORMATS must name only webp and avif, comma-separated, "
                             f"got {self.rendition_formats!r}") from None
        if not 0 <= self.avif_speed <= 10 or not 1 <= self.webp_quality <= 100 or not 1 <= self.avif_quality <= 100:
            raise ValueError("AVIF_SPEED must be 0 to 10, WEBP_QUALITY and AVIF_QUALITY 1 to 100")
        # SQS holds a message back for at most 12 hours.
        if not delays or not all(0 < d <= 43200 for d in delays):
            raise ValueError("WEBHOOK_RETRY_DELAYS must be seconds, comma-separated, each 1 to "
                             f"43200, got {self.webhook_retry_delays!r}")

    def check_decode_memory(self) -> None:
        """The worker's start: a decode at the ceiling, beside the worker itself, must fit the
        function, or the function would be stopped instead of the image refused."""
        memory = self.lambda_function_memory_mb
        if self.decode_cpu_seconds and memory and self.decode_memory_mb + WORKER_OWN_MB > memory:
            raise ValueError(f"DECODE_MEMORY_MB ({self.decode_memory_mb}) and the worker's own "
                             f"{WORKER_OWN_MB} MB do not fit the function's memory ({memory} MB): "
                             "lower DECODE_MEMORY_MB or give the worker function more memory")

    @property
    def cognito_app_clients(self) -> frozenset[str]:
        return frozenset(c.strip() for c in self.cognito_app_client_ids.split(",") if c.strip())

    @property
    def serves_push(self) -> bool:
        return bool(self.push_url or self.push_stream_arn)

    @property
    def enabled_formats(self) -> tuple[RenditionFormat, ...]:
        """RENDITION_FORMATS as RenditionFormat members (checked at start by _check)."""
        return extra_formats(filter(None, self.rendition_formats.split(",")), EXTRA_FORMATS)

    @property
    def webhook_delays(self) -> tuple[int, ...]:
        return tuple(int(part) for part in self.webhook_retry_delays.split(","))

    @property
    def receiver_slots(self) -> int:
        """WEBHOOK_RECEIVER_SLOTS, or its default."""
        if self.webhook_receiver_slots is not None:
            return self.webhook_receiver_slots
        return min(2, self.webhook_max_concurrency - 1)

    @property
    def webhook_attempts(self) -> int:
        return len(self.webhook_delays) + 1

    @property
    def events_dead_letter_queue_name(self) -> str:
        return self.events_dead_letter_queue or f"{self.events_queue_name}-dlq"

    @property
    def webhook_dead_letter_queue_name(self) -> str:
        return self.webhook_dead_letter_queue or f"{self.webhook_queue_name}-dlq"

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
    "events_queue_name": "EVENTS_QUEUE",
    "jwt_secret": "AUTH_JWT_SECRET",
    "lambda_function_name": "AWS_LAMBDA_FUNCTION_NAME",
    "lambda_function_memory_mb": "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
    "events_dead_letter_queue": "EVENTS_DLQ",
    "webhook_queue_name": "WEBHOOK_QUEUE",
    "webhook_dead_letter_queue": "WEBHOOK_DLQ",
}


# Settings where 0 means "off".
_MAY_BE_ZERO = frozenset({"decode_cpu_seconds", "max_wait_seconds", "avif_speed"})


# Names a deployed stage may still carry from before a word got one meaning; read when the
# new name is unset, refused when both are set and disagree.
_OLD_ENV_NAMES = {
    "events_queue_name": "JOBS_QUEUE",
    "events_dead_letter_queue": "JOBS_DLQ",
    "orphan_scan_interval_seconds": "ORPHAN_SWEEP_INTERVAL_SECONDS",
    "orphan_scan_timeout_seconds": "ORPHAN_SWEEP_TIMEOUT_SECONDS",
    "orphan_scan_budget_seconds": "ORPHAN_SWEEP_BUDGET_SECONDS",
    "orphan_scan_threads": "ORPHAN_SWEEP_THREADS",
    "thumb_box": "THUMB_SIZE",
    "thumb_512_box": "THUMB_512_SIZE",
    "webhook_attempt_seconds": "WEBHOOK_TIMEOUT_SECONDS",
}


def env_name(field_name: str) -> str:
    return _ENV_NAMES.get(field_name, field_name.upper())


def _read(environ: Mapping[str, str], field_name: str) -> Optional[str]:
    raw = environ.get(env_name(field_name)) or None
    old = _OLD_ENV_NAMES.get(field_name)
    legacy = environ.get(old) or None if old else None
    if raw is not None and legacy is not None and raw != legacy:
        raise ValueError(f"{env_name(field_name)}={raw!r} and its old name {old}={legacy!r} disagree: "
                         f"remove {old}")
    return raw if raw is not None else legacy


def parse_value(name: str, kind: str, raw: str):
    """A variable's text as the field's type (local/settings.py reads the runner's with it too)."""
    if kind in ("bool", "Optional[bool]"):
        if raw not in ("0", "1"):
            raise ValueError(f"{env_name(name)} must be 0 or 1, got {raw!r}")
        return raw == "1"
    if kind in ("int", "Optional[int]"):
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"{env_name(name)} must be an integer, got {raw!r}") from None
        if value < 0 or (value == 0 and name not in _MAY_BE_ZERO):
            raise ValueError(f"{env_name(name)} must be positive, got {value}")
        return value
    return raw
