"""What an app's image cache gets from the feed over a day: a client re-reads a feed of ready
jobs every few minutes (the GET of each, as an app's gallery does) and shows each job's
thumbnail through an image cache, as Kingfisher, Nuke, SDWebImage, Coil, Glide and expo-image
do: keyed by the full URL (their default), or by the job's `cache_key` (the key override each
offers). Hit ratio and bytes downloaded, side by side:

- today: URLs signed at each read's second (as before URL windows; the same signer with a
  window of one second, which is what that was);
- after: URLs signed at the window's start (URL_WINDOW_SECONDS, default 1 h).

DELIVERY=s3 on moto's server (started here on a free port): real jobs made by the worker from
real photographs, real downloads over HTTP of the URLs the GET hands out. The day is simulated
by shifting the service's clock, never by sleeping. The cache keeps every entry (a phone's
disk cache holds a day's thumbnails easily), so a miss is the URL or key it has not seen.

    python benchmarks/delivery.py [--jobs 50] [--every 300] [--hours 24] [--rendition thumb]
                                  [--window 3600] [--json]

Targets (issue 33): URL-keyed hit ratio >= 0.9 after, cache_key-keyed 1.0 after each
rendition's first download.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.stack import free_port  # noqa: E402  (one for every benchmark)
for _name, _value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}.items():
    os.environ[_name] = _value  # moto takes any credentials; never reach a real account
os.environ.pop("AWS_PROFILE", None)
os.environ.pop("AWS_SESSION_TOKEN", None)

PHOTOS = ("astronaut.png", "coffee.png", "chelsea.png", "rocket.jpg", "motorcycle_left.png",
          "hubble_deep_field.jpg", "retina.jpg", "horse.png", "brick.png", "grass.png")


@dataclasses.dataclass
class Cache:
    """An image cache: entries by key, never evicted; counts hits, misses and bytes fetched."""

    name: str
    entries: dict = dataclasses.field(default_factory=dict)
    hits: int = 0
    misses: int = 0
    bytes: int = 0
    hits_after_first: int = 0  # hits among reads of renditions already downloaded once
    reads_after_first: int = 0

    def show(self, key: str, url: str, seen: set, session) -> None:
        """`seen`: None on the rendition's first read by this client, else the set it is in."""
        hit = key in self.entries
        if hit:
            self.hits += 1
        else:
            got = session.get(url, timeout=30)
            got.raise_for_status()
            self.entries[key] = len(got.content)
            self.misses += 1
            self.bytes += len(got.content)
        if seen is not None:
            self.reads_after_first += 1
            self.hits_after_first += hit

    def figures(self) -> dict:
        reads = self.hits + self.misses
        return {"reads": reads, "hits": self.hits, "misses": self.misses,
                "hit_ratio": round(self.hits / reads, 4), "bytes_downloaded": self.bytes}


def make_jobs(use_cases, count: int) -> list:
    from chalicelib.domain.events import ObjectCreated
    from tests.images import photo, unique

    owner, jobs = "feed-owner", []
    for i in range(count):
        # Bytes of its own: an owner's exact duplicate is copied, not processed.
        data = unique(photo(PHOTOS[i % len(PHOTOS)]), f"feed-{i}")
        job = use_cases.uploads.accept_upload(owner, data).job
        outcome = use_cases.worker.handle_object_created(
            ObjectCreated(use_cases.ctx.settings.bucket, job.original_key, 0))
        assert outcome == "ready", outcome
        jobs.append(use_cases.manage.get_job(owner, job.job_id))
    return jobs


def simulate(use_cases, jobs, window: int, every: int, hours: float, rendition: str, start: datetime,
             session) -> dict:
    """One client's day with the service's URL window set to `window` seconds."""
    from chalicelib.domain.delivery import UrlWindow
    from chalicelib.http.views import job_body

    ctx = use_cases.ctx
    ctx.__dict__["url_window"] = UrlWindow(window, ctx.settings.url_ttl_seconds)  # a cached_property
    by_url, by_key = Cache("url"), Cache("cache_key")
    downloaded: set = set()
    rounds = int(hours * 3600 // every)
    expired = 0
    for n in range(rounds):
        now = start + timedelta(seconds=n * every, microseconds=137_000 + n)
        ctx.clock = lambda now=now: now
        for job in jobs:
            body = job_body(job, use_cases.manage.urls(job))
            shown = body["renditions"][rendition]
            expires = datetime.strptime(body["urls_expire_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
            expired += expires <= now
            first = shown["cache_key"] not in downloaded
            by_url.show(shown["url"], shown["url"], None if first else downloaded, session)
            by_key.show(shown["cache_key"], shown["url"], None if first else downloaded, session)
            downloaded.add(shown["cache_key"])
    out = {"window_seconds": window, "rounds": rounds, "urls_already_expired": expired}
    for cache in (by_url, by_key):
        figures = cache.figures()
        figures["hit_ratio_after_first_download"] = round(cache.hits_after_first / cache.reads_after_first, 4)
        out[cache.name] = figures
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--every", type=int, default=300, help="seconds between re-reads of the feed")
    parser.add_argument("--hours", type=float, default=24)
    parser.add_argument("--rendition", default="thumb", help="the size the feed shows")
    parser.add_argument("--window", type=int, default=3600, help="URL_WINDOW_SECONDS after")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import requests

    from chalicelib.bootstrap import build_use_cases
    from chalicelib.config import Settings
    from local.provision import provision
    from local.services import aws_client, start_moto, stop

    port = free_port()
    moto = start_moto("127.0.0.1", port)
    try:
        endpoint = f"http://127.0.0.1:{port}"
        suffix = uuid.uuid4().hex[:8]
        settings = Settings(endpoint_url=endpoint, bucket=f"feed-{suffix}", table=f"feed-{suffix}",
                            events_queue_name=f"feed-{suffix}", url_window_seconds=args.window,
                            url_ttl_seconds=max(args.window, 3600), max_active_jobs=args.jobs + 1,
                            owner_requests_per_second=1000, owner_burst=1000)
        clients = {n: aws_client(n, settings.region, endpoint) for n in ("sqs", "s3", "dynamodb")}
        provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"])
        use_cases = build_use_cases(settings)
        began = time.perf_counter()
        jobs = make_jobs(use_cases, args.jobs)
        made_in = time.perf_counter() - began
        # A day that starts at an odd moment, as production's do (microseconds too).
        start = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=17)
        session = requests.Session()
        results = {}
        for label, window in (("today", 1), ("after", args.window)):
            began = time.perf_counter()
            results[label] = simulate(use_cases, jobs, window, args.every, args.hours, args.rendition, start, session)
            results[label]["seconds"] = round(time.perf_counter() - began, 1)
    finally:
        stop(moto)
    report = {"jobs": args.jobs, "every_seconds": args.every, "hours": args.hours, "rendition": args.rendition,
              "jobs_made_in_seconds": round(made_in, 1), "loadavg": Path("/proc/loadavg").read_text().split()[:3],
              **results}
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{args.jobs} ready jobs, the feed re-read every {args.every} s for {args.hours} h, "
          f"showing `{args.rendition}` (load {' '.join(report['loadavg'])})")
    print(f"{'':8}{'cache keyed by':16}{'reads':>8}{'misses':>8}{'hit ratio':>11}{'after 1st':>11}{'MB fetched':>12}")
    for label in ("today", "after"):
        for name in ("url", "cache_key"):
            f = results[label][name]
            print(f"{label:8}{name:16}{f['reads']:8d}{f['misses']:8d}{f['hit_ratio']:11.4f}"
                  f"{f['hit_ratio_after_first_download']:11.4f}{f['bytes_downloaded'] / 1e6:12.2f}")
    today, after = results["today"]["url"], results["after"]["url"]
    print(f"URL-keyed: {after['hit_ratio']:.3f} after against {today['hit_ratio']:.3f} today; "
          f"{today['bytes_downloaded'] / max(after['bytes_downloaded'], 1):.1f}x fewer bytes. "
          f"URLs handed out already expired: {results['after']['urls_already_expired']}")
    ok = after["hit_ratio"] >= 0.9 and results["after"]["cache_key"]["hit_ratio_after_first_download"] == 1.0
    print("targets (URL-keyed >= 0.9, cache_key-keyed 1.0 after the first download):", "met" if ok else "MISSED")
    return 0  # a report: the line above says whether the targets held


if __name__ == "__main__":
    sys.exit(main())
