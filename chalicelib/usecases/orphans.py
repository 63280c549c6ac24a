"""The orphan scan: objects no job needs, older than the grace period. Those whose job is
gone (deleted by TTL, say), and renditions that are neither the job's result nor its live
attempt's (a stale attempt that died before cleaning up). docs/scale.md §6.3.

Its cost grows with the bucket, not with the work, so it is cut into pieces:
- 32 key ranges: each prefix by the first hex digit of the job id (`originals/0` ...
  `renditions/f`);
- a range walks its keys in order, a page at a time: one LIST, one BatchGetItem per 100
  jobs (only what JobObjects holds), one DeleteObjects for the page's orphans, then its
  point (the last key done) is saved in the table;
- a run takes no new page past its budget, and the next run of that range resumes at the
  point. A range that reaches its end goes back to the start and rests until its next pass
  is due (a pass a day);
- the schedule is the fan-out: a scheduled run (every minute) takes one hex digit's two
  ranges, the digit of its minute, so some 15 runs work side by side, each with its own
  core, and a digit's runs, 16 minutes apart, never overlap (Settings._check).
infra/capacity.py sizes it. Idempotent like the sweeper: two runs on one range delete the
same orphans twice, which S3 counts as done.
"""
from __future__ import annotations

import itertools
from collections import Counter
from datetime import datetime, timedelta
from typing import Optional

from chalicelib.domain.errors import TransientError
from chalicelib.domain.jobs import JobObjects, JobStatus
from chalicelib.domain.storage import ScanPoint
from chalicelib.runtime import deadline
from chalicelib.runtime.logs import get_logger
from chalicelib.usecases.context import Context

log = get_logger("orphans")

# Job ids are hex UUIDs: a range per first character.
RANGE_DIGITS = "0123456789abcdef"
# Keys a page: one LIST page, and what one DeleteObjects takes.
PAGE_KEYS = 1000
# The calls of one page at most: 2 LISTs (a page may straddle two), 10 BatchGetItem, one
# DeleteObjects, the point's PutItem.
_CALLS_PER_PAGE = 14
_REPORTED = ("orphans_deleted", "errors", "ranges_left")


def key_ranges(prefix: str) -> list[str]:
    """The prefix's 16 key ranges, each named by the prefix that lists exactly its keys: the
    job ids that start with one hex digit. Together they hold every key the service writes
    (keys are made from job ids, chalicelib/domain/objectkeys.py); a key that starts with anything else was
    never ours, and the bucket's lifecycle rule removes it (infra/template.yaml)."""
    return [prefix + digit for digit in RANGE_DIGITS]


class OrphanScan:
    def __init__(self, ctx: Context):
        self._ctx = ctx

    def run(self, scheduled: bool = False) -> Counter:
        """scheduled: only the ranges of this run's turn (its minute's hex digit); otherwise
        every range (the tests, tools)."""
        ctx, s = self._ctx, self._ctx.settings
        now = ctx.clock()
        grace = now - timedelta(seconds=s.orphan_grace_seconds)
        stop_at = now + timedelta(seconds=s.orphan_scan_budget_seconds)
        prefixes = (s.originals_prefix, s.renditions_prefix)
        if scheduled:
            digit = RANGE_DIGITS[int(now.timestamp() // s.orphan_scan_interval_seconds) % len(RANGE_DIGITS)]
            ranges = [prefix + digit for prefix in prefixes]
        else:
            ranges = [r for prefix in prefixes for r in key_ranges(prefix)]
        points = ctx.jobs.scan_points(ranges)
        due = [r for r in ranges if self._due(points[r], now)]
        report: Counter = Counter()
        parts = deadline.run_in_pool(lambda r: self._scan(r, points[r], now, grace, stop_at),
                                     due, s.orphan_scan_threads, "orphans")
        for part in parts:
            report.update(part)
        if report["keys_checked"] or report["errors"]:
            log.info("orphan_sweep_done", ranges=len(due), **report)
        # What it did and what it left; the log line has the rest.
        return Counter({k: n for k, n in report.items() if k in _REPORTED and n})

    def _due(self, point: ScanPoint, now: datetime) -> bool:
        """A pass under way goes on; a new one starts once the last began long enough ago."""
        if point.after is not None or point.pass_started is None:
            return True
        return now >= point.pass_started + timedelta(seconds=self._ctx.settings.orphan_pass_seconds)

    def _scan(self, r: str, point: ScanPoint, now: datetime, grace: datetime,
              stop_at: datetime) -> Counter:
        """One range, page by page, from its point; stops at the run's budget."""
        ctx = self._ctx
        report: Counter = Counter()
        resuming = point.after is not None
        started = point.pass_started if resuming and point.pass_started is not None else now
        try:
            keys = ctx.objects.list_keys(r, grace, after=point.after)
            while True:
                if ctx.clock() >= stop_at or not deadline.has_time_for(_CALLS_PER_PAGE):
                    report["ranges_left"] += 1  # the next run resumes at the saved point
                    return report
                page = list(itertools.islice(keys, PAGE_KEYS))
                orphans = self._orphans(page)
                if orphans:
                    ctx.objects.delete_many(orphans)
                    report["orphans_deleted"] += len(orphans)
                report["keys_checked"] += len(page)
                if len(page) < PAGE_KEYS:  # the range's end: the next pass starts over
                    ctx.jobs.save_scan_point(r, ScanPoint(after=None, pass_started=started))
                    report["ranges_done"] += 1
                    return report
                ctx.jobs.save_scan_point(r, ScanPoint(after=page[-1], pass_started=started))
        except TransientError:  # this range resumes at its last saved point; the others go on
            log.exception("orphan_range_failed", range=r)
            report["errors"] += 1
            return report

    def _orphans(self, page: list[str]) -> list[str]:
        keys = self._ctx.object_keys
        ids = sorted({job_id for job_id in map(keys.job_id_of, page) if job_id is not None})
        jobs = self._ctx.jobs.objects_of(ids) if ids else {}
        return [key for key in page if not self._needed(jobs.get(keys.job_id_of(key)), key)]

    def _needed(self, job: Optional[JobObjects], key: str) -> bool:
        if job is None:
            return False
        if key == job.original_key:
            return True
        if job.status is JobStatus.READY:
            return key in job.result_keys
        # A processing job's live attempt may be writing its renditions right now.
        return job.status is JobStatus.PROCESSING and self._ctx.object_keys.attempt_of(key) == job.attempt
