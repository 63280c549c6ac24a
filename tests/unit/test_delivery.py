"""Renditions an app can cache: one URL per window, a cache key per rendition's bytes, and the
objects' Cache-Control (docs/contract.md "Delivery")."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from chalicelib.config import Settings
from chalicelib.domain.delivery import UrlWindow, cache_key
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.objectkeys import ObjectKeys
from chalicelib.domain.renditions import RenditionFormat, RenditionName
from chalicelib.http import prefer, views
from chalicelib.http.views import rfc3339
from chalicelib.usecases import UseCases
from tests.fakes import Clock, FakeEdgeCache, FakeJobStore, FakeObjectStore, fake_context
from tests.images import jpeg

# A production-like clock: microseconds, mid-window.
START = datetime(2026, 7, 15, 10, 17, 42, 123456, tzinfo=timezone.utc)


def make_use_cases(**settings):
    clock = Clock(START)
    settings = Settings(bucket="images", **settings)
    return UseCases(fake_context(settings=settings, jobs=FakeJobStore(), objects=FakeObjectStore(clock), clock=clock))


def ready_job(use_cases, owner="alice"):
    job = use_cases.uploads.accept_upload(owner, jpeg(900, 600), None).job
    use_cases.worker.handle_object_created(ObjectCreated(bucket="images", key=job.original_key, size=0, etag="e"))
    return use_cases.manage.get_job(owner, job.job_id)


def body(use_cases, job):
    return views.job_body(job, use_cases.manage.urls(job))


def all_urls(b):
    return [b["image_url"], b["thumb_url"], *(r["url"] for r in b["renditions"].values()),
            *(v["url"] for r in b["renditions"].values() for v in r["variants"].values())]


def test_the_window_starts_on_a_multiple_of_its_length_from_the_epoch():
    window = UrlWindow(3600, 3600)
    assert window.signed_at(START) == datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)
    assert window.expires_at(START) == datetime(2026, 7, 15, 12, 0, tzinfo=timezone.utc)
    end = datetime(2026, 7, 15, 10, 59, 59, 999999, tzinfo=timezone.utc)
    assert window.signed_at(end) == window.signed_at(START)
    assert window.signed_at(end + timedelta(microseconds=1)) == datetime(2026, 7, 15, 11, tzinfo=timezone.utc)


@pytest.mark.parametrize("seconds, ttl", [(3600, 3600), (300, 900), (86400, 86400)])
def test_every_url_handed_out_lives_at_least_the_ttl_whenever_in_the_window(seconds, ttl):
    window = UrlWindow(seconds, ttl)
    start = window.signed_at(START)
    for offset in (0, 1, seconds / 2, seconds - 0.000001):
        now = start + timedelta(seconds=offset)
        assert window.expires_at(now) - now >= timedelta(seconds=ttl) >= timedelta(seconds=seconds)


def test_two_reads_in_a_window_give_the_same_urls_and_the_next_window_new_ones():
    use_cases = make_use_cases()
    job = ready_job(use_cases)
    first = body(use_cases, job)
    use_cases.ctx.clock.advance(40 * 60)  # 10:57:42, the same window
    again = body(use_cases, job)
    assert all_urls(again) == all_urls(first) and again["urls_expire_at"] == first["urls_expire_at"]
    assert first["urls_expire_at"] == "2026-07-15T12:00:00Z"
    use_cases.ctx.clock.advance(5 * 60)  # 11:02:42
    later = body(use_cases, job)
    assert not set(all_urls(later)) & set(all_urls(first))
    assert later["urls_expire_at"] == "2026-07-15T13:00:00Z"


def test_no_url_outlives_its_job_and_the_last_windows_still_give_one_url_each():
    """URLs are cut at the job's expires_at (issue 47, item 4): a read just before the job
    expires hands out nothing that claims, or is signed for, more; the same URLs on every
    read of a window still, near the end too."""
    use_cases = make_use_cases()
    job = ready_job(use_cases)
    clock = use_cases.ctx.clock
    clock.now = job.expires_at - timedelta(minutes=90)  # 08:47:42 on the last day
    b = body(use_cases, job)
    assert b["urls_expire_at"] == rfc3339(job.expires_at.replace(minute=0, second=0, microsecond=0))  # 10:00, uncut
    cut = rfc3339(job.expires_at.replace(microsecond=0))  # 10:17:42
    reads = {}
    for minutes in (30, 20, 1 / 60):  # 09:47:42 and 09:57:42 (one window), 10:17:41 (the last)
        clock.now = job.expires_at - timedelta(minutes=minutes)
        b = body(use_cases, job)
        assert b["urls_expire_at"] == cut
        reads[minutes] = all_urls(b)
    assert reads[30] == reads[20] and reads[1 / 60] != reads[30]
    # Signed for what is left from the window's start: 10:00 to 10:17:42.
    assert {url.split("expires=")[1].split("&")[0] for url in reads[1 / 60]} == {"1062"}
    clock.now = job.expires_at.replace(microsecond=0)  # 10:17:42.000, the job ends at .123
    assert body(use_cases, job)["urls_expire_at"] == cut  # ended already, and says so: never later
    window = UrlWindow(3600, 3600)  # a job ending in its window's first second still gets a signature
    end = datetime(2026, 7, 22, 10, 0, 0, 500000, tzinfo=timezone.utc)
    assert window.lifetime(end - timedelta(microseconds=1), end) == (end.replace(microsecond=0) - timedelta(seconds=1), 1)


def test_the_etag_does_not_change_with_the_window():
    use_cases = make_use_cases()
    job = ready_job(use_cases)
    tag = prefer.etag(job)
    use_cases.ctx.clock.advance(5 * 3600)
    assert prefer.etag(use_cases.manage.get_job("alice", job.job_id)) == tag


def test_every_rendition_and_variant_has_a_cache_key_naming_its_object():
    use_cases = make_use_cases()
    job = use_cases.uploads.accept_upload("alice", jpeg(900, 600), None, formats=["webp"]).job
    use_cases.worker.handle_object_created(ObjectCreated(bucket="images", key=job.original_key, size=0, etag="e"))
    job = use_cases.manage.get_job("alice", job.job_id)
    b = body(use_cases, job)
    keys = []
    for name, r in job.renditions.items():
        shown = b["renditions"][str(name)]
        assert shown["cache_key"] == cache_key(r.key)
        keys.append(shown["cache_key"])
        for fmt, v in r.variants.items():
            assert shown["variants"][fmt.content_type]["cache_key"] == cache_key(v.key)
            keys.append(cache_key(v.key))
    assert len(set(keys)) == len(keys)
    # The same on every read, in any window, while the URLs change.
    use_cases.ctx.clock.advance(3 * 3600)
    later = body(use_cases, job)
    assert cache_keys(later) == cache_keys(b) and all_urls(later) != all_urls(b)


def cache_keys(b):
    return [(n, r["cache_key"], sorted((t, v["cache_key"]) for t, v in r["variants"].items()))
            for n, r in b["renditions"].items()]


def test_a_cache_key_is_short_opaque_and_changes_with_the_attempt_the_size_and_the_format():
    keys = ObjectKeys("originals/", "renditions/")
    job_id = "6f1c1d7e-1f4b-4c5a-9b1e-0c1d2e3f4a5b"
    one = cache_key(keys.rendition(job_id, 1, RenditionName.THUMB))
    assert len(one) <= 32 and job_id not in one and "/" not in one and one.isalnum()
    assert one == cache_key(keys.rendition(job_id, 1, RenditionName.THUMB))
    others = {cache_key(keys.rendition(job_id, 2, RenditionName.THUMB)),
              cache_key(keys.rendition(job_id, 1, RenditionName.DISPLAY)),
              cache_key(keys.rendition(job_id, 1, RenditionName.THUMB, RenditionFormat.WEBP))}
    assert one not in others and len(others) == 3


def test_renditions_are_stored_immutable_for_their_retention_and_originals_private():
    use_cases = make_use_cases(retention_seconds=3 * 86400)
    job = ready_job(use_cases)
    store = use_cases.ctx.objects
    for r in job.renditions.values():
        for key in r.keys:
            assert store.cache_controls[key] == "public, max-age=259200, immutable"
    assert store.cache_controls[job.original_key] == "private, no-store"


@pytest.mark.parametrize("window, ttl", [(3600, 1800), (0, 3600), (4 * 86400, 4 * 86400)])
def test_a_window_the_urls_cannot_outlive_is_refused_at_start(window, ttl):
    with pytest.raises(ValueError, match="URL_"):
        Settings.from_environ({"URL_WINDOW_SECONDS": str(window), "URL_TTL_SECONDS": str(ttl),
                               "LOCAL_RUNNER": "1"})


# -- INVALIDATE_ON_DELETE: the CDN's copies of a deleted job (issue 47, item 4) -----------------


def with_edge(**settings):
    use_cases = make_use_cases(**settings)
    use_cases.ctx.edge_cache = FakeEdgeCache(use_cases.ctx.objects)
    return use_cases


def test_a_delete_of_a_ready_job_asks_the_cdn_to_drop_its_renditions_once_they_are_gone():
    use_cases = with_edge()
    job = ready_job(use_cases)
    use_cases.manage.delete("alice", job.job_id)
    # The job's one prefix, every attempt's renditions under it, asked after the objects went:
    # a request meanwhile finds nothing to cache again.
    assert use_cases.ctx.edge_cache.asked == [(f"renditions/{job.job_id}/", [])]


def test_a_delete_answers_when_the_cdn_does_not_take_the_invalidation():
    use_cases = with_edge()
    job = ready_job(use_cases)
    use_cases.ctx.edge_cache.down = True
    use_cases.manage.delete("alice", job.job_id)  # no error: the DELETE is done
    assert use_cases.ctx.jobs.get(job.job_id) is None
    assert use_cases.ctx.metrics.total("EdgeInvalidationsFailed") == 1


def test_a_job_whose_urls_were_never_handed_out_costs_no_invalidation():
    use_cases = with_edge()
    queued = use_cases.uploads.accept_upload("alice", jpeg(900, 600), None).job
    use_cases.manage.delete("alice", queued.job_id)  # never ready: no URL of it exists
    cancelled = use_cases.manage.cancel("alice", use_cases.uploads.accept_upload("alice", jpeg(), None).job.job_id)
    use_cases.manage.delete("alice", cancelled.job_id)
    assert use_cases.ctx.edge_cache.asked == []
