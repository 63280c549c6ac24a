"""What each stage deploys follows from the capacity model (infra/capacity.py, docs/scale.md)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from chalicelib.config import Settings
from infra import capacity as cap
from infra.stage_config import WORKER_FUNCTION
from local.provision import load_template

ROOT = Path(__file__).resolve().parents[2]
CLOUD_STAGES = ("dev", "prod")


def stage(name: str) -> dict:
    return json.loads((ROOT / ".chalice" / "config.json").read_text())["stages"][name]


@pytest.mark.parametrize("name", CLOUD_STAGES)
def test_each_stage_deploys_the_sizes_its_design_load_gives(name):
    sizes = cap.stage_sizes(cap.STAGE_DESIGNS[name])
    config = stage(name)
    settings = Settings.from_environ({**config["environment_variables"], "AUTH_MODE": "jwt",
                                      "AUTH_JWT_SECRET": "a-stage-secret"})
    assert settings.worker_max_concurrency == sizes.max_concurrency
    assert settings.max_backlog == sizes.max_backlog
    assert config["lambda_functions"][WORKER_FUNCTION].get("reserved_concurrency") == sizes.reserved_concurrency


@pytest.mark.parametrize("name", CLOUD_STAGES)
def test_the_sizes_carry_the_design_peak(name):
    design = cap.STAGE_DESIGNS[name]
    sizes = cap.stage_sizes(design)
    peak = cap.peak_rate(design.images_per_day, design.burst)
    # Enough workers for the peak, with room for the spread of service times.
    assert sizes.max_concurrency >= cap.worker_concurrency_needed(peak) * cap.HEADROOM
    assert sizes.max_concurrency <= cap.MAX_CONCURRENCY_RANGE[1]
    # Shedding starts before an accepted job could wait past QUEUE_TIMEOUT and be resent.
    drain = sizes.max_concurrency / cap.mean_worker_seconds()
    assert sizes.max_backlog / drain <= Settings().queue_timeout_seconds / 2
    # ...and not before the queue holds a burst's first minute.
    assert sizes.max_backlog >= 60 * peak


@pytest.mark.parametrize("name", CLOUD_STAGES)
def test_a_reservation_is_never_below_the_event_sources_maximum(name):
    """Otherwise the event source invokes more often than Lambda lets the worker run."""
    sizes = cap.stage_sizes(cap.STAGE_DESIGNS[name])
    if sizes.reserved_concurrency is not None:
        assert sizes.reserved_concurrency >= sizes.max_concurrency


def test_prod_fits_a_default_account_with_room_for_the_api_at_its_peak():
    design = cap.STAGE_DESIGNS["prod"]
    sizes = cap.stage_sizes(design)
    unreserved = cap.LAMBDA_ACCOUNT_CONCURRENCY - sizes.reserved_concurrency
    assert unreserved >= cap.LAMBDA_UNRESERVED_MINIMUM
    api = cap.api_concurrency_needed(cap.peak_rate(design.images_per_day, design.burst))
    assert api + 2 <= unreserved  # the API and the two sweepers share what is left


def test_dev_reserves_nothing_so_that_a_new_account_can_deploy_it():
    """New accounts may start with a quota of 10: Lambda refuses any reservation there."""
    assert cap.stage_sizes(cap.STAGE_DESIGNS["dev"]).reserved_concurrency is None
    assert "reserved_concurrency" not in stage("dev")["lambda_functions"][WORKER_FUNCTION]


def test_the_template_visibility_timeout_is_the_models():
    template = load_template()
    seconds = template["Parameters"]["VisibilityTimeoutSeconds"]["Default"]
    longest = max(stage(n)["lambda_functions"][WORKER_FUNCTION]["lambda_timeout"] for n in CLOUD_STAGES)
    assert seconds == cap.visibility_timeout(longest, Settings().lease_seconds)


def test_the_due_index_shards_keep_the_ceilings_hottest_key_under_half_a_partition():
    shards = cap.due_shards()
    assert shards & (shards - 1) == 0  # a power of two
    hottest = max(cap.index_writes_per_key().values())
    peak = cap.peak_rate(cap.DESIGN_CEILING_PER_DAY, cap.DESIGN_BURST)
    assert hottest * peak / shards <= cap.SHARD_TARGET * cap.DYNAMO_PARTITION_WCU
    assert hottest * peak / (shards // 2) > cap.SHARD_TARGET * cap.DYNAMO_PARTITION_WCU  # not more than needed
    # Before sharding, one status key takes every job's writes: the hot key.
    assert hottest * peak > 20 * cap.DYNAMO_PARTITION_WCU


def test_the_models_per_image_figures_add_up():
    """One image (half through each upload path): 2 writes a key, 3 S3 PUTs, 1 S3 GET."""
    assert max(cap.index_writes_per_key().values()) == 2
    assert cap.calls_per_image("s3:PutObject") == 1 + cap.RENDITIONS_PER_JOB  # the original, then one JPEG a size
    assert cap.calls_per_image("s3:GetObject") == 1
    # 2 transactions (job + quota place), 2 updates, 2 puts (the finish, the duplicate index:
    # issue 50); a direct upload's ready write is two units since the focus (issue 49).
    assert cap.per_image("wcu") == pytest.approx(11)
    assert cap.per_image("index_wcu") == pytest.approx(7.5)
    # Lambda gives 1 GB 58 % of a core: libvips' 83.6 ms and the function's own 21.6 (issue 48) become 182 ms.
    assert cap.cpu_share() == pytest.approx(1024 / 1769)
    assert math.isclose(cap.worker_seconds(cap.IMAGE_MIX[0]) * 1000, 384, abs_tol=2)  # the decoding child keeps its memory (issue 48); both webhooks in one read at the end (issue 48); the duplicate index read and note (issue 50); 3 rendition PUTs (thumb_512, issue 33) + the slot release and the webhook lookup; 3 reads fewer (issue 11); + the service webhook lookups at the claim and the end (issue 34)


@pytest.mark.parametrize("name", CLOUD_STAGES)
def test_the_model_assumes_the_memory_and_timeouts_the_stage_deploys(name):
    functions = stage(name)["lambda_functions"]
    assert functions[WORKER_FUNCTION]["lambda_memory_size"] == cap.WORKER_MEMORY_MB
    assert functions["sweep"]["lambda_timeout"] == cap.SWEEP_TIMEOUT_S
    assert functions["sweep_orphans"]["lambda_timeout"] == cap.ORPHAN_SCAN_TIMEOUT_S
    assert functions["sweep_orphans"]["lambda_memory_size"] == cap.ORPHAN_SCAN_MEMORY_MB


def test_the_code_shards_and_sweeps_as_the_model_says():
    from chalicelib.domain.jobs import DUE_SHARDS

    assert DUE_SHARDS == cap.due_shards() == cap.DUE_SHARDS
    # A batch started just before the budget ends must still fit in the function's timeout.
    assert cap.SWEEP_BUDGET_S + cap.SWEEP_BATCH * cap.removal_seconds() < cap.SWEEP_TIMEOUT_S


def test_the_orphan_scan_runs_as_the_model_says_and_holds_at_the_ceiling():
    from chalicelib.usecases import orphans

    settings = Settings()
    assert len(orphans.RANGE_DIGITS) == cap.ORPHAN_DIGITS and orphans.PAGE_KEYS == cap.SCAN_PAGE_KEYS
    assert settings.orphan_scan_threads == len(cap.ORPHAN_KEYS_PER_JOB)  # a thread per range of a digit
    assert set(cap.ORPHAN_KEYS_PER_JOB) == {settings.originals_prefix, settings.renditions_prefix}
    # Every range makes its pass a day at the design ceiling, with the default retention.
    retention_days = settings.retention_seconds / cap.DAY
    assert cap.orphan_scan_max_images_per_day(retention_days) > cap.DESIGN_CEILING_PER_DAY
    # More memory than a core buys nothing: the threads share one interpreter.
    assert cap.ORPHAN_SCAN_MEMORY_MB == cap.FULL_VCPU_MB


def test_push_sends_fast_enough_for_a_shard_written_at_its_full_rate():
    """A shard is read by one invocation at a time; its job changes, at the share of the
    stream's records they are, must go out with the model's headroom (PUSH_SEND_THREADS)."""
    changes_per_record = cap.push_messages_per_image() / cap.stream_records_per_image()
    full_shard = cap.STREAM_SHARD_RECORDS_PER_S * changes_per_record
    assert cap.fanout_changes_per_shard_s() >= full_shard * cap.HEADROOM
    assert cap.fanout_changes_per_shard_s(threads=1) < full_shard  # why there are threads at all
    for per_day in (1_000_000, 10_000_000, 100_000_000):
        (fanout,) = [row for row in cap.push_usage(per_day) if row.component.startswith("stream fan-out")]
        assert fanout.load < 1


@pytest.mark.parametrize("name", CLOUD_STAGES)
def test_the_push_model_assumes_the_memory_the_stage_gives_its_functions(name):
    functions = stage(name)["lambda_functions"]
    assert functions["push_job_changes"]["lambda_memory_size"] == cap.PUSH_FUNCTION_GB * 1024
    assert functions["websocket_connect"]["lambda_memory_size"] == cap.PUSH_CONNECT_GB * 1024
    # A full batch, every change sent in turn: far inside the function's time.
    batch = cap.STREAM_BATCH * cap.push_change_seconds()
    assert batch * 4 < functions["push_job_changes"]["lambda_timeout"]


def test_push_costs_less_than_waits_and_about_what_the_polls_it_replaces_cost():
    from infra import prices

    for per_day in (1_000_000, 10_000_000, 100_000_000):
        pushed = sum(line.per_1000 for line in prices.push_per_1000(per_day))
        waits = sum(line.per_1000 for line in prices.waits_per_1000(per_day))
        polls = prices.polls_per_1000(per_day)
        assert 0 < pushed - polls < waits
        assert pushed < 2 * polls
