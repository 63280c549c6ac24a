"""Job: one image job as the API shows it, and what can be done with it (poll, cancel, delete...)."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any, Callable, ClassVar, Dict, Optional, Protocol, Tuple, TypedDict, Union

import httpx

from . import errors, polling


class SourceFacts(TypedDict):
    """The original's own facts (`source`; docs/contract.md "The photo's facts")."""

    width: int  # upright, after the EXIF orientation
    height: int
    format: str  # jpeg, png, webp, gif, tiff, heic, heif, avif
    bytes: int
    captured_at: Optional[str]  # RFC 3339; without an offset when the file gave none
    color_space: str  # srgb, display-p3, adobe-rgb, other
    has_alpha: bool


class Focus(TypedDict):
    """The point a ready job's squares are placed around (`focus`; docs/contract.md "The
    focus"): fractions 0..1 of the upright image from its top left."""

    x: float
    y: float
    source: str  # client, faces, saliency, centre


class AnimatedFacts(SourceFacts, total=False):
    """`source`'s animation facts, absent on jobs read before animations."""

    animated: bool  # more than one frame: an animated GIF, WebP or APNG
    frames: int
    duration_ms: Optional[int]  # one play, as browsers play it; None for a still


class Status(str, Enum):
    """The statuses the contract names. A job may show others later: they mean "not finished"."""

    AWAITING_UPLOAD = "awaiting_upload"
    QUEUED = "queued"
    PROCESSING = "processing"
    READY = "ready"
    FAILED = "failed"
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return self.value


# Plain strings: an Enum member hashes by its name, so `"ready" in {Status.READY}` would be False.
TERMINAL = frozenset({Status.READY.value, Status.FAILED.value, Status.CANCELLED.value})

_SUFFIXES = {"image/jpeg": ".jpg", "image/png": ".png", "image/webp": ".webp", "image/avif": ".avif",
             "image/gif": ".gif", "image/tiff": ".tif", "image/heic": ".heic"}


@dataclass(frozen=True)
class JobError:
    code: str
    message: str


@dataclass(frozen=True)
class Variant:
    """One rendition in an extra format (asked with upload(..., formats=...))."""

    content_type: str
    url: str
    bytes: Optional[int]
    cache_key: Optional[str] = None  # names these bytes, whatever the URL (None: an older server)
    width: Optional[int] = None  # the JPEG's
    height: Optional[int] = None


@dataclass(frozen=True)
class Animation:
    """An animated source's rendition as an animated WebP (docs/contract.md "Animations"):
    every frame, sized and cropped as the rendition's still, which is its first frame."""

    url: str
    cache_key: Optional[str]
    content_type: str
    width: Optional[int]
    height: Optional[int]
    frames: Optional[int]
    duration_ms: Optional[int]
    bytes: Optional[int]


@dataclass(frozen=True)
class Rendition:
    name: str
    url: str
    width: Optional[int]
    height: Optional[int]
    content_type: Optional[str]
    variants: Dict[str, Variant] = field(default_factory=dict)  # by content type
    cache_key: Optional[str] = None  # names the JPEG's bytes, whatever the URL
    animation: Optional[Animation] = None  # an animated source's (None: a still, or skipped)


class Api(Protocol):
    """What a Job, and push's Watch, ask of their client: client.Client is the one there is.
    Named here rather than imported: client.py builds Jobs, so this module sits below it."""

    clock: Callable[[], float]
    sleep: Callable[[float], Any]
    random: Callable[[], float]
    max_attempts: int
    hold_seconds: int  # the longest hold a poll may ask for (Prefer: wait)
    waits: bool
    _token_provider: Optional[Callable[[], str]]

    def url(self, target: str) -> str: ...

    def job(self, ref: str) -> "Job": ...

    def request(self, method: str, target: str, *, retry: bool = True,
                body: Optional[Callable[[], Any]] = None, json: Any = None,
                headers: Optional[Dict[str, str]] = None, repeatable: Optional[bool] = None,
                timeout: Optional[float] = None) -> httpx.Response: ...

    def _bearer(self) -> Optional[str]: ...

    def _download(self, url: str, path: Path, cache_key: Optional[str] = None) -> bool: ...

    def _push_hub(self, end: Optional[float] = None) -> Any: ...  # a push.Hub, or None


class Job:
    """A job, known by its Location. Its fields are those of the last answer read.

    Unknown fields are kept in `raw` and otherwise ignored; an unknown status is "not finished".
    """

    # What from_location makes when given no client: client.py sets its Client here, as it
    # builds Jobs itself (so this module cannot import it).
    client_class: ClassVar[Optional[Callable[..., Api]]] = None

    def __init__(self, client: Api, location: str, data: Optional[Dict[str, Any]] = None):
        self._client = client
        self.location = location
        self._data: Dict[str, Any] = dict(data or {})
        self._retry_at: Optional[float] = None  # on the client's clock: no poll before this
        self._etag: Optional[str] = None  # the state the last answer showed
        self._held = False  # the last answer was a held one (Preference-Applied)

    @classmethod
    def from_location(cls, location: str, client: Optional[Api] = None, *,
                      token: Optional[str] = None,
                      token_provider: Optional[Callable[[], str]] = None) -> "Job":
        """Resume a job from its Location (a full URL, or a path with `client`). Fetches nothing."""
        if client is None:
            url = httpx.URL(location)
            if not url.is_absolute_url:
                raise ValueError("a Location path needs a client; give the full URL or a client")
            make = cls.client_class  # set when image_jobs is imported, as it always is first
            assert make is not None
            client = make(f"{url.scheme}://{url.netloc.decode('ascii')}", token, token_provider=token_provider)
        return client.job(location)

    @classmethod
    def _accepted(cls, client: Api, response: httpx.Response) -> "Job":
        """The job of an upload's answer: 202, or 200 with the finished job after a wait."""
        body = _json_object(response)
        location = response.headers.get("location")
        if not location:
            if not isinstance(body.get("job_id"), str):
                raise errors.UnexpectedResponse(f"{response.status_code} without Location or job_id")
            return client.job(body["job_id"])._with(body, response)
        return cls(client, client.url(location))._with(body, response)

    # -- what the last answer said -----------------------------------------------------------
    @property
    def metadata(self) -> Dict[str, str]:
        """The app's own strings, as the upload gave them ({} when it gave none)."""
        value = self._data.get("metadata")
        return dict(value) if isinstance(value, dict) else {}

    @property
    def source(self) -> Optional[AnimatedFacts]:
        """The original's facts once it has been read (None before, and on older jobs)."""
        value = self._data.get("source")
        return AnimatedFacts(**value) if isinstance(value, dict) else None  # type: ignore[typeddict-item]

    @property
    def phash(self) -> Optional[str]:
        """A ready job's perceptual hash (16 hex characters; image_jobs.phash_distance compares)."""
        value = self._data.get("phash")
        return value if isinstance(value, str) else None

    @property
    def focus(self) -> Optional[Focus]:
        """The point a ready job's squares are placed around (None before ready, and on jobs
        made before the focus: their squares are centred). Place your own crops of the
        display rendition by it (docs/api-guide.md)."""
        value = self._data.get("focus")
        return Focus(**value) if isinstance(value, dict) else None  # type: ignore[typeddict-item]

    @property
    def animation_skipped(self) -> Optional[JobError]:
        """Why an animated source's renditions have no animation (code
        animation_too_many_frames, animation_too_many_pixels or animation_too_complex)."""
        value = self._data.get("animation_skipped")
        if not isinstance(value, dict):
            return None
        return JobError(str(value.get("code") or "unknown"), str(value.get("message") or ""))

    @property
    def duplicate_of(self) -> Optional[str]:
        """The earlier job (the same owner's same bytes) whose renditions this one's copy."""
        value = self._data.get("duplicate_of")
        return value if isinstance(value, str) else None

    @property
    def owner(self) -> Optional[str]:
        """The job's owner, in what the service principal reads; None in an owner's reads."""
        value = self._data.get("owner")
        return value if isinstance(value, str) else None

    @property
    def raw(self) -> Dict[str, Any]:
        """The last body as the API sent it (GET's shape after refresh() or wait())."""
        return dict(self._data)

    @property
    def job_id(self) -> str:
        value = self._data.get("job_id")
        return value if isinstance(value, str) else self.location.rstrip("/").rsplit("/", 1)[-1]

    @property
    def status(self) -> Optional[str]:
        """The status string (compare with `Status`), or None before the first read."""
        value = self._data.get("status")
        return value if isinstance(value, str) else None

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    @property
    def ready(self) -> bool:
        return self.status == Status.READY.value

    @property
    def error(self) -> Optional[JobError]:
        value = self._data.get("error")
        if not isinstance(value, dict):
            return None
        return JobError(str(value.get("code") or "unknown"), str(value.get("message") or ""))

    @property
    def renditions(self) -> Dict[str, Rendition]:
        value = self._data.get("renditions")
        found: Dict[str, Rendition] = {}
        if isinstance(value, dict):
            for name, item in value.items():
                if isinstance(item, dict) and isinstance(item.get("url"), str):
                    variants = {kind: Variant(kind, v["url"], _int(v.get("bytes")), _key(v.get("cache_key")),
                                              _int(v.get("width")), _int(v.get("height")))
                                for kind, v in (item.get("variants") or {}).items()
                                if isinstance(v, dict) and isinstance(v.get("url"), str)}
                    found[name] = Rendition(name, item["url"], _int(item.get("width")),
                                            _int(item.get("height")), item.get("content_type"), variants,
                                            _key(item.get("cache_key")), _animation(item.get("animation")))
        for name, field in (("display", "image_url"), ("thumb", "thumb_url")):
            if name not in found and isinstance(self._data.get(field), str):
                found[name] = Rendition(name, self._data[field], None, None, None)
        return found

    @property
    def image_url(self) -> Optional[str]:
        return self._data.get("image_url")

    @property
    def thumb_url(self) -> Optional[str]:
        return self._data.get("thumb_url")

    @property
    def created_at(self) -> Optional[datetime]:
        return _time(self._data.get("created_at"))

    @property
    def finished_at(self) -> Optional[datetime]:
        return _time(self._data.get("finished_at"))

    @property
    def expires_at(self) -> Optional[datetime]:
        return _time(self._data.get("expires_at"))

    @property
    def urls_expire_at(self) -> Optional[datetime]:
        return _time(self._data.get("urls_expire_at"))

    def __repr__(self) -> str:
        return f"<Job {self.job_id} {self.status or 'unread'}>"

    # -- calls -------------------------------------------------------------------------------
    def refresh(self) -> "Job":
        """GET the job once (retrying connection errors and 429/503 within the client's bounds)."""
        return self._with_answer(self._client.request("GET", self.location))

    def cancel(self) -> "Job":
        """Cancel it; raises JobFinished if it is already ready or failed."""
        return self._cancel(repeatable=True)

    def _cancel(self, **sent: Any) -> "Job":
        """The cancel request, sent as `sent` says (a stopped upload's: one short try)."""
        return self._with_answer(self._client.request("POST", self.location + "/cancel", **sent))

    def delete(self) -> None:
        """Delete the job, its original and its renditions; it then shows no status."""
        try:
            self._client.request("DELETE", self.location, retry=False)
        except errors.ImageJobsError as first:
            if not _transient(first):
                raise
            # The lost answer may have been the 204: then the retry finds nothing, which is done.
            wait = polling.retry_wait(1, getattr(first, "retry_after", None), self._client.random)
            self._client.sleep(wait)
            try:
                self._client.request("DELETE", self.location)
            except errors.JobNotFound:
                pass
        # Gone: none of its state is shown any more, so a wait() asks the server (404).
        self._data = {"job_id": self.job_id}
        self._etag, self._retry_at, self._held = None, None, False

    @property
    def placeholder(self) -> Optional[Dict[str, str]]:
        """{"blurhash", "average_color"} of a ready job: paint it before the image arrives."""
        value = self._data.get("placeholder")
        return dict(value) if isinstance(value, dict) else None

    def download(self, directory: Union[str, Path], stem: Optional[str] = None,
                 format: Optional[str] = None, animate: bool = True) -> Dict[str, Path]:
        """Save every rendition as `<stem>.<name><ext>` (stem: the job id) in `directory`.
        `format` ("avif", "webp" or a content type): that variant of each rendition, where
        the job has it (asked at upload), else its JPEG. With "webp", an animated source's
        renditions are their animations (`<stem>.<name>.animated.webp`) unless `animate` is
        False. With the client's `cache_dir`, a
        rendition whose `cache_key` is there already is copied from it, never downloaded
        again (its URL may have changed: the key has not)."""
        if not self.ready:
            self.refresh()
            if not self.ready:
                raise errors.JobNotReady(self)
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        saved: Dict[str, Path] = {}
        kind = None if format is None else (format if "/" in format else f"image/{format.lower()}")
        for name in list(self.renditions):
            url, suffix, key = _pick(self.renditions[name], kind, animate)
            path = folder / f"{stem or self.job_id}.{name}{suffix}"
            if not self._client._download(url, path, key):
                # URLs are presigned when the job is read; these had expired. Read fresh ones.
                self.refresh()
                fresh = self.renditions.get(name)
                if fresh is None or not self._client._download(_pick(fresh, kind, animate)[0], path, key):
                    raise errors.StorageError(403, "AccessDenied", f"storage refused the {name} URL")
            saved[name] = path
        return saved

    def wait(self, deadline: Optional[float] = None,
             on_status: Optional[Callable[["Job"], Any]] = None, *,
             stop: Optional[threading.Event] = None, push: bool = False) -> "Job":
        """Poll until the job is ready, failed or cancelled, and return it.

        `push`: learn the changes from the client's one push socket instead (shared by every
        wait of the client, docs/contract.md "Push"), one GET once it is open; where the
        service has no push, or the socket is lost for good, the wait goes on by polling.

        With the client's `waits` (the default), every poll asks the server to hold it until
        the job changes (`Prefer: wait`, naming the last state seen in `If-None-Match`), so
        the answer comes when the result exists. The first such poll goes at once; while the
        server says it held (`Preference-Applied`), the next one does too. Otherwise the
        schedule is the contract's: the first poll after the last Retry-After, then waits of
        3, 5, 8 and then 15 s, each ±20 % jitter and never shorter than the server's
        Retry-After. `deadline`: seconds from now; when the next poll would come later,
        WaitTimeout is raised at once (a held poll asks for no more than the time left).
        Setting `stop` raises WaitCancelled (after the poll in flight: with `stop`, a held
        poll lasts at most STOPPABLE_HOLD_SECONDS, then asks again). A 401, 403, 404 or
        410 raises its typed error. Connection errors, 429 and 5xx answers count as "not
        finished" until `max_attempts` of them come in a row. `on_status(job)` is called
        whenever a poll shows a status other than the previous poll's.
        """
        if self.finished:
            return self
        c = self._client
        end = None if deadline is None else c.clock() + deadline
        # No push for a deadline already over: the wait ends as a poll's would, at once.
        hub = c._push_hub(end) if push and (end is None or end > c.clock()) else None
        if hub is not None:
            try:
                return hub.wait(self, end, stop, on_status, c.clock)
            except errors.PushUnavailable:
                pass  # polled from here on, as if push had never been asked for
        return self._poll_until(lambda: self.finished, end, stop, on_status)

    def _await_arrival(self, seconds: float, stop: Optional[threading.Event] = None) -> "Job":
        """After the last byte of a single PUT (or form) is stored: polls, held, until storage's
        notification has moved the job past `awaiting_upload`, for at most `seconds` (or until
        `stop`); the job as it is then. The file is stored whatever a poll answers, so no error
        of these polls is raised: the upload is done."""
        if self.status != Status.AWAITING_UPLOAD.value:
            return self
        c = self._client
        try:
            self._poll_until(lambda: self.status != Status.AWAITING_UPLOAD.value, c.clock() + seconds, stop)
        except errors.ImageJobsError:
            pass
        return self

    def _poll_until(self, done: Callable[[], bool], end: Optional[float],
                    stop: Optional[threading.Event] = None,
                    on_status: Optional[Callable[["Job"], Any]] = None) -> "Job":
        """wait()'s polls, until `done()` holds after one: held where the server holds them,
        else on the contract's schedule; `end` on the client's clock."""
        c = self._client
        if c.waits:
            delay = 0.0  # a held poll: the server waits, not us
        else:
            delay = max(0.0, self._retry_at - c.clock()) if self._retry_at is not None else 0.0
        polls = failures = 0
        seen: Optional[str] = None
        while True:
            if stop is not None and stop.is_set():
                raise errors.WaitCancelled(self, "the caller stopped waiting")
            if end is not None and c.clock() + delay > end:
                raise errors.WaitTimeout(self, "the deadline comes before the next poll")
            if delay > 0:
                _pause(c, delay, stop)
                if stop is not None and stop.is_set():
                    raise errors.WaitCancelled(self, "the caller stopped waiting")
            polls += 1
            server_wait: Optional[float] = None
            asked = c.clock()
            try:
                self._with_answer(c.request("GET", self.location, retry=False,
                                            headers=self._wait_headers(end, stop is not None)))
            except errors.ImageJobsError as exc:
                if not _transient(exc):
                    raise
                failures += 1
                if failures >= c.max_attempts:
                    raise
                server_wait = getattr(exc, "retry_after", None)
            else:
                failures = 0
                if self._retry_at is not None:
                    server_wait = max(0.0, self._retry_at - c.clock())
                if on_status is not None and self.status != seen:
                    on_status(self)
                changed = self.status != seen
                seen = self.status
                if done():
                    return self
                # Held: ask again at once. A held answer that came back at once unchanged
                # (the server's time ran short) falls back to the schedule, never a tight loop.
                if self._held and (changed or c.clock() - asked >= polling.MIN_HELD_SECONDS):
                    delay = 0.0
                    continue
            delay = polling.poll_wait(polls, server_wait, c.random)

    def _wait_headers(self, end: Optional[float], stoppable: bool = False) -> Dict[str, str]:
        """Prefer: wait for as long as the deadline and the client's read timeout allow (and
        briefly when the caller may stop the wait: a held request cannot be interrupted)."""
        c = self._client
        seconds = min(c.hold_seconds, polling.STOPPABLE_HOLD_SECONDS) if stoppable else c.hold_seconds
        if end is not None:
            seconds = min(seconds, int(end - c.clock()))
        if not c.waits or seconds < 1:
            return {}
        headers = {"Prefer": f"wait={seconds}"}
        if self._etag:
            headers["If-None-Match"] = self._etag
        return headers

    # -- internals ---------------------------------------------------------------------------
    def _with(self, body: Dict[str, Any], response: httpx.Response) -> "Job":
        self._data = body
        seconds = polling.retry_after(response.headers)
        self._retry_at = None if seconds is None else self._client.clock() + seconds
        self._etag = response.headers.get("etag")
        self._held = "preference-applied" in response.headers
        return self

    def _from_push(self, body: Dict[str, Any], etag: Optional[str]) -> "Job":
        """A push message's state: the body GET would answer, with its ETag."""
        self._data = body
        self._etag = etag
        self._retry_at = None
        self._held = False
        return self

    def _with_answer(self, response: httpx.Response) -> "Job":
        return self._with(_json_object(response), response)


def _pause(client: Api, seconds: float, stop: Optional[threading.Event]) -> None:
    # A stop event wakes a real sleep at once; an injected sleep (a test's clock) is used as is.
    if stop is not None and client.sleep is time.sleep:
        stop.wait(seconds)
    else:
        client.sleep(seconds)


def _transient(exc: Exception) -> bool:
    """Worth another poll: no answer, 429 or 5xx. Any other error stops polling, the contract's
    401, 403, 404 and 410 among them (the rest, such as 400, would only repeat)."""
    if isinstance(exc, errors.ConnectionFailed):
        return True
    return isinstance(exc, errors.ApiError) and (exc.status == 429 or exc.status >= 500)


def _json_object(response: httpx.Response) -> Dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        raise errors.UnexpectedResponse(f"{response.status_code} with a body that is not JSON") from None
    if not isinstance(body, dict):
        raise errors.UnexpectedResponse(f"{response.status_code} with a body that is not an object")
    return body


def _time(value: Any) -> Optional[datetime]:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _pick(rendition: Rendition, kind: Optional[str], animate: bool = True) -> Tuple[str, str, Optional[str]]:
    """(url, file suffix, cache key) of the animation where the content type asked is its
    (and `animate`), else of the variant of that content type, else of the JPEG."""
    animation = rendition.animation
    if animate and animation is not None and kind == animation.content_type:
        return animation.url, ".animated.webp", animation.cache_key
    variant = rendition.variants.get(kind) if kind else None
    if variant is not None:
        return variant.url, _SUFFIXES.get(variant.content_type, ".bin"), variant.cache_key
    return rendition.url, _suffix(rendition), rendition.cache_key


def _animation(value: Any) -> Optional[Animation]:
    if not isinstance(value, dict) or not isinstance(value.get("url"), str):
        return None
    return Animation(value["url"], _key(value.get("cache_key")), str(value.get("content_type") or "image/webp"),
                     _int(value.get("width")), _int(value.get("height")), _int(value.get("frames")),
                     _int(value.get("duration_ms")), _int(value.get("bytes")))


def _key(value: Any) -> Optional[str]:
    """A cache key as the server sends it (letters and digits); anything else is none."""
    return value if isinstance(value, str) and value.isalnum() else None


def _suffix(rendition: Rendition) -> str:
    if rendition.content_type in _SUFFIXES:
        return _SUFFIXES[rendition.content_type]
    tail = httpx.URL(rendition.url).path.rsplit("/", 1)[-1]
    return "." + tail.rsplit(".", 1)[-1] if "." in tail else ".bin"
