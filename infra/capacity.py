"""The capacity model behind docs/scale.md, and the sizes it gives each stage.

    python -m infra.report            # usage against every limit, what breaks, cost per 1,000

Three kinds of numbers, kept apart:
- AWS's limits, as published (docs/scale.md names each page; not checked live, this machine
  cannot reach AWS);
- what one image costs us, measured: the calls, capacity units and log lines of each phase,
  counted by benchmarks/calls_per_job.py from the real code (a test re-measures them, so a
  change to the code that changes them fails until this file follows), and Pillow's time
  from benchmarks/resize.py;
- assumptions, where nothing here can measure: in-region latencies, the image mix, how
  often clients poll, user habits. Each says so.

The stage sizes (maximum and reserved concurrency, MAX_BACKLOG, the queue's visibility
timeout) are derived here; tests/deploy/test_capacity.py pins .chalice/config.json and
infra/template.yaml to them. benchmarks/capacity_sim.py runs the dynamics on these figures.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from chalicelib.config import Settings
from chalicelib.domain.jobs import DUE_SHARDS

DAY = 86_400
# The settings' defaults, as every stage deploys them (tests/deploy/test_capacity.py).
DEFAULTS = Settings()

# -- AWS's limits, as published ---------------------------------------------------------------
LAMBDA_ACCOUNT_CONCURRENCY = 1_000  # per Region, default; adjustable
LAMBDA_UNRESERVED_MINIMUM = 100  # Lambda refuses a reservation that leaves less unreserved
LAMBDA_RPS_PER_CONCURRENCY = 10  # invocations/s quota = 10 x the concurrency quota
LAMBDA_SCALE_PER_10S = 1_000  # new execution environments per function every 10 s
ESM_START = 5  # SQS event source: concurrent batches when messages appear
ESM_RAMP_PER_MINUTE = 300  # ... then up to this many more per minute
ESM_MAX = 1_000  # ... up to this many per event source mapping (standard queue)
MAX_CONCURRENCY_RANGE = (2, 1_000)  # the mapping's ScalingConfig.MaximumConcurrency
VISIBILITY_PER_FUNCTION_TIMEOUT = 6  # AWS: visibility timeout >= 6 x the function's timeout
MIN_MAX_RECEIVE_COUNT = 5  # AWS: maxReceiveCount >= 5 on a Lambda source queue
SQS_IN_FLIGHT = 120_000  # received, not yet deleted, per standard queue
API_GATEWAY_RPS = 10_000  # REST, per account and Region, steady
API_GATEWAY_BURST = 5_000  # ... token bucket depth
API_GATEWAY_TIMEOUT_S = 29
S3_PREFIX_WRITES = 3_500  # PUT/COPY/POST/DELETE per second per partitioned prefix
S3_PREFIX_READS = 5_500  # GET/HEAD per second per partitioned prefix
DYNAMO_PARTITION_WCU = 1_000  # per partition, table or index, per second
DYNAMO_PARTITION_RCU = 3_000
DYNAMO_TABLE_UNITS = 40_000  # on-demand, per table, reads and writes each; adjustable
DYNAMO_NEW_TABLE_WCU = 4_000  # a new on-demand table, at once
COGNITO_AUTH_RPS = 120  # user pool "UserAuthentication" category (sign-in, refresh)

# -- measured: one image through the code (benchmarks/calls_per_job.py) ----------------------
# Per phase: AWS calls, DynamoDB write units on the table and on the `sweep` index, read units,
# and our JSON log lines. An image comes through POST /images (upload, worker) or through
# POST /uploads and the client's own POST to S3 (direct_upload, direct_worker). Items stay
# under 1 KB (a ready job through POST /images is about 980 B), so every write is one unit,
# but a direct upload's ready one (two units: see direct_worker). "expiry" is the sweeper
# removing one job (a batch of one: its calls serve a whole batch, see removal_seconds); a
# sweep run also costs its queries (SWEEP_RUN_QUERIES) and a summary line. Creating a
# job is a transaction with its owner's quota place (2 items, 2 units each); the place is given
# back with one small update when the job finishes. A finished job's owner is looked up for a
# webhook, and each status a job takes after its upload (queued, processing, the terminal
# one) looks the service webhook up (issue 34): one GetItem each, but at the terminal one
# both webhooks are read in one BatchGetItem (a unit each, as two GetItems; issue 48: one
# call less a job for the worker's CPU); metric lines (EMF) are log lines too: one per upload (a direct one has
# UploadsCreated by method besides), two per worker run. Not measured here: each API request's
# access line and metric line (about 500 B).
MEASURED = {
    "upload": {"calls": {"dynamodb:GetItem": 1, "dynamodb:TransactWriteItems": 1, "s3:PutObject": 1},
        "wcu": 4, "index_wcu": 1, "rcu": 1, "log_lines": 2, "log_bytes": 486,
        "index_writes": {"put:queued": 1}},
    "upload_with_key": {"calls": {"dynamodb:GetItem": 1, "dynamodb:TransactWriteItems": 1, "s3:PutObject": 1},
        "wcu": 6, "index_wcu": 1, "rcu": 1, "log_lines": 2, "log_bytes": 486,
        "index_writes": {"put:queued": 1}},
    "direct_upload": {"calls": {"dynamodb:TransactWriteItems": 1},
        "wcu": 4, "index_wcu": 1, "rcu": 0, "log_lines": 3, "log_bytes": 700,
        "index_writes": {"put:awaiting_upload": 1}},
    # Measured: one GetItem more than before the landed-write change (41e4b08), which reads a
    # job back when a conditional write is refused; not yet traced to its call.
    # Issue 50: one GetItem more (the duplicate index) and one PutItem (noting the ready job
    # in it) than before, in both workers. Issue 49: the focus took a direct upload's ready
    # item (it keeps its upload's facts) past 1 KB: its last write is two units, on the table
    # and on the index.
    "direct_worker": {"calls": {"dynamodb:BatchGetItem": 1, "dynamodb:GetItem": 5, "dynamodb:PutItem": 3, "dynamodb:UpdateItem": 3, "s3:GetObject": 1, "s3:PutObject": 3},
        "wcu": 6, "index_wcu": 7, "rcu": 7, "log_lines": 5, "log_bytes": 1180,
        "index_writes": {"delete:awaiting_upload": 1, "delete:processing": 1, "delete:queued": 1, "put:processing": 1, "put:queued": 1, "put:ready": 1}},
    "poll": {"calls": {"dynamodb:GetItem": 1},
        "wcu": 0, "index_wcu": 0, "rcu": 1, "log_lines": 0, "log_bytes": 0,
        "index_writes": {}},
    "worker": {"calls": {"dynamodb:BatchGetItem": 1, "dynamodb:GetItem": 2, "dynamodb:PutItem": 2, "dynamodb:UpdateItem": 2, "s3:GetObject": 1, "s3:PutObject": 3},
        "wcu": 4, "index_wcu": 4, "rcu": 4, "log_lines": 4, "log_bytes": 1017,
        "index_writes": {"delete:processing": 1, "delete:queued": 1, "put:processing": 1, "put:ready": 1}},
    # The same owner's same bytes again (chalicelib/usecases/duplicates.py): the index read,
    # the twin read, and a CopyObject per rendition instead of decode, encodes and PutObjects.
    "duplicate_worker": {"calls": {"dynamodb:BatchGetItem": 1, "dynamodb:GetItem": 3, "dynamodb:PutItem": 2, "dynamodb:UpdateItem": 2, "s3:CopyObject": 3, "s3:GetObject": 1},
        "wcu": 4, "index_wcu": 4, "rcu": 5, "log_lines": 5, "log_bytes": 1266,
        "index_writes": {"delete:processing": 1, "delete:queued": 1, "put:processing": 1, "put:ready": 1}},
    "expiry": {"calls": {"dynamodb:BatchWriteItem": 1, "dynamodb:UpdateItem": 1, "s3:DeleteObjects": 1},
        "wcu": 2, "index_wcu": 1, "rcu": 0, "log_lines": 0, "log_bytes": 0,
        "index_writes": {"delete:ready": 1}},
}
# The per-owner request rate (chalicelib/usecases/admission.py): one conditional UpdateItem
# on the owner's `rate#` item for each lease of up to 10 tokens (chalicelib/usecases/leases.py).
# Writes per 1,000 requests: one instance, a busy owner, 100 (tests/unit/test_fairness.py);
# four processes on one owner past its rate (benchmarks/rate_limit.py, issue 36): 320-390
# per 1,000 accepted (9 per 1,000 sent; before leases 1,060-1,090 per 1,000 accepted). The
# model takes the four processes' 390, as the load at scale is owners sending many requests
# each (an integration's uploads and polls) to several instances; an owner's lone request, a
# second or more from its last, still costs 1 WRU (a lease of one). Not in MEASURED:
# calls_per_job.py calls the use cases, not the routes.
RATE_LIMIT_WRITES_PER_1000_REQUESTS = 390
RATE_LIMIT_WRU_PER_REQUEST = RATE_LIMIT_WRITES_PER_1000_REQUESTS / 1000
CLIENT_S3_POSTS = {"direct_upload": 1}  # the client's POST of the file: billed as a PUT
# One query per status per shard of the due index, each run.
SWEEP_STATUSES = 6
SWEEP_RUN_QUERIES = SWEEP_STATUSES * DUE_SHARDS
SWEEP_RUN_QUEUE_READS = 4  # GetQueueAttributes: the events and webhook queues and their DLQs
ORPHAN_SCAN_READS_PER_STORED_JOB = 2  # each day's pass reads each job once per prefix (RRU)
# The renditions a job gets by default (chalicelib/domain/renditions.py): display, thumb and
# thumb_512, one JPEG (one PUT) each; the objects are those and the original.
RENDITIONS_PER_JOB = 3
OBJECTS_PER_JOB = 1 + RENDITIONS_PER_JOB



@dataclass(frozen=True)
class ImageKind:
    name: str
    share: float
    renditions_ms: float  # the decoding child's CPU for its renditions, on one core
    original_bytes: int


# The renditions on one core, ms, and benchmarks/resize.py's file sizes: Pillow's were 129, 221
# and 318 (resize.py, Pillow 12.2, median of 5, a quiet machine); libvips' (issue 48) are those
# times the ratio of its CPU to Pillow's on resize.py's three files, measured side by side on a
# shared machine (make_renditions, display and thumb, the median of three each, two rounds):
# 0.78, 1.00 and 0.63. Then the 12 MP JPEG's times the decoding child's CPU with its malloc
# settings and the analyses' cuts over its CPU before (benchmarks/worker_cpu.py side by side,
# three runs: 0.90, 0.83, 0.75; the median 0.83): 100.5 -> 83.6 ms. The 48 MP JPEG and the PNG
# were only spot-checked (4-7 ms less system CPU each): kept. The shares are assumed: mostly
# phone photos.
IMAGE_MIX = (
    ImageKind("12 MP JPEG", 0.85, 83.6, 4_400_000),
    ImageKind("48 MP JPEG", 0.10, 221.0, 17_700_000),
    ImageKind("12 MP PNG", 0.05, 201.0, 21_800_000),
)
# The worker function's own CPU a job beside its decoding child's: the SDK calls, logs and
# metrics, the hand-over to the child (benchmarks/worker_cpu.py, issue 48: the handler's
# thread, 22.6-23.7 ms a job in six runs, with botocore's share 17.6-18.6 ms of it; then
# times its CPU with the photo handed over out of band over its CPU before, side by side,
# three runs: 0.94, 0.95, 0.70; the median 0.94).
WORKER_OWN_CPU_MS = 21.6
RENDITION_BYTES = 320_000  # display + thumb of a 12 MP photo
# Each size beyond display and thumb (issue 33): the JPEG bytes it stores against those two's,
# measured on seven of scikit-image's photographs brought to 12 MP (4032x3024) through the
# worker's render (mean of per-photo ratios: thumb_512 38.9 KB against 143.3 KB), and its
# PUT. The sizes made by default are in RENDITIONS_PER_JOB.
SIZE_BYTES_SHARE = {"thumb_512": 0.27}
DEFAULT_SIZES = ("thumb_512",)


def stored_rendition_bytes(sizes=DEFAULT_SIZES) -> float:
    """The JPEG renditions' bytes of a 12 MP photo with these sizes beyond display and thumb."""
    return RENDITION_BYTES * (1 + sum(SIZE_BYTES_SHARE[s] for s in sizes))
# Extra formats (issue 26), measured by `python benchmarks/renditions.py --formats`: the
# worker's CPU one more format adds to a job with a 1280 px display rendition (the whole job's,
# mean of the set's five such photos, ms on one core: the quality search of render.as_good_as
# included), the bytes it stores against the JPEGs' (the whole set's totals), and the share
# of renditions that get it (the others' JPEG is smaller at its SSIM): one PUT each.
FORMAT_CPU_MS = {"webp": 281.0, "avif": 168.0}
FORMAT_BYTES_SHARE = {"webp": 0.29, "avif": 0.67}
FORMAT_MADE_SHARE = {"webp": 0.70, "avif": 0.97}
FORMAT_SETS = {"none": (), "WebP": ("webp",), "WebP + AVIF": ("webp", "avif")}

# -- assumptions ---------------------------------------------------------------------------------
WORKER_MEMORY_MB = 1024  # .chalice/config.json
FULL_VCPU_MB = 1769  # Lambda gives one full vCPU at this memory, CPU in proportion below it
DYNAMO_CALL_MS = 5  # one in-region DynamoDB request
S3_SMALL_CALL_MS = 30  # an S3 PUT of a rendition, a DELETE
S3_FIRST_BYTE_MS = 25  # an S3 GET before the body flows
S3_MB_PER_S = 85  # one stream from S3 into a 1 GB function
INIT_SECONDS = 1.5  # a new execution environment: imports, clients (1.2-3 s measured here)
NOTIFY_SECONDS = 1.0  # S3 event to a visible SQS message ("typically seconds")
API_UPLOAD_SECONDS = 0.2  # POST /images at 512 MB: body, sniff, hash, one write, one PUT
API_DIRECT_UPLOAD_SECONDS = 0.03  # POST /uploads: one write, a presigned form
DIRECT_UPLOAD_SHARE = 0.5  # images sent through POST /uploads (over 4 MiB, or by choice)
API_POLL_SECONDS = 0.03  # GET: one read, two presigned URLs
POLLS_PER_IMAGE = 2  # clients honour Retry-After: 2 and mostly find the job ready by then
IMAGES_PER_ACTIVE_USER_DAY = 10
AUTHS_PER_ACTIVE_USER_DAY = 2  # a sign-in, a refresh (ID tokens last 60 minutes)
SWEEP_TIMEOUT_S = DEFAULTS.sweep_timeout_seconds  # .chalice/config.json `sweep`
LIST_PAGE_MS = 50  # one ListObjectsV2 page of 1,000 keys
SWEEP_BATCH = 100  # Sweeper.sweep: batches of 100 ...
SWEEP_PER_RUN = 100 * SWEEP_BATCH * DUE_SHARDS  # ... at most 100 per status and shard
SWEEP_THREADS = DEFAULTS.sweep_threads
SWEEP_BUDGET_S = DEFAULTS.sweep_budget_seconds  # no new shard or batch after it
S3_DELETE_OBJECTS_MS = 60  # one DeleteObjects of a batch's 300 keys (assumed: 2 small calls)
DYNAMO_BATCH_WRITE_MS = 10  # one BatchWriteItem of 25 deletes (assumed: 2 small calls)


def cpu_share(memory_mb: int = WORKER_MEMORY_MB) -> float:
    return min(1.0, memory_mb / FULL_VCPU_MB)


def worker_seconds(kind: ImageKind, phase: str = "worker") -> float:
    """One job on the worker Lambda: its CPU (the renditions in the decoding child, and
    the function's own) at the function's CPU share, plus its I/O (DynamoDB's reads and
    writes, the original's GET, the rendition PUTs) one after another."""
    calls = MEASURED[phase]["calls"]
    dynamo = sum(n for op, n in calls.items() if op.startswith("dynamodb:")) * DYNAMO_CALL_MS
    get = S3_FIRST_BYTE_MS + kind.original_bytes / (S3_MB_PER_S * 1e6) * 1000
    puts = calls["s3:PutObject"] * S3_SMALL_CALL_MS
    return ((kind.renditions_ms + WORKER_OWN_CPU_MS) / cpu_share() + dynamo + get + puts) / 1000


def mean_worker_seconds(direct_share: float = DIRECT_UPLOAD_SHARE) -> float:
    return sum(k.share * ((1 - direct_share) * worker_seconds(k)
                          + direct_share * worker_seconds(k, "direct_worker")) for k in IMAGE_MIX)


def removal_seconds(batch: int = SWEEP_BATCH) -> float:
    """The sweeper removing one expired job of a batch: per batch, one DeleteObjects (1,000
    keys a call) and one BatchWriteItem per 25 records; per job, the quota place's UpdateItem
    (MEASURED["expiry"], counted on a batch of one, names the calls)."""
    calls = MEASURED["expiry"]["calls"]
    assert set(calls) == {"s3:DeleteObjects", "dynamodb:BatchWriteItem", "dynamodb:UpdateItem"}, calls
    per_batch = (math.ceil(batch * OBJECTS_PER_JOB / 1000) * S3_DELETE_OBJECTS_MS
                 + math.ceil(batch / 25) * DYNAMO_BATCH_WRITE_MS
                 + batch * calls["dynamodb:UpdateItem"] * DYNAMO_CALL_MS)
    return per_batch / batch / 1000


SEQUENTIAL_SWEEP_PER_RUN = 1_000  # the sweeper before docs/scale.md 6.2: 10 batches of 100 a status


def sequential_sweeper_jobs_per_second() -> float:
    """The sweeper before docs/scale.md 6.2, for the simulation's "before": one expired job
    after another (3 DELETE, 1 DeleteItem), at most 1,000 a run, within its 50 s."""
    one = (OBJECTS_PER_JOB * S3_SMALL_CALL_MS + DYNAMO_CALL_MS) / 1000
    return min(SEQUENTIAL_SWEEP_PER_RUN, SWEEP_TIMEOUT_S / one) / 60


def sweeper_jobs_per_second(threads: int = SWEEP_THREADS) -> float:
    """Expired jobs one sweep run per minute can remove: its batch cap, or its time budget
    over its pool's threads (each shard's batches run one after another)."""
    return min(SWEEP_PER_RUN, threads * SWEEP_BUDGET_S / removal_seconds()) / 60


# The orphan scan (chalicelib/usecases/orphans.py, docs/scale.md §6.3): 32 key ranges, a
# prefix per hex digit of the job id. A run every minute takes one digit's two ranges (one
# thread each), page by page: a LIST of 1,000 keys, a BatchGetItem per 100 jobs, the point
# saved; it stops at its budget and the digit's next run, 16 minutes later, resumes there.
ORPHAN_SCAN_TIMEOUT_S = DEFAULTS.orphan_scan_timeout_seconds  # .chalice/config.json `sweep_orphans`
ORPHAN_SCAN_MEMORY_MB = 1769  # ... a whole core: the threads parse the answers under one GIL
ORPHAN_RUN_EVERY_S = DEFAULTS.orphan_scan_interval_seconds
ORPHAN_BUDGET_S = DEFAULTS.orphan_scan_budget_seconds
ORPHAN_DIGITS = 16  # a digit's ranges come round every 16 runs
ORPHAN_PASS_S = DEFAULTS.orphan_pass_seconds  # every range must finish a pass within it
ORPHAN_KEYS_PER_JOB = {"originals/": 1, "renditions/": RENDITIONS_PER_JOB}
BATCH_GET_MS = 25  # assumed: one consistent BatchGetItem of 100 small projected items
SCAN_PAGE_KEYS = 1000  # orphans.PAGE_KEYS: a point saved (one PutItem) per page
# Measured (benchmarks/sweeper.py, 2,000 ready jobs on moto, this shared 2-core machine under
# a load of ~3): the scanning process's own CPU per stored job, both prefixes (3 keys parsed
# from LIST pages, 2 items from BatchGetItem, signing and HTTP). Its 32 ranges held ~63 jobs
# each, so the per-call costs weigh more than on full pages: an upper bound. (botocore alone
# parses a 1,000-key LIST page in ~80 ms here: 0.24 ms of it.)
ORPHAN_SCAN_CPU_MS_PER_JOB = 0.55


def orphan_scan_io_ms(keys_per_job: int) -> float:
    """One stored job on one range's thread, waiting on calls: its share of a LIST page, of a
    BatchGetItem, of the point's PutItem."""
    return (keys_per_job / 1000 * LIST_PAGE_MS + BATCH_GET_MS / 100
            + keys_per_job / SCAN_PAGE_KEYS * DYNAMO_CALL_MS)


def orphan_scan_jobs_per_second() -> float:
    """One run on one digit: its two threads side by side (the slower range ends the digit's
    pass), and the CPU of both within the function's share of a core."""
    io_bound = 1000 / max(orphan_scan_io_ms(k) for k in ORPHAN_KEYS_PER_JOB.values())
    cpu_bound = 1000 * cpu_share(ORPHAN_SCAN_MEMORY_MB) / ORPHAN_SCAN_CPU_MS_PER_JOB
    return min(io_bound, cpu_bound)


def orphan_scan_max_images_per_day(retention_days: float = DEFAULTS.retention_seconds / DAY) -> float:
    """Past this, some range cannot finish its pass a day: the stored jobs of one digit over
    what its runs (one every 16 minutes, each its budget) read in a day."""
    runs_per_digit = ORPHAN_PASS_S / (ORPHAN_RUN_EVERY_S * ORPHAN_DIGITS)
    jobs_per_digit = runs_per_digit * ORPHAN_BUDGET_S * orphan_scan_jobs_per_second()
    return jobs_per_digit * ORPHAN_DIGITS / retention_days


def orphan_scan_concurrency() -> float:
    """Runs at work at once while every digit has work: the schedule's overlap."""
    return min(ORPHAN_DIGITS, ORPHAN_SCAN_TIMEOUT_S / ORPHAN_RUN_EVERY_S)


# -- per-image totals --------------------------------------------------------------------------
def _paths(direct_share: float, keyed: bool) -> list[tuple[str, float]]:
    upload = "upload_with_key" if keyed else "upload"
    return [(upload, 1 - direct_share), ("worker", 1 - direct_share),
            ("direct_upload", direct_share), ("direct_worker", direct_share)]


def _phases(polls: int, direct_share: float, keyed: bool) -> list[tuple[str, float]]:
    return [*_paths(direct_share, keyed), ("poll", polls), ("expiry", 1)]


def per_image(field: str, polls: int = POLLS_PER_IMAGE, direct_share: float = DIRECT_UPLOAD_SHARE,
              keyed: bool = False) -> float:
    """One image's total of a MEASURED field: its upload by either path, polls, worker, expiry."""
    return sum(MEASURED[phase][field] * times for phase, times in _phases(polls, direct_share, keyed))


def calls_per_image(operation: str, polls: int = POLLS_PER_IMAGE,
                    direct_share: float = DIRECT_UPLOAD_SHARE) -> float:
    """Calls of one operation ("s3:PutObject") or service ("dynamodb:") per image."""
    total = 0.0
    for phase, times in _phases(polls, direct_share, keyed=False):
        calls = dict(MEASURED[phase]["calls"])
        if phase in CLIENT_S3_POSTS:
            calls["s3:PutObject"] = calls.get("s3:PutObject", 0) + CLIENT_S3_POSTS[phase]
        total += times * sum(n for op, n in calls.items() if op.startswith(operation))
    return total


def index_writes_per_key(direct_share: float = DIRECT_UPLOAD_SHARE) -> dict[str, float]:
    """Index writes (puts and deletes) one image makes on each status's key."""
    writes: dict[str, float] = {}
    for phase, times in (*_paths(direct_share, keyed=False), ("expiry", 1)):
        for op_status, n in MEASURED[phase]["index_writes"].items():
            status = op_status.split(":", 1)[1]
            writes[status] = writes.get(status, 0) + n * times
    return writes


def rate_limit_wru_per_image(polls: int = POLLS_PER_IMAGE) -> float:
    """The shared request rate's writes: one an API request (the upload and the polls)."""
    return (1 + polls) * RATE_LIMIT_WRU_PER_REQUEST


def api_seconds_per_image(polls: int = POLLS_PER_IMAGE, direct_share: float = DIRECT_UPLOAD_SHARE) -> float:
    upload = (1 - direct_share) * API_UPLOAD_SECONDS + direct_share * API_DIRECT_UPLOAD_SECONDS
    return upload + polls * API_POLL_SECONDS


# -- what each stage deploys -------------------------------------------------------------------
HEADROOM = 1.25  # concurrency above the mean need at the design peak: service-time spread, cold starts
BACKLOG_SHARE_OF_QUEUE_TIMEOUT = 0.5  # shed before an accepted job could wait this share of QUEUE_TIMEOUT
SHARD_TARGET = 0.5  # a due-index shard runs at most at half a partition at the design ceiling
DESIGN_CEILING_PER_DAY = 100_000_000  # what the due index's shard count is sized for
DESIGN_BURST = 10


@dataclass(frozen=True)
class StageDesign:
    images_per_day: int
    burst: float
    # Reserve the worker's concurrency: it then never starves behind the API, but Lambda
    # refuses it in an account whose quota is under reservation + 100 (new accounts may start at 10).
    reserve: bool


@dataclass(frozen=True)
class StageSizes:
    max_concurrency: int
    reserved_concurrency: Optional[int]
    max_backlog: int


STAGE_DESIGNS = {
    "dev": StageDesign(images_per_day=100_000, burst=DESIGN_BURST, reserve=False),
    # The largest load one event source and a default 1,000 account carry with bursts.
    "prod": StageDesign(images_per_day=10_000_000, burst=DESIGN_BURST, reserve=True),
}


def peak_rate(images_per_day: float, burst: float) -> float:
    return images_per_day / DAY * burst


def worker_concurrency_needed(rate: float) -> float:
    return rate * mean_worker_seconds()


def _round_up(value: float) -> int:
    step = 1 if value < 20 else 10
    return int(math.ceil(value / step) * step)


def _round_down(value: float) -> int:
    """To two significant digits: a limit that reads as the estimate it is."""
    if value < 100:
        return int(value)
    step = 10 ** (int(math.log10(value)) - 1)
    return int(value // step * step)


def stage_sizes(design: StageDesign) -> StageSizes:
    low, high = MAX_CONCURRENCY_RANGE
    need = worker_concurrency_needed(peak_rate(design.images_per_day, design.burst)) * HEADROOM
    concurrency = min(high, max(low, _round_up(need)))
    drain = concurrency / mean_worker_seconds()
    backlog = _round_down(drain * Settings().queue_timeout_seconds * BACKLOG_SHARE_OF_QUEUE_TIMEOUT)
    return StageSizes(concurrency, concurrency if design.reserve else None, backlog)


def api_concurrency_needed(rate: float) -> float:
    return rate * api_seconds_per_image()


def visibility_timeout(worker_timeout: int, lease_seconds: int) -> int:
    """AWS's rule for a Lambda source queue, and never less than the job's lease."""
    return max(VISIBILITY_PER_FUNCTION_TIMEOUT * worker_timeout, lease_seconds)


def due_shards(images_per_day: float = DESIGN_CEILING_PER_DAY, burst: float = DESIGN_BURST) -> int:
    """Shards of each status in the due index: the hottest key's writes at the ceiling's
    peak, over SHARD_TARGET of a partition, up to a power of two."""
    hottest = max(index_writes_per_key().values()) * peak_rate(images_per_day, burst)
    needed = hottest / (DYNAMO_PARTITION_WCU * SHARD_TARGET)
    return 1 << max(0, math.ceil(math.log2(needed)))


# -- usage against the limits -----------------------------------------------------------------
@dataclass(frozen=True)
class Usage:
    component: str
    limit: str
    average: float
    peak: float
    capacity: float  # what the limit allows, in the same unit
    unit: str
    # "peak": it breaks the moment the peak exceeds the limit; "average": a backlog built at
    # the peak is worked off later, so only the average must fit (the sweepers).
    judged_on: str = "peak"

    @property
    def load(self) -> float:
        return (self.peak if self.judged_on == "peak" else self.average) / self.capacity


def usage(images_per_day: float, burst: float = DESIGN_BURST,
          max_concurrency: int = 0, shards: int = 1) -> list[Usage]:
    avg = images_per_day / DAY
    top = avg * burst
    work = mean_worker_seconds()
    api_calls = 1 + POLLS_PER_IMAGE
    keys = max(index_writes_per_key().values())
    rows = [
        Usage("API Gateway requests", "10,000 rps per account (burst 5,000)",
              avg * api_calls, top * api_calls, API_GATEWAY_RPS, "req/s"),
        Usage("Lambda concurrency (API + worker)", "1,000 per account",
              api_concurrency_needed(avg) + avg * work, api_concurrency_needed(top) + top * work,
              LAMBDA_ACCOUNT_CONCURRENCY, "concurrent"),
        Usage("Lambda invocations", "10 x concurrency quota per second",
              avg * (api_calls + 1), top * (api_calls + 1),
              LAMBDA_RPS_PER_CONCURRENCY * LAMBDA_ACCOUNT_CONCURRENCY, "inv/s"),
        Usage("Worker: one SQS event source", "1,000 concurrent per mapping",
              avg * work, top * work, min(ESM_MAX, max_concurrency or ESM_MAX), "concurrent"),
        Usage("S3 originals/ writes", "3,500 PUT/s per prefix partition",
              avg, top, S3_PREFIX_WRITES, "PUT/s"),
        Usage("S3 originals/ reads (worker)", "5,500 GET/s per prefix partition",
              avg, top, S3_PREFIX_READS, "GET/s"),
        Usage("S3 renditions/ writes", "3,500 PUT/s per prefix partition",
              RENDITIONS_PER_JOB * avg, RENDITIONS_PER_JOB * top, S3_PREFIX_WRITES, "PUT/s"),
        Usage("S3 renditions/ reads (clients)", "5,500 GET/s per prefix partition",
              2 * avg, 2 * top, S3_PREFIX_READS, "GET/s"),
        Usage("DynamoDB table writes", "40,000 WRU/s per table (on demand)",
              avg * (per_image("wcu") + rate_limit_wru_per_image()),
              top * (per_image("wcu") - MEASURED["expiry"]["wcu"] + rate_limit_wru_per_image())
              + avg * MEASURED["expiry"]["wcu"], DYNAMO_TABLE_UNITS, "WRU/s"),
        Usage("DynamoDB due index writes", "40,000 WRU/s per table (we read: per index too)",
              avg * per_image("index_wcu"), top * (per_image("index_wcu") - MEASURED["expiry"]["index_wcu"])
              + avg * MEASURED["expiry"]["index_wcu"], DYNAMO_TABLE_UNITS, "WRU/s"),
        Usage(f"due index, hottest key ({shards} shard{'s' if shards > 1 else ''})",
              "1,000 WRU/s per partition", avg * keys / shards, top * keys / shards,
              DYNAMO_PARTITION_WCU, "WRU/s"),
        Usage("Cognito sign-ins and refreshes", "120 rps (UserAuthentication)",
              avg / IMAGES_PER_ACTIVE_USER_DAY * AUTHS_PER_ACTIVE_USER_DAY,
              top / IMAGES_PER_ACTIVE_USER_DAY * AUTHS_PER_ACTIVE_USER_DAY, COGNITO_AUTH_RPS, "req/s"),
        Usage("Sweeper: expired jobs removed", f"{SWEEP_THREADS} threads x {SWEEP_BUDGET_S} s a minute, batched",
              avg, top, sweeper_jobs_per_second(), "jobs/s", "average"),
        Usage("Orphan scan: a pass a day", f"a hex digit a minute, {ORPHAN_BUDGET_S} s, batched",
              images_per_day, images_per_day, orphan_scan_max_images_per_day(), "images/day", "average"),
    ]
    return rows


def print_limits() -> None:
    """Usage against every limit at three volumes, and the stage sizes (infra/report.py prints it)."""
    prod = stage_sizes(STAGE_DESIGNS["prod"])
    print(f"worker: {mean_worker_seconds() * 1000:.0f} ms a job on average "
          f"({', '.join(f'{k.name} {worker_seconds(k) * 1000:.0f} ms' for k in IMAGE_MIX)})")
    for stage, design in STAGE_DESIGNS.items():
        sizes = stage_sizes(design)
        print(f"stage {stage}: designed for {design.images_per_day:,} images/day x{design.burst:g}: "
              f"maximum concurrency {sizes.max_concurrency}, reserved {sizes.reserved_concurrency}, "
              f"MAX_BACKLOG {sizes.max_backlog:,}")
    print(f"due index shards for {DESIGN_CEILING_PER_DAY:,}/day x{DESIGN_BURST}: {due_shards()}")
    print()
    for per_day in (1_000_000, 10_000_000, 100_000_000):
        print(f"== {per_day:,} images/day, bursts x{DESIGN_BURST} (prod sizes; index in {DUE_SHARDS} shards)")
        print(f"{'component':<40} {'limit':<38} {'capacity':>11} {'average':>11} {'peak':>11} {'load':>6}")
        for row in usage(per_day, max_concurrency=prod.max_concurrency, shards=DUE_SHARDS):
            flag = "  BREAKS" if row.load > 1 else ""
            print(f"{row.component:<40} {row.limit:<38} {row.capacity:>11,.0f} {row.average:>11,.1f} "
                  f"{row.peak:>11,.1f} {row.load:>6.2f}{flag}")
        print("load: peak / capacity (sweepers: average / capacity)")
        print()



# -- the list (GET /image-jobs) and its owner index (docs/scale.md §11) ---------------------------
# The index `owner_created` is keys only: a job's key (`pk`, `job#` + 36), its owner (`owner`, a
# Cognito subject: 36) and `created_at` (31), attribute names counted as DynamoDB counts them,
# plus its 100 B an index entry (measured by benchmarks/list_jobs.py: 224 B with a subject of 36). Its keys never change
# after the job is made, so its writes are the creation's and the removal's (the sweeper's
# delete, or TTL's), one unit each (DynamoDB charges a GSI's propagated writes, TTL's too).
OWNER_INDEX_ENTRY_BYTES = (2 + 40) + (5 + 36) + (10 + 31) + 100
OWNER_INDEX_WRITES_PER_JOB = 2
LIST_KEY_BYTES = (2 + 40) + (5 + 36) + (10 + 31)  # what a keys-only query returns per job
JOB_READ_BYTES = 4_096  # a job's item, its metadata at the bound included, is one read unit
# The list reads the index eventually consistent (a GSI has no other), then the page's jobs
# strongly consistent (BatchGetItem), as GET does.


def list_page_rru(page_size: int = 20) -> float:
    """One page: the query of page_size + 1 keys (half a unit per 4 KB), then the jobs."""
    query = 0.5 * math.ceil((page_size + 1) * LIST_KEY_BYTES / 4_096)
    return query + page_size * math.ceil(JOB_READ_BYTES / 4_096)


# -- waits (Prefer: wait, docs/scale.md §8) ----------------------------------------------------
# A waiting client holds one API request from its first held poll (or its upload's answer)
# until the job is terminal: about the pipeline's time in the cloud. Held requests read the
# job on chalicelib/usecases/waits.py's schedule and take and give back one slot (2 WRU).
WAIT_SHARE = 1.0  # clients that wait: the SDK, the CLI and the page do by default
WAIT_SLOT_WCU = 2


def held_seconds_per_image() -> float:
    """A held request lasts from the job's acceptance to its end: the notification, then the work."""
    return NOTIFY_SECONDS + mean_worker_seconds()


def reads_while_held(queued: float, processing: float) -> int:
    """Consistent reads a request held through a job `queued` seconds in the queue, then
    `processing` seconds in the worker, makes: the schedule of each status, step by step."""
    from chalicelib.domain.jobs import JobStatus
    from chalicelib.usecases.waits import step_after

    reads = 0
    for status, seconds in ((JobStatus.QUEUED, queued), (JobStatus.PROCESSING, processing)):
        age = 0.0
        while age < seconds:
            age += step_after(status, age)
            reads += 1
    return reads


def reads_per_held_image() -> int:
    """A held request follows its job through the notification's delay, then the worker's time."""
    return reads_while_held(NOTIFY_SECONDS, mean_worker_seconds())


def wait_usage(images_per_day: float, burst: float = DESIGN_BURST) -> list[Usage]:
    """API concurrency = request rate x hold time, against the account's Lambda concurrency;
    the table reads the held requests add; and the owners' caps."""
    avg = images_per_day / DAY * WAIT_SHARE
    top = avg / WAIT_SHARE * burst * WAIT_SHARE
    hold = held_seconds_per_image()
    reads = reads_per_held_image()
    return [
        Usage("API concurrency held by waits", "1,000 per account (Lambda, shared)",
              avg * hold, top * hold, LAMBDA_ACCOUNT_CONCURRENCY, "concurrent"),
        Usage("DynamoDB reads of held requests", "40,000 RRU/s per table (on demand)",
              avg * reads, top * reads, DYNAMO_TABLE_UNITS, "RRU/s"),
        Usage("DynamoDB writes of wait slots", "40,000 WRU/s per table (on demand)",
              avg * WAIT_SLOT_WCU, top * WAIT_SLOT_WCU, DYNAMO_TABLE_UNITS, "WRU/s"),
    ]


def wait_report() -> str:
    """What held requests use; infra/prices.py's wait_report() prices them."""
    hold = held_seconds_per_image()
    s = Settings()
    lines = [f"waits: a held request lasts {hold:.2f} s an image ({reads_per_held_image()} consistent "
             f"reads, {WAIT_SLOT_WCU} WRU for its slot); one owner holds at most {s.max_waits_per_owner}, "
             f"each at most {s.max_wait_seconds} s"]
    for per_day in (1_000_000, 10_000_000, 100_000_000):
        for row in wait_usage(per_day):
            flag = "  BREAKS (quota increase, or push: docs/scale.md §9)" if row.load > 1 else ""
            lines.append(f"  {per_day // 1_000_000:>4}M/day {row.component:<34} peak {row.peak:>9,.0f} "
                         f"{row.unit:<10} of {row.capacity:>7,.0f}  load {row.load:>6.2f}{flag}")
    return "\n".join(lines)


# -- push (docs/contract.md "Push", docs/scale.md §9) -----------------------------------------
# AWS's limits for API Gateway WebSocket APIs and DynamoDB Streams, as published (not checked live).
WS_NEW_CONNECTIONS_PER_S = 500  # per account and Region; adjustable
WS_MAX_CONNECTION_S = 7_200  # then the gateway closes it; 10 idle minutes close it sooner
WS_MESSAGE_UNIT_BYTES = 32 * 1024  # billed per 32 KB of a message
# Assumed: PostToConnection calls count against the account's API Gateway throttle
# (10,000 rps), shared with the REST API's requests; the quotas page names no other.
STREAM_POLLS_PER_S = 4  # Lambda polls each shard 4 times a second
STREAM_SHARD_RECORDS_PER_S = DYNAMO_PARTITION_WCU  # a shard follows one partition's writes
STREAM_BATCH = 100  # app.py's push_job_changes batch_size
NEW_TABLE_PARTITIONS = 4  # an on-demand table starts with 4,000 WCU: about 4 partitions, 4 shards
# Measured from the code (tests/unit/test_push_capacity.py re-counts them): messages a
# watching connection gets for one image by each path (every status: awaiting_upload on a
# direct upload, queued, processing, ready); the registry's units (dynamo_push.py): a connect
# puts the connection and updates the owner's set, a disconnect reads the connection
# (consistent) and updates and deletes; each change reads the owner's set (consistent).
PUSH_MESSAGES = {"upload": 3, "direct_upload": 4}
PUSH_CONNECT_WRU, PUSH_DISCONNECT_WRU, PUSH_DISCONNECT_RRU, PUSH_CHANGE_RRU = 2, 2, 1, 1
PUSH_MESSAGE_UNITS = 1  # a ready job's message, presigned URLs and every variant, is far under 32 KB
# Assumptions about clients and the fan-out.
PUSH_CONNECTIONS_PER_USER = 1.5  # a phone, now and then a page too
PUSH_SESSIONS_PER_CONNECTION_DAY = 3  # connects a day (each ends in a disconnect)
PUSH_SESSION_MINUTES = 10  # connected while the app is open
PUSH_SEND_MS = 15  # one PostToConnection in the Region
PUSH_BUILD_MS = 2  # the job's body as GET shows it, its presigned URLs
PUSH_CONNECT_SECONDS = 0.06  # a connect at 256 MB: the RS256 check, two writes
PUSH_FUNCTION_GB = 0.5  # push_job_changes, 512 MB
PUSH_CONNECT_GB = 0.25


def push_messages_per_image(direct_share: float = DIRECT_UPLOAD_SHARE) -> float:
    """Messages one watching connection gets for one image."""
    return (1 - direct_share) * PUSH_MESSAGES["upload"] + direct_share * PUSH_MESSAGES["direct_upload"]


def push_connects_per_image() -> float:
    return PUSH_CONNECTIONS_PER_USER * PUSH_SESSIONS_PER_CONNECTION_DAY / IMAGES_PER_ACTIVE_USER_DAY


def push_connection_minutes_per_image() -> float:
    return push_connects_per_image() * PUSH_SESSION_MINUTES


def push_change_seconds() -> float:
    """One job change in push_job_changes: its body, the owner's set, a send to each connection."""
    return (PUSH_BUILD_MS + DYNAMO_CALL_MS + PUSH_CONNECTIONS_PER_USER * PUSH_SEND_MS) / 1000


def stream_records_per_image() -> float:
    """The stream carries every write of the table: the job's (a creation's transaction writes
    2 items at 2 units each), the owner's request rate (one an API request; with push the upload,
    and a discovery and the connect itself a session), and the registry's."""
    job_writes = per_image("wcu", polls=0) - 2
    requests = 1 + 2 * push_connects_per_image()
    return job_writes + requests * RATE_LIMIT_WRU_PER_REQUEST + push_connects_per_image() * 3


def stream_shards(images_per_day: float, burst: float = DESIGN_BURST) -> int:
    """Shards follow partitions: enough for the peak's writes, never fewer than a new table's."""
    writes = peak_rate(images_per_day, burst) * stream_records_per_image()
    return max(NEW_TABLE_PARTITIONS, math.ceil(writes / STREAM_SHARD_RECORDS_PER_S))


def stream_invocations_per_image(images_per_day: float) -> float:
    """Lambda takes what a shard holds at each poll, up to the batch size."""
    per_poll = images_per_day / DAY * stream_records_per_image() / stream_shards(images_per_day) / STREAM_POLLS_PER_S
    return stream_records_per_image() / min(STREAM_BATCH, max(1.0, per_poll))


def fanout_changes_per_shard_s(threads: Optional[int] = None) -> float:
    """One invocation at a time per shard (parallelization factor 1: Chalice 1.34 sets no other),
    its sends on PUSH_SEND_THREADS threads."""
    threads = threads or Settings().push_send_threads
    return threads / push_change_seconds()


def push_usage(images_per_day: float, burst: float = DESIGN_BURST, threads: Optional[int] = None) -> list[Usage]:
    avg = images_per_day / DAY
    top = avg * burst
    users = images_per_day / IMAGES_PER_ACTIVE_USER_DAY
    connected = users * PUSH_CONNECTIONS_PER_USER * PUSH_SESSIONS_PER_CONNECTION_DAY * PUSH_SESSION_MINUTES * 60 / DAY
    connects = avg * push_connects_per_image()
    sends = push_messages_per_image() * PUSH_CONNECTIONS_PER_USER
    rest = 1 + POLLS_PER_IMAGE  # the REST API's requests the throttle also counts (polling clients)
    shards = stream_shards(images_per_day, burst)
    changes = push_messages_per_image()
    return [
        Usage("WebSocket: connections open", "none published (2 h each at most)",
              connected, connected * burst, float("inf"), "open"),
        Usage("WebSocket: new connections", "500/s per account (adjustable)",
              connects, connects * burst, WS_NEW_CONNECTIONS_PER_S, "conn/s"),
        Usage("PostToConnection + REST requests", "10,000 rps per account (assumed shared)",
              avg * (sends + 1), top * (sends + 1), API_GATEWAY_RPS, "req/s"),
        Usage("  the same, clients polling instead", "10,000 rps per account",
              avg * rest, top * rest, API_GATEWAY_RPS, "req/s"),
        Usage(f"stream fan-out, per shard ({shards} shards)", "1 invocation a shard at a time",
              avg * changes / shards, top * changes / shards, fanout_changes_per_shard_s(threads), "changes/s"),
        Usage("stream handler concurrency", "1,000 per account (Lambda, shared)",
              shards, shards, LAMBDA_ACCOUNT_CONCURRENCY, "concurrent"),
        Usage("stream shard writes", "1,000 records/s per shard",
              avg * stream_records_per_image() / shards, top * stream_records_per_image() / shards,
              STREAM_SHARD_RECORDS_PER_S, "records/s"),
    ]


def push_report() -> str:
    """What push uses; infra/prices.py's push_report() prices it."""
    s = Settings()
    lines = [f"push: {push_messages_per_image():g} messages an image a connection, "
             f"{PUSH_CONNECTIONS_PER_USER:g} connections a user, {push_connection_minutes_per_image():.1f} "
             f"connection-minutes an image, {stream_records_per_image():.1f} stream records an image; "
             f"a change takes {push_change_seconds() * 1000:.1f} ms of sends, {s.push_send_threads} side by side: "
             f"{fanout_changes_per_shard_s():,.0f} changes/s a shard; at most {s.max_push_connections_per_owner} "
             "connections an owner"]
    for per_day in (1_000_000, 10_000_000, 100_000_000):
        for row in push_usage(per_day):
            flag = "  BREAKS" if row.load > 1 else ""
            capacity = "-" if math.isinf(row.capacity) else f"{row.capacity:,.0f}"
            lines.append(f"  {per_day // 1_000_000:>4}M/day {row.component:<38} avg {row.average:>10,.0f} "
                         f"peak {row.peak:>10,.0f} {row.unit:<10} of {capacity:>7}  load {row.load:>5.2f}{flag}")
    return "\n".join(lines)
