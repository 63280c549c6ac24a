from datetime import datetime, timedelta, timezone

import pytest

from chalicelib.domain.errors import IllegalTransition
from chalicelib.domain.jobs import TERMINAL, TRANSITIONS, Job, JobStatus, Rendition
from chalicelib.domain.renditions import RenditionName
from chalicelib.domain.vocabulary import ErrorCode

NOW = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)
WEEK = timedelta(days=7)


def job(status=JobStatus.QUEUED, **kw):
    return Job(job_id="j", owner="o", status=status, created_at=NOW, updated_at=NOW,
               expires_at=NOW + WEEK, original_key="originals/j", **kw)


def test_terminal_statuses_have_no_way_out():
    for status in TERMINAL:
        assert TRANSITIONS[status] == frozenset()
        assert status.terminal


def test_every_status_has_a_row_in_the_transition_table():
    assert set(TRANSITIONS) == set(JobStatus)


def processing():
    """What JobStore.claim makes of a queued job."""
    return job(status=JobStatus.PROCESSING, attempt=1, lease_expires_at=NOW + timedelta(minutes=2))


MAX_ATTEMPTS = 3
# The lease a job carries, as the claim rule reads it at NOW.
LEASES = {"none": None, "running": NOW + timedelta(seconds=1), "ends now": NOW,
          "ran out": NOW - timedelta(seconds=1)}
# Whether a job of this status with this lease may be claimed, attempts aside.
OPEN_TO_CLAIM = {
    (JobStatus.QUEUED, "none"): True, (JobStatus.QUEUED, "running"): True,
    (JobStatus.QUEUED, "ends now"): True, (JobStatus.QUEUED, "ran out"): True,
    (JobStatus.PROCESSING, "none"): False, (JobStatus.PROCESSING, "running"): False,
    (JobStatus.PROCESSING, "ends now"): True, (JobStatus.PROCESSING, "ran out"): True,
}


@pytest.mark.parametrize("status", list(JobStatus), ids=lambda s: s.value)
@pytest.mark.parametrize("lease", list(LEASES))
@pytest.mark.parametrize("attempt", [0, MAX_ATTEMPTS - 1, MAX_ATTEMPTS, MAX_ATTEMPTS + 1])
def test_the_claim_rule_takes_queued_or_lapsed_jobs_with_an_attempt_left(status, lease, attempt):
    candidate = job(status=status, attempt=attempt, lease_expires_at=LEASES[lease])
    expected = OPEN_TO_CLAIM.get((status, lease), False) and attempt < MAX_ATTEMPTS
    assert candidate.claimable(NOW, MAX_ATTEMPTS) is expected
    assert candidate.attempt_left(MAX_ATTEMPTS) is (attempt < MAX_ATTEMPTS)


def test_a_lease_is_active_until_it_ends():
    claimed = processing()
    assert claimed.lease_active(NOW + timedelta(minutes=1))
    assert not claimed.lease_active(NOW + timedelta(minutes=2))


def test_ready_sets_renditions_finished_at_and_restarts_retention():
    later = NOW + timedelta(hours=1)
    d, t = Rendition("r/d.jpg", 1280, 960), Rendition("r/t.jpg", 256, 256)
    done = processing().ready(later, {RenditionName.DISPLAY: d, RenditionName.THUMB: t}, WEEK)
    assert done.status is JobStatus.READY
    assert (done.renditions[RenditionName.DISPLAY], done.renditions[RenditionName.THUMB]) == (d, t)
    assert done.finished_at == later
    assert done.expires_at == later + WEEK
    assert done.lease_expires_at is None


def test_failed_keeps_the_code():
    failed = job().failed(NOW, ErrorCode.INVALID_IMAGE, WEEK)
    assert failed.status is JobStatus.FAILED and failed.error_code == ErrorCode.INVALID_IMAGE
    assert failed.finished_at == NOW


@pytest.mark.parametrize("terminal", sorted(TERMINAL, key=lambda s: s.value))
def test_a_terminal_job_never_moves_again(terminal):
    done = job(status=terminal)
    with pytest.raises(IllegalTransition):
        done.queued(NOW, timedelta(minutes=2))
    with pytest.raises(IllegalTransition):
        done.failed(NOW, ErrorCode.INVALID_IMAGE, WEEK)
    with pytest.raises(IllegalTransition):
        done.cancelled(NOW, WEEK)


def test_queued_cannot_become_ready_without_a_claim():
    with pytest.raises(IllegalTransition):
        job().ready(NOW, {RenditionName.DISPLAY: Rendition("a", 1, 1), RenditionName.THUMB: Rendition("b", 1, 1)},
                    WEEK)


def test_processing_cannot_go_back_to_queued():
    with pytest.raises(IllegalTransition):
        processing().queued(NOW, timedelta(minutes=10))


def test_expiry_is_read_from_the_clock():
    assert not job().is_expired(NOW + WEEK - timedelta(seconds=1))
    assert job().is_expired(NOW + WEEK)
