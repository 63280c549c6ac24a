"""AWS list prices and the cost of 1,000 images by component, at a given daily volume.

Prices: us-east-1, on demand, x86_64, as published on AWS's pricing pages as we last knew
them (2025); NOT checked live (this machine cannot reach them). Free tiers are left out,
except where a tier is the price itself (Cognito's first 10,000 users). Volume tiers are
monthly, so the cost of an image falls a little as the volume grows.
"""
from __future__ import annotations

from dataclasses import dataclass

from infra import capacity as cap

PRICES_AS_OF = "2025, as published; not checked live"
GB = 1e9
MONTH_DAYS = 30.42

# (units in this tier, price per unit); None: the rest.
Tiers = tuple[tuple[float | None, float], ...]
LAMBDA_GB_SECOND: Tiers = ((6e9, 0.0000166667), (9e9, 0.000015), (None, 0.0000133334))
LAMBDA_REQUEST = 0.20 / 1e6
API_GATEWAY_REST: Tiers = ((333e6, 3.50 / 1e6), (667e6, 2.80 / 1e6), (19e9, 2.38 / 1e6), (None, 1.51 / 1e6))
S3_PUT = 0.005 / 1000  # PUT, COPY, POST, LIST
S3_GET = 0.0004 / 1000  # GET, SELECT; DELETE is free
S3_STORAGE_GB_MONTH: Tiers = ((50e3, 0.023), (450e3, 0.022), (None, 0.021))  # GB
DATA_OUT_GB: Tiers = ((10e3, 0.09), (40e3, 0.085), (100e3, 0.07), (None, 0.05))  # GB
SQS_REQUEST = 0.40 / 1e6  # standard queue, per 64 KB chunk
DYNAMO_WRITE_UNIT = 0.625 / 1e6  # on demand
DYNAMO_READ_UNIT = 0.125 / 1e6
DYNAMO_STORAGE_GB_MONTH = 0.25
DYNAMO_PITR_GB_MONTH = 0.20
# API Gateway WebSocket APIs: messages (each 32 KB a unit; sent and received), connection time.
API_GATEWAY_WS_MESSAGE: Tiers = ((1e9, 1.00 / 1e6), (None, 0.80 / 1e6))
API_GATEWAY_WS_CONNECTION_MINUTE = 0.25 / 1e6
LAMBDA_LOGS_GB: Tiers = ((10e3, 0.50), (20e3, 0.25), (20e3, 0.10), (None, 0.05))  # GB ingested
COGNITO_LITE_MAU: Tiers = ((10e3, 0.0), (90e3, 0.0055), (900e3, 0.0046), (9e6, 0.00325), (None, 0.0025))
ALARM_MONTH = 0.10
# CloudFront invalidations (INVALIDATE_ON_DELETE): per path, a wildcard path counting as one,
# past the first 1,000 paths a month of the account (all its distributions together).
CLOUDFRONT_INVALIDATION_PATH = 0.005
CLOUDFRONT_FREE_INVALIDATION_PATHS = 1000

# CloudWatch Logs counts 26 bytes of overhead per event; Lambda writes three lines of its own
# (START, END, REPORT) for every invocation.
LOG_EVENT_OVERHEAD = 26
PLATFORM_LINES = (
    "START RequestId: 3f1b0d4e-5c2a-4b8e-9d7f-1a2b3c4d5e6f Version: $LATEST",
    "END RequestId: 3f1b0d4e-5c2a-4b8e-9d7f-1a2b3c4d5e6f",
    "REPORT RequestId: 3f1b0d4e-5c2a-4b8e-9d7f-1a2b3c4d5e6f\tDuration: 442.17 ms\t"
    "Billed Duration: 443 ms\tMemory Size: 1024 MB\tMax Memory Used: 187 MB\t",
)
API_MEMORY_GB = 0.5
JOB_ITEM_BYTES = 1_500  # table item + its index entry + DynamoDB's 100 B overhead each
IMAGES_PER_MAU_MONTH = 100  # assumed: a monthly active user sends 100 images a month


def tiered(quantity: float, tiers: Tiers) -> float:
    """The cost of `quantity` units this month."""
    cost, left = 0.0, quantity
    for size, price in tiers:
        take = left if size is None else min(left, size)
        cost += take * price
        left -= take
        if left <= 0:
            break
    return cost


def marginal(per_image: float, images_per_month: float, tiers: Tiers) -> float:
    """Average price of one image's share of a tiered quantity at this month's volume."""
    total = per_image * images_per_month
    return tiered(total, tiers) / images_per_month


@dataclass(frozen=True)
class Line:
    component: str
    basis: str
    per_1000: float


def invocations_per_image() -> float:
    return 1 + cap.POLLS_PER_IMAGE + 1  # the upload, the polls, the worker


def log_bytes_per_image() -> float:
    ours = cap.per_image("log_bytes") + cap.per_image("log_lines") * LOG_EVENT_OVERHEAD
    platform = sum(len(line) + 1 + LOG_EVENT_OVERHEAD for line in PLATFORM_LINES)
    return ours + invocations_per_image() * platform


def sizes_per_1000(images_per_day: float, sizes=cap.DEFAULT_SIZES) -> dict:
    """What the sizes beyond display and thumb add to 1,000 images: their PUTs (one JPEG each,
    and one per extra format made) and their storage at the retention."""
    month = images_per_day * MONTH_DAYS
    stored_gb = sum(cap.SIZE_BYTES_SHARE[s] for s in sizes) * cap.RENDITION_BYTES / GB
    return {"puts_per_image": len(sizes), "stored_kb_per_image": stored_gb * GB / 1000,
            "puts": len(sizes) * S3_PUT * 1000,
            "storage": marginal(stored_gb * retention_days() / MONTH_DAYS, month, S3_STORAGE_GB_MONTH) * 1000}


def cost_per_1000(images_per_day: float) -> list[Line]:
    month = images_per_day * MONTH_DAYS
    worker_gbs = cap.mean_worker_seconds() * cap.WORKER_MEMORY_MB / 1024
    api_gbs = cap.api_seconds_per_image() * API_MEMORY_GB
    api_requests = 1 + cap.POLLS_PER_IMAGE
    stored_gb = sum(k.share * (k.original_bytes + cap.stored_rendition_bytes()) for k in cap.IMAGE_MIX) / GB
    months_stored = retention_days() / MONTH_DAYS
    sqs = 3  # S3's send, the event source's receive and delete
    lines = [
        Line("Lambda worker", f"{worker_gbs:.3f} GB-s", marginal(worker_gbs, month, LAMBDA_GB_SECOND)),
        Line("Lambda API", f"{api_gbs:.3f} GB-s", marginal(api_gbs, month, LAMBDA_GB_SECOND)),
        Line("Lambda requests", f"{invocations_per_image():g} invocations",
             invocations_per_image() * LAMBDA_REQUEST),
        Line("API Gateway (REST)", f"{api_requests} requests", marginal(api_requests, month, API_GATEWAY_REST)),
        Line("S3 PUT/POST", f"{cap.calls_per_image('s3:PutObject'):g} requests",
             cap.calls_per_image("s3:PutObject") * S3_PUT),
        Line("S3 GET", "1 worker + 2 client", (cap.calls_per_image("s3:GetObject") + 2) * S3_GET),
        Line("S3 storage", f"{stored_gb * 1000:.2f} MB for {retention_days():g} days",
             marginal(stored_gb * months_stored, month, S3_STORAGE_GB_MONTH)),
        Line("SQS", f"{sqs} requests", sqs * SQS_REQUEST),
        Line("DynamoDB writes", f"{cap.per_image('wcu') + cap.per_image('index_wcu'):g} WRU "
             "(table + due index)", (cap.per_image("wcu") + cap.per_image("index_wcu")) * DYNAMO_WRITE_UNIT),
        Line("DynamoDB rate limit", f"{cap.rate_limit_wru_per_image():g} WRU (one an API request)",
             cap.rate_limit_wru_per_image() * DYNAMO_WRITE_UNIT),
        Line("DynamoDB reads", f"{cap.per_image('rcu'):g} RRU + orphan scan "
             f"{cap.ORPHAN_SCAN_READS_PER_STORED_JOB * retention_days():g}",
             (cap.per_image("rcu") + cap.ORPHAN_SCAN_READS_PER_STORED_JOB * retention_days())
             * DYNAMO_READ_UNIT),
        Line("DynamoDB storage + PITR", f"{JOB_ITEM_BYTES} B for {retention_days():g} days",
             JOB_ITEM_BYTES / GB * months_stored * (DYNAMO_STORAGE_GB_MONTH + DYNAMO_PITR_GB_MONTH)),
        Line("CloudWatch Logs", f"{log_bytes_per_image():.0f} B ingested",
             marginal(log_bytes_per_image() / GB, month, LAMBDA_LOGS_GB)),
    ]
    return [Line(line.component, line.basis, line.per_1000 * 1000) for line in lines]


def rate_limit_per_1000_requests() -> float:
    """The shared per-owner rate's own cost, per 1,000 API requests (on demand, any volume)."""
    return cap.RATE_LIMIT_WRU_PER_REQUEST * DYNAMO_WRITE_UNIT * 1000


def cognito_per_1000(images_per_day: float) -> float:
    """Cognito bills users, not images: at IMAGES_PER_MAU_MONTH images per monthly user."""
    users = images_per_day * MONTH_DAYS / IMAGES_PER_MAU_MONTH
    return tiered(users, COGNITO_LITE_MAU) / (images_per_day * MONTH_DAYS) * 1000


def data_out_per_1000(images_per_day: float) -> float:
    month = images_per_day * MONTH_DAYS
    return marginal(cap.RENDITION_BYTES / GB, month, DATA_OUT_GB) * 1000


def retention_days() -> float:
    from chalicelib.config import Settings

    return Settings().retention_seconds / cap.DAY


def report(volumes=(1_000_000, 10_000_000, 100_000_000)) -> str:
    head = f"{'cost per 1,000 images (' + PRICES_AS_OF + ')':<58}" + "".join(
        f"{v // 1_000_000:>9}M/d" for v in volumes)
    rows = [head]
    tables = [cost_per_1000(v) for v in volumes]
    for i, line in enumerate(tables[0]):
        rows.append(f"{line.component:<22} {line.basis:<35}"
                    + "".join(f"{t[i].per_1000:>11.4f}" for t in tables))
    rows.append(f"{'total':<58}" + "".join(f"{sum(x.per_1000 for x in t):>11.4f}" for t in tables))
    rows.append(f"{'+ Cognito Lite (' + str(IMAGES_PER_MAU_MONTH) + ' images per monthly user)':<58}"
                + "".join(f"{cognito_per_1000(v):>11.4f}" for v in volumes))
    rows.append(f"{'+ data out, both renditions fetched once':<58}"
                + "".join(f"{data_out_per_1000(v):>11.4f}" for v in volumes))
    rows.append(f"the shared per-owner request rate alone: ${rate_limit_per_1000_requests():.6f} per 1,000 "
                "API requests")
    return "\n".join(rows)


def waits_per_1000(images_per_day: float) -> list[Line]:
    """What waiting clients add per 1,000 images, against the two polls they no longer send."""
    month = images_per_day * MONTH_DAYS
    hold = cap.held_seconds_per_image()
    held_gbs = hold * API_MEMORY_GB
    reads = cap.reads_per_held_image()
    polls_saved = cap.POLLS_PER_IMAGE - 1  # the held poll replaces the schedule's polls
    lines = [
        Line("Lambda API, held", f"{held_gbs:.3f} GB-s", marginal(held_gbs, month, LAMBDA_GB_SECOND)),
        Line("DynamoDB reads, held", f"{reads} RRU", reads * DYNAMO_READ_UNIT),
        Line("DynamoDB wait slot", f"{cap.WAIT_SLOT_WCU} WRU", cap.WAIT_SLOT_WCU * DYNAMO_WRITE_UNIT),
        Line("polls not sent", f"-{polls_saved} request, invocation, RRU",
             -polls_saved * (marginal(1, month, API_GATEWAY_REST) + LAMBDA_REQUEST + DYNAMO_READ_UNIT)),
    ]
    return [Line(line.component, line.basis, line.per_1000 * 1000) for line in lines]


def wait_report(volumes=(1_000_000, 10_000_000, 100_000_000)) -> str:
    head = f"{'waits add, per 1,000 images':<58}" + "".join(f"{v // 1_000_000:>9}M/d" for v in volumes)
    rows = [head]
    tables = [waits_per_1000(v) for v in volumes]
    for i, line in enumerate(tables[0]):
        rows.append(f"{line.component:<22} {line.basis:<35}" + "".join(f"{t[i].per_1000:>11.4f}" for t in tables))
    rows.append(f"{'waits, net':<58}" + "".join(f"{sum(x.per_1000 for x in t):>11.4f}" for t in tables))
    base = [sum(x.per_1000 for x in cost_per_1000(v)) for v in volumes]
    rows.append(f"{'  share of the total above':<58}"
                + "".join(f"{sum(x.per_1000 for x in t) / b:>10.1%} " for t, b in zip(tables, base)))
    return "\n".join(rows)


def formats_cost_per_1000(images_per_day: float, formats: tuple[str, ...]) -> dict[str, float]:
    """What asking for extra formats adds to 1,000 images: the worker's CPU, the PUTs (one per
    rendition and format made) and the storage at the retention, with the total of
    cost_per_1000."""
    month = images_per_day * MONTH_DAYS
    cpu_s = sum(cap.FORMAT_CPU_MS[f] for f in formats) / 1000 / cap.cpu_share()
    worker_gbs = cpu_s * cap.WORKER_MEMORY_MB / 1024
    puts = cap.RENDITIONS_PER_JOB * sum(cap.FORMAT_MADE_SHARE[f] for f in formats)
    stored_gb = sum(cap.FORMAT_BYTES_SHARE[f] for f in formats) * cap.stored_rendition_bytes() / GB
    extra = {
        "worker": marginal(worker_gbs, month, LAMBDA_GB_SECOND) * 1000,
        "puts": puts * S3_PUT * 1000,
        "storage": marginal(stored_gb * retention_days() / MONTH_DAYS, month, S3_STORAGE_GB_MONTH) * 1000,
    }
    base = sum(line.per_1000 for line in cost_per_1000(images_per_day))
    return {**extra, "worker_gb_s": worker_gbs, "stored_mb": stored_gb * 1000,
            "total": base + sum(extra.values())}


def polls_per_1000(images_per_day: float) -> float:
    """The schedule's polls of one image (cap.POLLS_PER_IMAGE), per 1,000 images: what a
    client that waits or is pushed to no longer sends."""
    month = images_per_day * MONTH_DAYS
    one = (marginal(1, month, API_GATEWAY_REST) + LAMBDA_REQUEST + DYNAMO_READ_UNIT
           + cap.RATE_LIMIT_WRU_PER_REQUEST * DYNAMO_WRITE_UNIT
           + marginal(cap.API_POLL_SECONDS * API_MEMORY_GB, month, LAMBDA_GB_SECOND))
    return cap.POLLS_PER_IMAGE * one * 1000


def push_per_1000(images_per_day: float) -> list[Line]:
    """What push adds per 1,000 images (every client watching by push), against the polls it
    replaces; a discovery GET each session is counted, a reconnect's re-read is not."""
    month = images_per_day * MONTH_DAYS
    messages = cap.push_messages_per_image() * cap.PUSH_CONNECTIONS_PER_USER * cap.PUSH_MESSAGE_UNITS
    minutes = cap.push_connection_minutes_per_image()
    connects = cap.push_connects_per_image()
    connect_gbs = 2 * connects * cap.PUSH_CONNECT_SECONDS * cap.PUSH_CONNECT_GB
    changes = cap.push_messages_per_image()
    fanout_gbs = changes * cap.push_change_seconds() * cap.PUSH_FUNCTION_GB
    invocations = 2 * connects + cap.stream_invocations_per_image(images_per_day)
    # The owner's request rate: the discovery GET's take and the connect's own.
    wru = connects * (cap.PUSH_CONNECT_WRU + cap.PUSH_DISCONNECT_WRU + 2 * cap.RATE_LIMIT_WRU_PER_REQUEST)
    rru = connects * (cap.PUSH_DISCONNECT_RRU + 1) + changes * cap.PUSH_CHANGE_RRU
    discovery = connects * (marginal(1, month, API_GATEWAY_REST) + LAMBDA_REQUEST)
    lines = [
        Line("WebSocket messages", f"{messages:g} (32 KB units)", marginal(messages, month, API_GATEWAY_WS_MESSAGE)),
        Line("WebSocket connection time", f"{minutes:g} connection-minutes", minutes * API_GATEWAY_WS_CONNECTION_MINUTE),
        Line("Lambda connect, fan-out", f"{connect_gbs + fanout_gbs:.4f} GB-s",
             marginal(connect_gbs + fanout_gbs, month, LAMBDA_GB_SECOND)),
        Line("Lambda requests", f"{invocations:.2f} invocations", invocations * LAMBDA_REQUEST),
        Line("DynamoDB", f"{wru:.2f} WRU, {rru:.2f} RRU", wru * DYNAMO_WRITE_UNIT + rru * DYNAMO_READ_UNIT),
        Line("GET /push, a session", f"{connects:.2f} requests", discovery),
        Line("DynamoDB stream reads", "free for Lambda triggers", 0.0),
    ]
    return [Line(line.component, line.basis, line.per_1000 * 1000) for line in lines]


def push_report(volumes=(1_000_000, 10_000_000, 100_000_000)) -> str:
    head = f"{'push adds, per 1,000 images':<58}" + "".join(f"{v // 1_000_000:>9}M/d" for v in volumes)
    rows = [head]
    tables = [push_per_1000(v) for v in volumes]
    for i, line in enumerate(tables[0]):
        rows.append(f"{line.component:<26} {line.basis:<31}" + "".join(f"{t[i].per_1000:>11.4f}" for t in tables))
    pushed = [sum(x.per_1000 for x in t) for t in tables]
    polls = [polls_per_1000(v) for v in volumes]
    waits = [sum(x.per_1000 for x in waits_per_1000(v)) for v in volumes]
    rows.append(f"{'push, gross':<58}" + "".join(f"{p:>11.4f}" for p in pushed))
    rows.append(f"{'  polls not sent':<58}" + "".join(f"{-p:>11.4f}" for p in polls))
    rows.append(f"{'push, net':<58}" + "".join(f"{p - q:>11.4f}" for p, q in zip(pushed, polls)))
    rows.append(f"{'waits, net (above)':<58}" + "".join(f"{w:>11.4f}" for w in waits))
    rows.append(f"{'polling: the two polls themselves':<58}" + "".join(f"{p:>11.4f}" for p in polls))
    return "\n".join(rows)


# -- the list's owner index (docs/scale.md §11) ------------------------------------------------
def owner_index_per_1000() -> dict[str, float]:
    """What the owner index costs per 1,000 images: its writes, and its storage for the
    job's time in the table (its retention, one day more for TTL's lag)."""
    days = retention_days() + 1
    gb_months = 1000 * cap.OWNER_INDEX_ENTRY_BYTES / GB * days / MONTH_DAYS
    return {"writes": 1000 * cap.OWNER_INDEX_WRITES_PER_JOB * DYNAMO_WRITE_UNIT,
            "storage": gb_months * (DYNAMO_STORAGE_GB_MONTH + DYNAMO_PITR_GB_MONTH),
            "service_webhook_lookups": 1000 * 3 * DYNAMO_READ_UNIT}


def list_report() -> str:
    from chalicelib.config import Settings

    costs = owner_index_per_1000()
    page = cap.list_page_rru()
    return (f"list: the owner index, {cap.OWNER_INDEX_ENTRY_BYTES} B and {cap.OWNER_INDEX_WRITES_PER_JOB} WRU "
            f"a job; per 1,000 images ${costs['writes']:.5f} writes + ${costs['storage']:.6f} storage "
            f"(+ ${costs['service_webhook_lookups']:.6f} for the service webhook's lookups, 3 RRU an image); "
            f"a page of 20: {page:g} RRU (${page * DYNAMO_READ_UNIT * 1e6:.2f} per million pages); "
            f"one owner's partition takes {cap.DYNAMO_PARTITION_WCU:,} writes/s, far above any owner's "
            f"request rate ({Settings().owner_requests_per_second:g}/s)")


def invalidation_cost(deletes_a_month: float, paths_per_delete: int = 1) -> float:
    """What INVALIDATE_ON_DELETE costs a month: one wildcard path per DELETE of a ready job
    (chalicelib/adapters/cloudfront_invalidate.py), past the account's free paths."""
    paths = deletes_a_month * paths_per_delete
    return max(0.0, paths - CLOUDFRONT_FREE_INVALIDATION_PATHS) * CLOUDFRONT_INVALIDATION_PATH
