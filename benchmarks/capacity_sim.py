"""Queue, Lambda and DynamoDB dynamics of image-jobs at 1M, 10M and 100M images a day with
10x bursts, and a check of the model against the local load benchmark.

    python benchmarks/capacity_sim.py            # every scenario, the shedding points, the local check
    python benchmarks/capacity_sim.py --seed 7   # another draw of the random arrivals

A discrete-time simulation (1 s ticks; 5 ms in the local check) of one hour: 10 minutes at
the day's average rate, 15 minutes at 10x, then the average again. Each tick:

  arrivals (Poisson) -> API Gateway's token bucket (3 requests an image: the upload and two
  polls) -> the API function's concurrency (what the account leaves it; new environments at
  most 1,000 per 10 s) -> shedding (503 `overloaded` while the queue depth, read every 5 s,
  is over MAX_BACKLOG) -> the job's create write -> S3's event (visible 1 s later) -> SQS ->
  the event source (5 pollers when messages appear, +300 a minute, up to its maximum
  concurrency; each mapping at most 1,000) -> the worker function (reserved concurrency, or
  what the API leaves) -> the claim write -> renditions (service times below) -> the finish
  write -> ready; a week later the sweeper's delete.

Every write to the job table also writes the `sweep` index (counts from
benchmarks/calls_per_job.py, via infra/capacity.py): create puts on the `queued` key, claim
moves queued -> processing, finish processing -> ready, expiry deletes from ready. A
partition takes 1,000 write units a second; an index partition that cannot keep up
throttles the base table's write (AWS: GSI write throttling fails the table write). A
throttled create is a 503 to the client; a throttled claim or finish leaves the message to
come back after the visibility timeout (a finish's work is lost). The index key is the status
("before") or `status#shard` with the shard from a hash of the job id ("after"); the
scheme not simulated is measured alongside on the same writes, without feedback.

Assumptions (also in docs/scale.md):
- Arrivals are Poisson at a rate that steps to 10x for 15 minutes; polls track uploads.
- Worker service time is the mix in infra/capacity.py: Pillow's benchmarked time at 1 GB's
  0.58 vCPU plus assumed in-region latencies (12 MP JPEG 380 ms, 48 MP 695 ms, 12 MP PNG
  911 ms; mean 445 ms); a new environment adds 1.5 s once. A duplicate message costs 20 ms.
- Workers are fluid: N slots start jobs as their time frees, no slot banks idle time.
- The event source gains 300 pollers a minute while messages wait and loses them as fast
  when none do; it stops growing while the function throttles it (AWS backs off scaling on
  invocation errors). A throttled invocation is retried by its poller (counted, not lost).
- A partition's throughput is exactly 1,000 WCU per second, no burst credit; split for heat
  does not help a key whose sort key (sweep_at) only grows. A throttled write fails after
  the SDK's retries; its share of a second's writes is (demand - capacity) / demand.
- The sweeper runs each minute: it resends jobs queued over QUEUE_TIMEOUT (600 s) once and
  fails those queued twice as long, at most 1,000 a run; it removes expired jobs at the rate
  a sequential run managed (infra.capacity.sequential_sweeper_jobs_per_second, before 6.2)
  or as the pooled, batched run manages (infra.capacity.sweeper_jobs_per_second: 16
  threads, 32 in the 100M plan). Last week's arrivals had this hour's shape.
- API Lambda time per image: 0.2 s (POST /images) or 0.03 s (POST /uploads), 0.03 s a poll.
- Not simulated, but tabled by `python -m infra.report`: S3's per-prefix rates, Lambda's
  invocation-rate quota, Cognito, the orphan scan, the table-wide quota; and the sweeper does
  not see a job between two deliveries of its message (after a throttled write).
"""
from __future__ import annotations

import argparse
import math
import random
import sys
from collections import deque
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from statistics import NormalDist
from typing import Callable, Iterable, Optional

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from chalicelib.config import Settings  # noqa: E402
from infra import capacity as cap  # noqa: E402

DUPLICATE_SECONDS = 0.02  # a message for a job already done: one read, then "duplicate"
API_CACHE_SECONDS = Settings().backlog_cache_seconds
QUEUE_TIMEOUT = Settings().queue_timeout_seconds


# -- core mechanics ---------------------------------------------------------------------------


def poisson(rng: random.Random, mean: float) -> int:
    """A Poisson draw; a normal one past a mean of 50, where they agree to within a percent."""
    if mean <= 0:
        return 0
    if mean > 50:
        return max(0, int(round(rng.gauss(mean, math.sqrt(mean)))))
    limit, k, product = math.exp(-mean), 0, rng.random()
    while product > limit:
        k += 1
        product *= rng.random()
    return k


def split(rng: random.Random, n: int, parts: int) -> list[int]:
    """n writes spread over `parts` keys by a hash of their job ids (uniform, independent)."""
    if parts == 1:
        return [n]
    if n <= 400:
        counts = [0] * parts
        for _ in range(n):
            counts[rng.randrange(parts)] += 1
        return counts
    mean = n / parts
    sd = math.sqrt(mean * (1 - 1 / parts))
    return [max(0, int(round(rng.gauss(mean, sd)))) for _ in range(parts)]


def rounded(rng: random.Random, x: float) -> int:
    """x rounded up with the probability of its fraction: unbiased for small counts."""
    whole = math.floor(x)
    return whole + (rng.random() < x - whole)


def allot(n: int, shares: Iterable[float]) -> list[int]:
    """n split in proportion to shares, largest remainders first: the parts sum to n."""
    shares = list(shares)
    exact = [n * s / sum(shares) for s in shares]
    whole = [int(x) for x in exact]
    for i in sorted(range(len(exact)), key=lambda i: whole[i] - exact[i])[: n - sum(whole)]:
        whole[i] += 1
    return whole


class Histogram:
    """Weighted values at a fixed resolution; percentiles by rank."""

    def __init__(self, resolution: float):
        self.resolution = resolution
        self.bins: dict[int, int] = {}
        self.count = 0

    def add(self, value: float, weight: int = 1) -> None:
        if weight <= 0:
            return
        key = int(round(value / self.resolution))
        self.bins[key] = self.bins.get(key, 0) + weight
        self.count += weight

    def percentile(self, p: float) -> float:
        if not self.count:
            return float("nan")
        rank = max(1, math.ceil(p / 100 * self.count))
        seen = 0
        for key in sorted(self.bins):
            seen += self.bins[key]
            if seen >= rank:
                return key * self.resolution
        raise AssertionError("unreachable")


@dataclass
class Cohort:
    """Messages that became visible together (`since`), for jobs accepted then."""

    since: float
    count: int
    resent: bool = False
    duplicate: bool = False  # the job is already done or failed: a no-op when it runs
    service: float = 0.0  # set when started: its service time
    created: float = 0.0  # the local check: when the job was created (before it was visible)


class Queue:
    """SQS as FIFO cohorts (a standard queue is only roughly FIFO; waits come out close)."""

    def __init__(self):
        self.cohorts: deque[Cohort] = deque()
        self.depth = 0

    def push(self, cohort: Cohort) -> None:
        if cohort.count > 0:
            self.cohorts.append(cohort)
            self.depth += cohort.count

    def take(self, n: int) -> list[Cohort]:
        taken = []
        while n > 0 and self.cohorts:
            head = self.cohorts[0]
            k = min(n, head.count)
            taken.append(replace(head, count=k))
            head.count -= k
            if head.count == 0:
                self.cohorts.popleft()
            n -= k
            self.depth -= k
        return taken

    def split_off(self, cohort: Cohort, k: int) -> Cohort:
        """The first k of a queued cohort as a cohort of their own, in its place."""
        if k >= cohort.count:
            return cohort
        place = next(i for i, c in enumerate(self.cohorts) if c is cohort)
        part = replace(cohort, count=k)
        cohort.count -= k
        self.cohorts.insert(place, part)
        return part


class TokenBucket:
    """API Gateway's throttle: `rate` tokens a second, at most `depth` saved."""

    def __init__(self, rate: float, depth: float):
        self.rate, self.depth, self.tokens = rate, depth, depth

    def take(self, wanted: float, dt: float) -> float:
        available = self.tokens + self.rate * dt  # saved, plus this tick's own refill
        granted = min(wanted, available)
        self.tokens = min(self.depth, available - granted)
        return granted


class EventSource:
    """The SQS event source's pollers: 5 when messages appear, +300 a minute while they wait."""

    def __init__(self, maximum: int):
        self.maximum = min(maximum, cap.ESM_MAX)
        self.pollers = 0.0

    def step(self, backlog: bool, throttled: bool, dt: float, busy: float = 0.0) -> int:
        """After a tick: grow while messages are left over (unless the function throttles),
        shrink towards what was busy when none are."""
        ramp = cap.ESM_RAMP_PER_MINUTE / 60 * dt
        if backlog and not throttled:
            self.pollers = min(self.maximum, max(self.pollers + ramp, cap.ESM_START))
        elif not backlog:
            floor = max(min(cap.ESM_START, self.maximum), min(busy, self.maximum))
            self.pollers = max(floor, self.pollers - ramp)
        return int(self.pollers)


class Workers:
    """N slots starting queued jobs as their time frees up: a fluid form of N servers. A slot
    cannot bank idle time; work started beyond this tick's slot-seconds is a debt for the next."""

    def __init__(self, service: Callable[[], float], bulk_service: float):
        self.service = service  # one job's service time, drawn
        self.bulk_service = bulk_service  # the mean, for large starts
        self.credit = 0.0

    def start(self, slots: int, dt: float, queue: Queue) -> list[Cohort]:
        self.credit = min(self.credit, 0.0) + slots * dt
        started: list[Cohort] = []
        while self.credit > 0 and queue.depth:
            head = queue.cohorts[0]
            each = DUPLICATE_SECONDS if head.duplicate else self.bulk_service
            wanted = min(head.count, math.ceil(self.credit / each))
            if not head.duplicate and wanted <= 8:  # few: draw each job's own time
                (one,) = queue.take(1)
                one.service = self.service()
                self.credit -= one.service
                started.append(one)
                continue
            (cohort,) = queue.take(wanted)  # from the head cohort only
            cohort.service = each
            self.credit -= each * cohort.count
            started.append(cohort)
        return started


class Servers:
    """A few servers, exactly: a job starts the moment a server is free and the job is
    there, whatever the tick (the local check's 1-2 workers)."""

    def __init__(self, count: int, service: Callable[[], float]):
        self.free_at = [0.0] * count
        self.service = service

    def start(self, t: float, queue: Queue) -> list[tuple[float, Cohort]]:
        """(when it ends, the job) for each job started by time t."""
        started = []
        while queue.depth:
            i = min(range(len(self.free_at)), key=self.free_at.__getitem__)
            if self.free_at[i] > t:
                break
            (job,) = queue.take(1)
            job.service = self.service()
            self.free_at[i] = max(self.free_at[i], job.since) + job.service
            started.append((self.free_at[i], job))
        return started


@lru_cache(maxsize=None)
def expected_max_z(n: int) -> float:
    """The expected largest of n standard normal draws (Blom's approximation)."""
    if n <= 1:
        return 0.0
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def key_load(rng: random.Random, writes: int, shards: int, capacity: float) -> tuple[float, float]:
    """(share of the writes that go through, the hottest partition's load) for one status's
    writes spread over its shards. Far from the limit the hottest shard is estimated, not
    drawn: a fast path, since nothing throttles there."""
    if writes <= 0:
        return 1.0, 0.0
    mean = writes / shards
    sd = math.sqrt(mean * (1 - 1 / shards))
    if mean + 4 * sd < capacity:
        return 1.0, (mean + sd * expected_max_z(shards)) / capacity
    return served_fraction(split(rng, writes, shards), capacity)


def served_fraction(demands: list[float], capacity: float) -> tuple[float, float]:
    """(share of the writes that go through, the hottest partition's load) for partitions
    that each take `capacity` in this tick."""
    total = sum(demands)
    if total == 0:
        return 1.0, 0.0
    served = sum(min(d, capacity) for d in demands)
    return served / total, max(demands) / capacity


# -- the cloud model ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    name: str
    images_per_day: float
    max_concurrency: int  # per event source mapping
    reserved: Optional[int]  # the worker's reserved concurrency, all mappings together
    max_backlog: int
    shards: int = 1
    mappings: int = 1
    account_concurrency: int = cap.LAMBDA_ACCOUNT_CONCURRENCY
    api_rps: float = cap.API_GATEWAY_RPS
    api_burst: float = cap.API_GATEWAY_BURST
    visibility_timeout: int = 360
    # The sweeper as it was (one job after another, one query per status), or as docs/scale.md
    # 6.1/6.2 made it: every shard in a pool of sweep_threads, expired jobs in batches.
    parallel_sweeper: bool = False
    sweep_threads: int = cap.SWEEP_THREADS
    burst: float = cap.DESIGN_BURST
    burst_start: float = 600.0
    burst_seconds: float = 900.0
    horizon: float = 3600.0
    dt: float = 1.0


@dataclass
class Result:
    scenario: Scenario
    arrivals: int = 0
    accepted: int = 0
    gateway_429: int = 0
    lambda_429: int = 0
    shed_503: int = 0
    index_503: int = 0  # uploads whose create write the index throttled
    retried_after_vt: int = 0  # claims and finishes the index throttled
    invocation_throttles: float = 0.0
    ready: int = 0
    resent: int = 0
    failed_timeout: int = 0
    max_depth: int = 0
    max_pollers: int = 0
    first_shed: Optional[float] = None
    first_index_throttle: Optional[float] = None
    heat: dict[int, float] = field(default_factory=dict)  # shards -> hottest partition load
    expired_left: float = 0.0  # expired jobs the sweeper could not remove within the hour
    waits: Histogram = field(default_factory=lambda: Histogram(1.0))


def service_sampler(rng: random.Random) -> Callable[[], float]:
    kinds = cap.IMAGE_MIX
    times = [cap.worker_seconds(k) for k in kinds]
    weights = [k.share for k in kinds]
    return lambda: rng.choices(times, weights)[0]


def simulate(sc: Scenario, seed: int = 1, compare: bool = True) -> Result:
    """One run. compare=False measures only the scenario's own index scheme (faster)."""
    rng = random.Random(seed)
    res = Result(sc)
    dt = sc.dt
    base = sc.images_per_day / cap.DAY
    mean_service = cap.mean_worker_seconds()
    kinds = [(cap.worker_seconds(k), k.share) for k in cap.IMAGE_MIX]
    api_seconds = cap.api_seconds_per_image()
    direct = cap.DIRECT_UPLOAD_SHARE
    gateway = TokenBucket(sc.api_rps, sc.api_burst)
    queue = Queue()
    pending: dict[int, list[Cohort]] = {}  # tick -> messages becoming visible
    finishing: dict[int, list[Cohort]] = {}  # tick -> jobs whose renditions are done
    # Warm at the start: the average rate has been running for a while.
    sources = [EventSource(sc.max_concurrency) for _ in range(sc.mappings)]
    steady = base * mean_service * 1.2 / sc.mappings
    for source in sources:
        source.pollers = float(min(source.maximum, max(cap.ESM_START, steady)))
    workers = Workers(service_sampler(rng), mean_service)
    api_environments = base * api_seconds * 1.2
    seen_depth, seen_at = 0, -math.inf
    worker_running = 0.0
    environments = int(sum(source.pollers for source in sources))  # each new one starts cold
    expired_backlog = 0.0
    sweeper_rate = (cap.sweeper_jobs_per_second(sc.sweep_threads) if sc.parallel_sweeper
                    else cap.sequential_sweeper_jobs_per_second())
    schemes = sorted({sc.shards, 1, cap.due_shards()} if compare else {sc.shards})
    res.heat = {s: 0.0 for s in schemes}
    ticks = int(sc.horizon / dt)

    def tick_of(seconds: float) -> int:
        return int(math.ceil(seconds / dt - 1e-9))

    for i in range(ticks):
        t = i * dt
        in_burst = sc.burst_start <= t < sc.burst_start + sc.burst_seconds
        rate = base * (sc.burst if in_burst else 1.0)

        # -- the API ---------------------------------------------------------------------
        n = poisson(rng, rate * dt)
        res.arrivals += n
        requests = n * (1 + cap.POLLS_PER_IMAGE)
        admitted = gateway.take(requests, dt)
        ok = rounded(rng, n * admitted / requests) if requests else 0
        res.gateway_429 += n - ok
        reserved = sc.reserved or 0
        unreserved = sc.account_concurrency - reserved - 2  # two sweepers, now and then
        api_free = unreserved - (0 if sc.reserved else worker_running)
        api_environments = min(api_free, api_environments + cap.LAMBDA_SCALE_PER_10S / 10 * dt)
        api_need = ok / dt * api_seconds
        if api_need > max(api_environments, 0.0):
            served = rounded(rng, ok * max(api_environments, 0.0) / api_need)
            res.lambda_429 += ok - served
            ok = served
        if t - seen_at >= API_CACHE_SECONDS:
            seen_depth, seen_at = queue.depth, t
        if seen_depth > sc.max_backlog and ok:
            res.shed_503 += ok
            res.first_shed = t if res.first_shed is None else res.first_shed
            ok = 0

        # -- messages, the event source, the workers ------------------------------------------
        for cohort in pending.pop(i, []):
            queue.push(cohort)
        res.max_depth = max(res.max_depth, queue.depth)
        limit = sc.reserved if sc.reserved else max(0.0, unreserved - api_need)
        pollers = int(sum(source.pollers for source in sources))
        slots = int(min(pollers, limit))
        if slots > environments:  # cold starts: each new environment's first job pays init
            workers.credit -= (slots - environments) * cap.INIT_SECONDS
            environments = slots
        started = workers.start(slots, dt, queue)
        worker_running = min(slots, sum(c.count * c.service for c in started) / dt)
        backlog = queue.depth > 0
        throttled = backlog and pollers > slots
        if throttled:  # each poller beyond the function's limit fails an invocation a job's time
            res.invocation_throttles += (pollers - slots) * dt / mean_service
        for source in sources:
            source.step(backlog, throttled, dt, worker_running / len(sources))
        res.max_pollers = max(res.max_pollers, pollers)
        claims = [c for c in started if not c.duplicate]
        claimed = sum(c.count for c in claims)
        done = finishing.pop(i, [])
        finished = sum(c.count for c in done)
        expiring = min(rate + expired_backlog / dt, sweeper_rate) if sweeper_rate < math.inf else rate
        expired_backlog = max(0.0, expired_backlog + (rate - expiring) * dt)

        # -- the due index's partitions ------------------------------------------------------
        writes = {  # index writes on each status's key this tick (put + delete per job)
            "awaiting_upload": direct * (ok + claimed),
            "queued": ok + claimed,
            "processing": claimed + finished,
            "ready": finished + expiring * dt,
        }
        fraction = {}
        for shards in schemes:
            for status, count in writes.items():
                share, load = key_load(rng, int(round(count)), shards, cap.DYNAMO_PARTITION_WCU * dt)
                res.heat[shards] = max(res.heat[shards], load)
                if shards == sc.shards:
                    fraction[status] = share
        create_ok = fraction["queued"] * (1 - direct + direct * fraction["awaiting_upload"])
        claim_ok = fraction["queued"] * fraction["processing"] * (1 - direct + direct * fraction["awaiting_upload"])
        finish_ok = fraction["processing"] * fraction["ready"]
        if min(create_ok, claim_ok, finish_ok) < 1 and res.first_index_throttle is None:
            res.first_index_throttle = t

        accepted = rounded(rng, ok * create_ok)
        res.index_503 += ok - accepted
        res.accepted += accepted
        if accepted:
            pending.setdefault(i + tick_of(cap.NOTIFY_SECONDS), []).append(Cohort(t + cap.NOTIFY_SECONDS, accepted))
        back = i + tick_of(sc.visibility_timeout)
        for cohort in claims:
            good = rounded(rng, cohort.count * claim_ok)
            if cohort.count > good:  # the claim failed: the message comes back after VT
                res.retried_after_vt += cohort.count - good
                pending.setdefault(back, []).append(Cohort(cohort.since, cohort.count - good, cohort.resent))
            if not good:
                continue
            res.waits.add(t - cohort.since, good)
            if cohort.service == mean_service and good > 1:  # a bulk start: split by image kind
                for (seconds, _), k in zip(kinds, allot(good, [s for _, s in kinds])):
                    finishing.setdefault(i + tick_of(seconds), []).append(Cohort(cohort.since, k))
            else:
                finishing.setdefault(i + tick_of(cohort.service), []).append(Cohort(cohort.since, good))
        for cohort in done:
            good = rounded(rng, cohort.count * finish_ok)
            res.ready += good
            if cohort.count > good:
                res.retried_after_vt += cohort.count - good
                pending.setdefault(back, []).append(Cohort(cohort.since, cohort.count - good))

        # -- the sweeper, each minute ----------------------------------------------------------
        if i % int(60 / dt) == 0:
            budget = cap.SWEEP_PER_RUN if sc.parallel_sweeper else cap.SEQUENTIAL_SWEEP_PER_RUN
            for cohort in list(queue.cohorts):
                if budget <= 0:
                    break
                age = t - cohort.since
                if cohort.duplicate or age < QUEUE_TIMEOUT:
                    continue
                if not cohort.resent:
                    part = queue.split_off(cohort, min(budget, cohort.count))
                    part.resent = True
                    res.resent += part.count
                    queue.push(Cohort(t, part.count, duplicate=True))  # the re-sent event
                    budget -= part.count
                elif age >= 2 * QUEUE_TIMEOUT:
                    part = queue.split_off(cohort, min(budget, cohort.count))
                    part.duplicate = True  # failed: its message finds a finished job
                    res.failed_timeout += part.count
                    budget -= part.count
    res.expired_left = expired_backlog
    return res


# -- scenarios -----------------------------------------------------------------------------------


def prod(images_per_day: float, **changes) -> Scenario:
    sizes = cap.stage_sizes(cap.STAGE_DESIGNS["prod"])
    base = Scenario(f"{images_per_day / 1e6:g}M/day, prod", images_per_day, sizes.max_concurrency,
                    sizes.reserved_concurrency, sizes.max_backlog)
    return replace(base, **changes)


def old_prod(images_per_day: float, **changes) -> Scenario:
    """prod as it was before this model: maximum concurrency 10, MAX_BACKLOG 10,000, VT 180 s."""
    base = Scenario(f"{images_per_day / 1e6:g}M/day, old prod", images_per_day, 10, None, 10_000,
                    visibility_timeout=180)
    return replace(base, **changes)


def plan_100m(**changes) -> Scenario:
    """docs/scale.md's plan for 100M: 8 queues and mappings, quotas raised, index sharded."""
    shards = cap.due_shards()
    base = Scenario("100M/day, 100M plan", 100e6, max_concurrency=1_000, reserved=8_000,
                    max_backlog=8 * cap.stage_sizes(cap.STAGE_DESIGNS["prod"]).max_backlog,
                    shards=shards, mappings=8, account_concurrency=12_000, api_rps=40_000,
                    api_burst=20_000, parallel_sweeper=True, sweep_threads=32)
    return replace(base, **changes)


def scenarios() -> list[Scenario]:
    shards = cap.due_shards()
    sizes = cap.stage_sizes(cap.STAGE_DESIGNS["prod"])
    return [
        old_prod(1e6),
        prod(1e6),
        prod(10e6, name="10M/day, prod, index unsharded"),
        prod(10e6, name=f"10M/day, prod, {shards} shards", shards=shards, parallel_sweeper=True),
        prod(10e6, name=f"10M/day, reserved 300 < maximum {sizes.max_concurrency}", shards=shards,
             reserved=300, parallel_sweeper=True),
        prod(100e6, name=f"100M/day, prod, {shards} shards", shards=shards, parallel_sweeper=True),
        plan_100m(),
    ]


def threshold(make: Callable[[float], Scenario], broken: Callable[[Result], bool], seed: int,
              low: float = 1e5, high: float = 3e8, steps: int = 8) -> tuple[float, Result]:
    """The smallest daily volume (within 10 %) at which `broken` holds, by bisection on a
    log scale; and the run that showed it."""
    found = None
    for _ in range(steps):
        middle = math.sqrt(low * high)
        scenario = make(middle)
        result = simulate(replace(scenario, horizon=scenario.burst_start + scenario.burst_seconds + 300),
                          seed, compare=False)
        if broken(result):
            high, found = middle, result
        else:
            low = middle
    return high, found


def refusals(r: Result) -> int:
    return r.shed_503 + r.gateway_429 + r.lambda_429 + r.index_503


def first_refusal(r: Optional[Result]) -> str:
    if r is None:
        return "none below the range"
    named = {"API Gateway 429": r.gateway_429, "API concurrency 429": r.lambda_429,
             "MAX_BACKLOG 503": r.shed_503, "index-throttled 503": r.index_503}
    return ", ".join(f"{name} {n:,}" for name, n in named.items() if n) or "-"


# -- the local check -----------------------------------------------------------------------------


@dataclass(frozen=True)
class LocalRun:
    """One row of benchmarks/load.py's table (the stop-6 notes): 300 uploads from 8 clients."""

    backend: str
    workers: int
    upload_p50: float
    upload_p99: float
    ready_p50: float
    ready_p99: float
    images_per_s: float
    uploads: int = 300
    clients: int = 8


LOCAL_RUNS = (
    LocalRun("sqs", 1, 0.106, 0.168, 18.3, 30.4, 8.68),
    LocalRun("sqs", 2, 0.120, 0.181, 14.8, 25.1, 10.06),
    LocalRun("amqp", 1, 0.140, 0.296, 19.0, 29.6, 8.51),
    LocalRun("amqp", 2, 0.124, 0.244, 13.5, 20.5, 11.76),
)
LOCAL_SERVICE_CV = 0.6  # the load mix runs from 0.3 MP to 12 MP
# A re-run of benchmarks/load.py here (sqs, 1 worker) finished 0.5 jobs a second while its 8
# clients uploaded and 1.3 a second after: the workers share the 2 cores with the API and moto.
OBSERVED_UPLOAD_PHASE_SPEED = 0.38


def lognormal(rng: random.Random, p50: float, p99: float) -> Callable[[], float]:
    sigma = max(1e-6, math.log(p99 / p50) / 2.326)
    return lambda: rng.lognormvariate(math.log(p50), sigma)


def simulate_local(run: LocalRun, seed: int = 1, dt: float = 0.005, upload_phase_speed: float = 1.0,
                   after_speed: float = 1.0) -> dict:
    """Closed loop, as benchmarks/load.py drives it: each client uploads again as soon as its
    upload returns. The message is visible when the upload returns; the job's created_at is
    half-way through the upload. The workers serve at the rate the benchmark measured for
    that many workers: on its 2-core machine moto and the API share the cores with them, so
    their rate is an input here, and what is checked is the queueing: the ready times.
    upload_phase_speed / after_speed: the workers' speed while uploads still arrive / after."""
    rng = random.Random(seed)
    upload_time = lognormal(rng, run.upload_p50, run.upload_p99)
    # One draw per job, scaled so that their mean is the measured per-worker time exactly.
    mean = run.workers / run.images_per_s
    sigma = math.sqrt(math.log(1 + LOCAL_SERVICE_CV ** 2))
    draws = [rng.lognormvariate(0.0, sigma) for _ in range(run.uploads)]
    times = iter([d * mean * len(draws) / sum(draws) for d in draws])
    in_flight = []  # each client's upload: (returns at, job created at)
    for _ in range(run.clients):
        latency = upload_time()
        in_flight.append((latency, latency / 2))
    speed = upload_phase_speed
    servers = Servers(run.workers, lambda: next(times) / speed)
    queue = Queue()
    sent = run.clients
    ready = Histogram(0.01)
    first_created, last_ready, done, t = math.inf, 0.0, 0, 0.0
    while done < run.uploads:
        for j, upload in enumerate(in_flight):
            if upload is not None and upload[0] <= t:
                queue.push(Cohort(upload[0], 1, created=upload[1]))
                first_created = min(first_created, upload[1])
                latency = upload_time()
                in_flight[j] = (upload[0] + latency, upload[0] + latency / 2) if sent < run.uploads else None
                sent += 1
        if speed != after_speed and all(u is None for u in in_flight):
            speed = after_speed
        for end, job in servers.start(t, queue):
            ready.add(end - job.created)
            last_ready = max(last_ready, end)
            done += 1
        t += dt
    return {"ready_p50": ready.percentile(50), "ready_p99": ready.percentile(99),
            "images_per_s": run.uploads / (last_ready - first_created)}


def simulate_local_contended(run: LocalRun, upload_phase_speed: float, seed: int = 1) -> dict:
    """The workers slowed while uploads arrive, and as much faster afterwards as keeps the
    benchmark's measured overall rate (found by bisection)."""
    low, high = 1.0, 1.0 / upload_phase_speed
    for _ in range(12):
        after = (low + high) / 2
        result = simulate_local(run, seed, upload_phase_speed=upload_phase_speed, after_speed=after)
        low, high = (after, high) if result["images_per_s"] < run.images_per_s else (low, after)
    return result


# -- output -----------------------------------------------------------------------------------------


def _fmt(value, digits=0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isnan(value):
        return "-"
    return f"{value:,.{digits}f}"


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.rjust(w) if j else c.ljust(w) for j, (c, w) in enumerate(zip(r, widths)))
                     for r in rows)


def report(results: list[Result]) -> str:
    head = ["scenario", "arrivals", "accepted", "429 gw", "429 fn", "503 shed", "503 index",
            "retry VT", "wait p50 s", "wait p99 s", "max depth", "pollers", "fn throttles",
            "resent", "failed", "first shed"]
    rows = [head]
    for r in results:
        sc = r.scenario
        first = None if r.first_shed is None else r.first_shed - sc.burst_start
        rows.append([sc.name, _fmt(r.arrivals), _fmt(r.accepted), _fmt(r.gateway_429), _fmt(r.lambda_429),
                     _fmt(r.shed_503), _fmt(r.index_503), _fmt(r.retried_after_vt),
                     _fmt(r.waits.percentile(50)), _fmt(r.waits.percentile(99)), _fmt(r.max_depth),
                     _fmt(r.max_pollers), _fmt(r.invocation_throttles), _fmt(r.resent),
                     _fmt(r.failed_timeout), "-" if first is None else f"+{first:.0f} s"])
    heat_head = ["scenario", *(f"heat {s} shard{'s' if s > 1 else ''}" for s in sorted(results[0].heat)),
                 "first index throttle", "expired left"]
    heat_rows = [heat_head]
    for r in results:
        sc = r.scenario
        first = None if r.first_index_throttle is None else r.first_index_throttle - sc.burst_start
        heat_rows.append([sc.name, *(f"{r.heat.get(s, 0):.2f}" for s in sorted(results[0].heat)),
                          "-" if first is None else f"{first:+.0f} s", _fmt(r.expired_left)])
    return table(rows) + "\n\n" + table(heat_rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    sizes = cap.stage_sizes(cap.STAGE_DESIGNS["prod"])
    print(f"one hour: average rate, 15 min at x{cap.DESIGN_BURST:g} from minute 10; prod: maximum "
          f"concurrency {sizes.max_concurrency}, reserved {sizes.reserved_concurrency}, MAX_BACKLOG "
          f"{sizes.max_backlog:,}, visibility 360 s; mean worker time {cap.mean_worker_seconds() * 1000:.0f} ms")
    results = [simulate(sc, args.seed) for sc in scenarios()]
    print()
    print(report(results))
    print()
    print("429 gw/fn: uploads refused by API Gateway / for want of API concurrency; 503 shed: over "
          "MAX_BACKLOG;\n503 index: the create write throttled by the due index; retry VT: claims "
          "and finishes throttled,\nback after the visibility timeout; fn throttles: worker invocations "
          "beyond the function's concurrency;\nwait: from visible in SQS to claimed; heat: the hottest "
          "index partition's peak writes / 1,000 WCU/s;\nfirst shed / index throttle: seconds after "
          "the burst began; expired left: jobs past retention not yet removed.")
    print()
    shards = cap.due_shards()
    sharded = lambda v: prod(v, shards=shards, parallel_sweeper=True)  # noqa: E731
    points = [
        ("old prod (max 10, MAX_BACKLOG 10,000): an upload refused", old_prod, lambda r: refusals(r) > 0),
        ("prod, index unsharded: a write throttled", prod, lambda r: r.first_index_throttle is not None),
        (f"prod, {shards} shards: an upload refused", sharded, lambda r: refusals(r) > 0),
        (f"prod, {shards} shards: uploads shed at MAX_BACKLOG", sharded, lambda r: r.shed_503 > 0),
        ("100M plan: an upload refused", lambda v: plan_100m(images_per_day=v), lambda r: refusals(r) > 0),
    ]
    print("where it starts (images/day with 15-minute x10 bursts; the first refusals at that volume):")
    for label, make, broken in points:
        volume, run = threshold(make, broken, args.seed)
        print(f"  {label:<58} {volume / 1e6:8.2f}M  {first_refusal(run)}")
    print()
    print("local check: the model with benchmarks/load.py's inputs (300 uploads, 8 clients; stop-6 notes)")
    print(f"against its measured figures; 'contended': workers at {OBSERVED_UPLOAD_PHASE_SPEED:.0%} speed "
          "while the uploads arrive, as observed here")
    rows = [["backend", "workers", "ready p50 s sim/measured", "p50 contended", "ready p99 s sim/measured",
             "p99 contended", "img/s sim/measured"]]
    for run in LOCAL_RUNS:
        sim = simulate_local(run, args.seed)
        slowed = simulate_local_contended(run, OBSERVED_UPLOAD_PHASE_SPEED, args.seed)

        def versus(value, measured):
            return f"{value:.1f} / {measured:.1f} ({value / measured - 1:+.0%})"

        rows.append([run.backend, str(run.workers), versus(sim["ready_p50"], run.ready_p50),
                     f"{slowed['ready_p50']:.1f} ({slowed['ready_p50'] / run.ready_p50 - 1:+.0%})",
                     versus(sim["ready_p99"], run.ready_p99),
                     f"{slowed['ready_p99']:.1f} ({slowed['ready_p99'] / run.ready_p99 - 1:+.0%})",
                     f"{sim['images_per_s']:.2f} / {run.images_per_s:.2f}"])
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
