"""Push: one WebSocket for every status change of the owner's jobs (docs/contract.md "Push").

`Watch` is the socket: it finds the URL at GET /api/v1/push, connects with the token as the
`bearer.<token>` subprotocol, reconnects after a drop (exponential backoff, jittered), and
after every connect re-reads by GET the unfinished jobs it knows, since messages sent while
it was away are lost. It drops a state older than one it has. `Hub` runs one Watch in a
thread for many waits at once (Job.wait(push=True), the CLI's --wait).
"""
from __future__ import annotations

import json
import threading
import time
from typing import Callable, Dict, Iterable, Iterator, Optional, Union

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.sync.client import ClientConnection, connect

from . import errors, polling
from .job import TERMINAL, Api, Job

PUSH_PROTOCOL = "image-jobs.v1"
BEARER_PREFIX = "bearer."
OPEN_TIMEOUT = 10.0
# A blocked receive wakes this often to look at the caller's stop event and deadline.
RECV_SLICE = 0.25
# An unfinished job with no news for this long is read by GET: a message may be lost without
# the socket dropping (the service sheds fan-out under load), and a push client should never
# learn later than one polling on the contract's schedule, whose longest wait this is.
QUIET_SECONDS = 15.0
# A job's status never moves back along this order (a re-claim stays `processing` and raises
# the attempt): a GET answer, which has no sequence, still orders against the messages.
_STEP = {"awaiting_upload": 0, "queued": 1, "processing": 2, "ready": 3, "failed": 3, "cancelled": 3}


def _step(status: object) -> Optional[int]:
    return _STEP.get(status) if isinstance(status, str) else None


class Watch:
    """Updates of `jobs` (Job objects or ids), or of all the owner's jobs when None, as Job
    objects: iterate it. Each job is one object, updated in place and yielded whenever it
    shows a newer state; one without news for QUIET_SECONDS is read by GET. With jobs named, the iteration ends once all are finished; with
    None it runs until close(). `deadline` (seconds) and `stop` end it early too.
    PushUnavailable when the service has no push, or `client.max_attempts` connects in a
    row fail; Unauthorized when the token is refused.
    """

    def __init__(self, client: Api, jobs: Optional[Iterable[Union[Job, str]]] = None, *,
                 deadline: Optional[float] = None, stop: Optional[threading.Event] = None,
                 on_connect: Optional[Callable[[], None]] = None):
        self._client = client
        self._all = jobs is None
        self._jobs: Dict[str, Job] = {}
        self._sequence: Dict[str, int] = {}
        self._lock = threading.Lock()
        self._end = None if deadline is None else client.clock() + deadline
        self._stop = stop or threading.Event()
        self._on_connect = on_connect
        self._socket: Optional[ClientConnection] = None
        self._news: Dict[str, float] = {}  # job id -> when, on the client's clock, it last changed
        self.connects = 0  # sockets opened so far
        self.received = 0  # messages about the jobs watched
        self.dropped = 0  # of those, dropped as older than, or the same as, the state held
        for job in jobs or ():
            self.add(job)

    def add(self, job: Union[Job, str]) -> Job:
        """Watch one more job (from any thread): this object is updated from now on, given
        the newer state if the watch already held one for its id."""
        job = self._client.job(job) if isinstance(job, str) else job
        with self._lock:
            known = self._jobs.get(job.job_id)
            if known is not None and known is not job and known.status is not None and (
                    job.status is None or self._newer(job, None, known.status, known._etag)):
                job._from_push(known.raw, known._etag)
            self._jobs[job.job_id] = job
        return job

    def close(self) -> None:
        """End the iteration (from any thread) and the socket."""
        self._stop.set()
        socket = self._socket
        if socket is not None:
            socket.close()

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Job]:
        failures = 0
        try:
            while not self._over():
                try:
                    self._socket = self._open()
                except errors.ConnectionFailed as exc:
                    failures += 1
                    if failures >= self._client.max_attempts:
                        raise errors.PushUnavailable(f"the push socket did not open: {exc}") from exc
                    self._pause(polling.reconnect_wait(failures, self._client.random))
                    continue
                failures = 0
                self.connects += 1
                if self._on_connect is not None:
                    self._on_connect()
                try:
                    yield from self._reread()
                    yield from self._receive(self._socket)
                except ConnectionClosed:
                    pass  # dropped: connect again, then re-read what may have been missed
                finally:
                    self._socket.close()
                if not self._over():
                    self._pause(polling.reconnect_wait(0, self._client.random))
        finally:
            if self._socket is not None:
                self._socket.close()

    # -- one connection ------------------------------------------------------------------
    def _open(self) -> ClientConnection:
        c = self._client
        try:
            found = c.request("GET", "/api/v1/push", retry=False).json()  # our loop retries
        except errors.ApiError as exc:
            if exc.status in (401, 403):
                raise
            if exc.status >= 500 or exc.status == 429:
                raise errors.ConnectionFailed(f"GET /push: {exc}") from exc
            raise errors.PushUnavailable(f"GET /push answered {exc.status}") from exc
        url = found.get("url") if isinstance(found, dict) else None
        if not isinstance(url, str) or not url:
            raise errors.PushUnavailable("the service has no push on this stage")
        for _ in range(2):  # a second try only with a fresher token from the provider
            token = c._bearer() or ""
            try:
                # Entered by hand: the socket outlives this call (websockets 17 warns otherwise).
                return connect(url, subprotocols=[PUSH_PROTOCOL, BEARER_PREFIX + token],
                               open_timeout=OPEN_TIMEOUT, close_timeout=1).__enter__()
            except InvalidStatus as exc:
                status = exc.response.status_code
                if status == 401:
                    if c._token_provider is not None and c._token_provider() != token:
                        continue
                    raise errors.error_for(401, None) from exc
                raise errors.ConnectionFailed(f"push connect answered {status}") from exc
            except InvalidURI as exc:
                raise errors.PushUnavailable(f"push URL {url!r}: {exc}") from exc
            except (OSError, TimeoutError, InvalidHandshake) as exc:
                raise errors.ConnectionFailed(f"push connect: {exc!r}") from exc
        raise errors.error_for(401, None)

    def _reread(self, quiet: Optional[float] = None) -> Iterator[Job]:
        """GET every unfinished job known (with `quiet`, those without news for that long):
        its changes while no socket was open are lost."""
        now = self._client.clock()
        with self._lock:
            todo = [job for job in self._jobs.values() if not job.finished and (
                quiet is None or now - self._news.setdefault(job.job_id, now) >= quiet)]
        for job in todo:
            self._news[job.job_id] = now
            before = job._etag
            try:
                job.refresh()
            except (errors.JobNotFound, errors.JobExpired):
                with self._lock:
                    self._jobs.pop(job.job_id, None)  # deleted: nothing more will come
                continue
            if job._etag != before:
                yield job

    def _receive(self, socket: ClientConnection) -> Iterator[Job]:
        while not self._over():
            try:
                frame = socket.recv(timeout=RECV_SLICE)
            except TimeoutError:
                yield from self._reread(QUIET_SECONDS)
                continue
            job = self._take(frame)
            if job is not None:
                yield job

    def _take(self, frame: Union[str, bytes]) -> Optional[Job]:
        """The job a message updates, or None (not watched, unknown type, or older)."""
        try:
            message = json.loads(frame)
        except ValueError:
            return None
        if not isinstance(message, dict) or message.get("type") != "job":
            return None  # clients ignore a type they do not know
        body, sequence, etag = message.get("job"), message.get("sequence"), message.get("etag")
        if not isinstance(body, dict) or not isinstance(body.get("job_id"), str):
            return None
        job_id = body["job_id"]
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                if not self._all:
                    return None
                job = self._jobs[job_id] = self._client.job(job_id)
            self.received += 1
            if not self._newer(job, sequence, body.get("status"), etag):
                self.dropped += 1
                return None
            if isinstance(sequence, int):
                self._sequence[job_id] = sequence
            self._news[job_id] = self._client.clock()
            job._from_push(body, etag if isinstance(etag, str) else None)
        return job

    def _newer(self, job: Job, sequence: object, status: object, etag: object) -> bool:
        if etag is not None and etag == job._etag:
            return False  # the state held (a GET may have read it first): at least once
        if isinstance(sequence, int) and sequence <= self._sequence.get(job.job_id, -1):
            return False
        new, held = _step(status), _step(job.status)
        return new is None or held is None or (new >= held and not job.finished)

    # -- when to stop ----------------------------------------------------------------------
    def _over(self) -> bool:
        if self._stop.is_set():
            return True
        if self._end is not None and self._client.clock() >= self._end:
            return True
        if self._all:
            return False
        with self._lock:
            return all(job.finished for job in self._jobs.values())

    def _pause(self, seconds: float) -> None:
        if self._client.sleep is time.sleep:
            self._stop.wait(seconds)  # close() wakes it at once
        else:
            self._client.sleep(seconds)


class Hub:
    """One Watch of all the owner's jobs in a thread, shared by many waits."""

    def __init__(self, client: Api):
        self._changed = threading.Condition()
        self._connected = threading.Event()
        self.failure: Optional[BaseException] = None
        self.watch = Watch(client, None, on_connect=self._connected.set)
        threading.Thread(target=self._run, name="image-jobs-push", daemon=True).start()

    def ready(self, timeout: float) -> bool:
        """True once the socket is open; False when it failed or did not open in time."""
        self._connected.wait(timeout)
        return self._connected.is_set() and self.failure is None

    def close(self) -> None:
        self.watch.close()

    def _run(self) -> None:
        try:
            for _ in self.watch:
                with self._changed:
                    self._changed.notify_all()
        except BaseException as exc:  # the waits fall back to polling
            self.failure = exc
        finally:
            if self.failure is None:
                self.failure = errors.PushUnavailable("the push socket was closed")
            self._connected.set()
            with self._changed:
                self._changed.notify_all()

    def wait(self, job: Job, end: Optional[float], stop: Optional[threading.Event],
             on_status: Optional[Callable[[Job], object]], clock: Callable[[], float]) -> Job:
        """Until `job` is finished: WaitTimeout at `end`, WaitCancelled on `stop`,
        PushUnavailable when the socket is gone for good (the caller then polls)."""
        job = self.watch.add(job)
        # Read after subscribing: a change before the socket knew of the job is not missed.
        job.refresh()
        seen = None
        while True:
            if job.status != seen:
                seen = job.status
                if on_status is not None:
                    on_status(job)
            if job.finished:
                return job
            if stop is not None and stop.is_set():
                raise errors.WaitCancelled(job, "the caller stopped waiting")
            if end is not None and clock() >= end:
                raise errors.WaitTimeout(job, "the deadline came first")
            if self.failure is not None:
                raise errors.PushUnavailable(str(self.failure)) from self.failure
            with self._changed:
                if job.status == seen and self.failure is None:
                    self._changed.wait(RECV_SLICE)
