"""How apps get a rendition: the URL window and the cache key. No I/O.

Phone image caches (Kingfisher, Nuke, SDWebImage, Coil, Glide, expo-image) key by the full
URL unless the app gives a key: a URL signed anew on every read is a miss every time. So a
rendition's URL is signed at the start of the window the read falls in (one URL per window),
and every rendition and variant carries a cache key that names its bytes whatever the URL.
No URL outlives its job: the last windows' URLs end at the job's expires_at.
"""
from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class UrlWindow:
    """Windows of `seconds`, counted from the Unix epoch so that every process (and every
    container) agrees on them. A URL is signed at its window's start and lives
    `seconds + ttl_seconds` from there: one handed out at the window's last instant still has
    ttl_seconds (at least one more window; config.py checks ttl_seconds >= seconds)."""

    seconds: int
    ttl_seconds: int

    def signed_at(self, now: datetime) -> datetime:
        elapsed = int((now - _EPOCH).total_seconds())
        return _EPOCH + timedelta(seconds=elapsed - elapsed % self.seconds)

    @property
    def expires_in(self) -> int:
        """What the signature says, counted from signed_at."""
        return self.seconds + self.ttl_seconds

    def expires_at(self, now: datetime) -> datetime:
        return self.signed_at(now) + timedelta(seconds=self.expires_in)

    def lifetime(self, now: datetime, end: datetime) -> tuple[datetime, int]:
        """(signed_at, seconds) of a URL handed out at `now` for an object that lives until
        `end` (its job's expires_at): the window's, cut at `end` so that no URL outlives
        the object's job. Whole seconds (what a signature holds), never past `end`; the same
        for every read in a window, since `end` is the job's. Read in `end`'s last second,
        the URL may have ended already: it still ends at `end`'s whole second."""
        signed_at = self.signed_at(now)
        seconds = min(self.expires_in, int((end - signed_at).total_seconds()))
        if seconds < 1:  # `end` falls in the window's first second: a signature lasts one at least
            return signed_at - timedelta(seconds=1), 1
        return signed_at, seconds


def cache_key(object_key: str) -> str:
    """A short opaque name of the bytes under object_key. Rendition keys are written once
    (fenced per attempt: chalicelib/domain/objectkeys.py), so the key names exact bytes and a
    new attempt names new ones; no job id or path shows through."""
    digest = hashlib.sha256(object_key.encode()).digest()[:15]
    return base64.b32encode(digest).decode().lower()


# An original is read by the worker alone: no shared cache (a CDN, a proxy) may keep one.
ORIGINAL_CACHE_CONTROL = "private, no-store"


def rendition_cache_control(retention_seconds: int) -> str:
    """A rendition's bytes never change under its key (a new attempt writes new keys), and the
    object lives for the job's retention: any cache may keep it that long, unrevalidated."""
    return f"public, max-age={retention_seconds}, immutable"
