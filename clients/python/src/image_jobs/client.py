"""Client: the API's HTTP calls, their bounded retries, and the two upload routes."""
from __future__ import annotations

import base64
import json as json_module
import os
import shutil
import threading
import random as _random
import time
import warnings
import uuid
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union
from urllib.parse import quote, urlencode

import httpx

from . import errors, polling
from ._version import __version__
from .job import Job, Status
from .prepared import PreparedUpload
from .push import OPEN_TIMEOUT, Hub, Watch
from .sniff import OCTET_STREAM, guess_type
from .source import CHUNK, RangeReader, Source, UploadFile
from .upload_state import UploadState

DEFAULT_URL = "http://127.0.0.1:8000"
API_ROOT = "/api/v1"
# The app's backend (docs/contract.md "The service principal"): a token with this OAuth scope
# reads, lists and deletes any owner's jobs, on the /service/ routes only.
SERVICE_SCOPE = "image-jobs/service"
# The server's default MAX_UPLOAD_BYTES, its limit on POST /images (Lambda's payload limit);
# larger files go direct, by one presigned PUT, and from the server's MULTIPART_MIN_BYTES in parts.
DEFAULT_MAX_UPLOAD_BYTES = 4 * 1024 * 1024
DEFAULT_DIRECT_THRESHOLD = DEFAULT_MAX_UPLOAD_BYTES  # its name in 0.1.0, for one release
DEFAULT_MULTIPART_THRESHOLD = 16 * 1024 * 1024
# Parts sent at once.
PART_CONCURRENCY = 4
# docs/contract.md, "Which answers a client retries": 429 and 503 say the service did not act,
# so any request is tried again; 502/504 (from gateways in front of us) and a lost connection
# leave it unknown, so only a request that is safe to repeat is.
RETRY_ALWAYS = frozenset({429, 503})
RETRY_IF_REPEATABLE = frozenset({502, 504})
RETRY_STATUSES = RETRY_ALWAYS | RETRY_IF_REPEATABLE
REPEATABLE_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
# Transport failures worth a retry; a malformed URL or an unsupported scheme is not one.
RETRY_TRANSPORT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
Progress = Callable[[int, int], None]  # (bytes sent so far, total); a retry starts again from 0
PartProgress = Callable[[int, int, int], None]  # (part number, its bytes sent so far, its size)


class Client:
    """One API endpoint and one owner's token.

    `token` is a bearer token; `token_provider` a callable asked for one before each request
    (and once more after a 401), for tokens that expire. `max_upload_bytes`: the server's
    limit on POST /images (its MAX_UPLOAD_BYTES); larger files go straight to storage.
    `max_attempts`: tries of one request, and failed polls in a row, before giving up; a
    Retry-After longer than `max_retry_wait` seconds is not waited out but raised. `http`: your
    own httpx.Client (proxies, TLS; you close it), else one with `timeout`.
    `waits`: polls ask the server to hold them until the job changes (Prefer: wait), for as
    long as `timeout` allows; False polls on the contract's schedule only.
    `service`: the token is the service principal's (the app's backend, docs/contract.md "The
    service principal"), whose jobs are read, listed and deleted on the /service/ routes; by
    default the client reads it from the token: a JWT whose `scope` claim names
    `image-jobs/service` (read, not verified: the server checks the token).
    `resume_dir`: a directory where upload() of a path keeps its Idempotency-Key and, once
    cut, its job's Location (upload_state.py; the CLI's is upload_state.directory()), so the
    same call after a crash or a stop resumes: only what storage lacks is sent.
    `clock`, `sleep` and `random` are injectable so tests can run the schedule on a fake clock.
    """

    def __init__(self, base_url: str = DEFAULT_URL, token: Optional[str] = None, *,
                 token_provider: Optional[Callable[[], str]] = None,
                 max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
                 multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD, max_attempts: int = 5,
                 max_retry_wait: float = 120.0, timeout: float = 30.0,
                 http: Optional[httpx.Client] = None, waits: bool = True,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Any] = time.sleep,
                 random: Callable[[], float] = _random.random,
                 cache_dir: Optional[Union[str, Path]] = None,
                 direct_threshold: Optional[int] = None, service: Optional[bool] = None,
                 resume_dir: Optional[Union[str, Path]] = None):
        if direct_threshold is not None:  # its name in 0.1.0: read for one release
            warnings.warn("direct_threshold is max_upload_bytes now", DeprecationWarning, stacklevel=2)
            max_upload_bytes = direct_threshold
        if token is not None and token_provider is not None:
            raise ValueError("give token or token_provider, not both")
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._token_provider = token_provider
        self._service = service
        self.max_upload_bytes = max_upload_bytes
        self.resume_dir = None if resume_dir is None else Path(resume_dir)
        self.multipart_threshold = multipart_threshold
        self.bytes_to_storage = 0  # bytes of files (and parts) sent to storage: what a resume saves
        self.max_attempts = max(1, max_attempts)
        self.max_retry_wait = max_retry_wait
        self.clock, self.sleep, self.random = clock, sleep, random
        self.waits = waits
        # Renditions downloaded, by cache_key: one is never downloaded twice, whatever its URL.
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.downloads = 0  # renditions fetched from storage (not from cache_dir)
        self._owns_http = http is None
        self._http = http if http is not None else httpx.Client(
            timeout=timeout, headers={"User-Agent": f"image-jobs-client/{__version__}"})
        self._hub: Optional[Hub] = None
        self._hub_lock = threading.Lock()
        read = self._http.timeout.read
        # A held answer must arrive within the read timeout, with time to spare.
        self.hold_seconds = polling.MAX_HOLD_SECONDS if read is None else max(0, min(
            polling.MAX_HOLD_SECONDS, int(read) - 2))

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        if self._hub is not None:
            self._hub.close()
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    @property
    def service(self) -> bool:
        """Whether this client is the service principal's (given, or read from its token once)."""
        if self._service is None:
            self._service = is_service_token(self._bearer())
        return self._service

    # -- jobs --------------------------------------------------------------------------------
    def url(self, target: str) -> str:
        """An absolute URL for a path such as a Location header, or the URL itself."""
        return str(httpx.URL(self.base_url + "/").join(target))

    def job(self, ref: str) -> Job:
        """The job named by its id, its Location path or its full URL; nothing is fetched yet.
        A service client reads it on the service's route, whichever route the reference names."""
        jobs = f"{API_ROOT}/service/image-jobs" if self.service else f"{API_ROOT}/image-jobs"
        if "://" not in ref and not ref.startswith("/"):
            return Job(self, self.url(f"{jobs}/{quote(ref, safe='')}"))
        url = httpx.URL(self.url(ref))
        owners = f"{API_ROOT}/image-jobs/"
        if self.service and url.path.startswith(owners) and "/" not in url.path[len(owners):]:
            url = url.copy_with(path=f"{jobs}/{url.path[len(owners):]}")  # a Location an owner was given
        return Job(self, str(url))

    def jobs(self, *, status: Union[str, Sequence[str], None] = None, owner: Optional[str] = None,
             created_after: Optional[str] = None, created_before: Optional[str] = None,
             page_size: Optional[int] = None) -> Iterator[Job]:
        """Every job of the caller, newest first, page after page (GET /image-jobs), each as GET
        shows it: `for job in client.jobs(status="ready"): ...`. `status`: one or several.
        `owner`: with the service principal's token, that owner's jobs (GET /service/image-jobs),
        each with `job.owner`; a service client must name one (ValueError without: the service
        lists one owner at a time, and its webhook tells of every job).
        `created_after`/`created_before`: RFC 3339 times, exclusive."""
        if owner is None and self.service:
            raise ValueError("a service client lists one owner's jobs: jobs(owner=...); "
                             "the service webhook tells of every owner's jobs")
        statuses = [status] if isinstance(status, str) else list(status or ())
        params: List[Tuple[str, str]] = [("status", s) for s in statuses]
        for name, value in (("owner", owner), ("created_after", created_after),
                            ("created_before", created_before), ("page_size", page_size)):
            if value is not None:
                params.append((name, str(value)))
        path = f"{API_ROOT}/service/image-jobs" if owner is not None else f"{API_ROOT}/image-jobs"
        token: Optional[str] = None
        while True:
            query = params + ([("page_token", token)] if token else [])
            body = self.request("GET", path + ("?" + urlencode(query) if query else "")).json()
            for data in body.get("jobs", []):
                # The service's jobs are read again (refresh, wait) on its own route.
                location = f"{path}/{quote(data['job_id'], safe='')}"
                yield Job(self, self.url(location), data)
            token = body.get("next_page_token")
            if not token:
                return

    # -- the owner's webhook (docs/contract.md "Notifications") --------------------------------
    def set_webhook(self, url: str) -> Dict[str, Any]:
        """Register (or change) the owner's one webhook, told when a job of theirs is finished.
        Its `secret` (whsec_...) is in the answer only when it is new: keep it to verify."""
        return self.request("PUT", f"{API_ROOT}/webhook", json={"url": url}).json()

    def webhook(self) -> Dict[str, Any]:
        """The owner's webhook: url, breaker and last 20 delivery attempts (`deliveries`, newest
        first); {"url": None} when there is none."""
        return self.request("GET", f"{API_ROOT}/webhook").json()

    def test_webhook(self) -> Dict[str, Any]:
        """Send a signed `webhook.test` event to it now: the attempt, with the receiver's
        `status_code` or the `reason` it never answered. 3 in a row, then one per 20 s
        (RateLimited); WebhookNotFound when none is registered."""
        return self.request("POST", f"{API_ROOT}/webhook/test", retry=False).json()

    def delete_webhook(self) -> None:
        self.request("DELETE", f"{API_ROOT}/webhook")

    def rotate_webhook_secret(self) -> Dict[str, Any]:
        """A new secret (the old one still signs for 24 hours), in the answer."""
        return self.request("POST", f"{API_ROOT}/webhook/rotate-secret").json()

    # -- the service webhook (the service principal's token) ----------------------------------
    def set_service_webhook(self, url: str, events: Optional[Sequence[str]] = None) -> Dict[str, Any]:
        """Register (or change) the one webhook for every owner's jobs; `events`: the statuses
        sent (default the terminal ones). Its `secret` is in the answer only when it is new."""
        body: Dict[str, Any] = {"url": url}
        if events is not None:
            body["events"] = list(events)
        return self.request("PUT", f"{API_ROOT}/service/webhook", json=body).json()

    def service_webhook(self) -> Dict[str, Any]:
        """The service webhook's url, events, breaker and last 20 delivery attempts
        (`deliveries`, newest first); {"url": None} when there is none."""
        return self.request("GET", f"{API_ROOT}/service/webhook").json()

    def test_service_webhook(self) -> Dict[str, Any]:
        """Send a signed `webhook.test` event to it now: the attempt, with the receiver's
        `status_code` or the `reason` it never answered. 3 in a row, then one per 20 s
        (RateLimited); WebhookNotFound when none is registered."""
        return self.request("POST", f"{API_ROOT}/service/webhook/test", retry=False).json()

    def delete_service_webhook(self) -> None:
        self.request("DELETE", f"{API_ROOT}/service/webhook")

    def rotate_service_webhook_secret(self) -> Dict[str, Any]:
        """A new secret (the old one still signs for 24 hours), in the answer."""
        return self.request("POST", f"{API_ROOT}/service/webhook/rotate-secret").json()

    def watch(self, jobs: Optional[Sequence[Union[Job, str]]] = None, *,
              deadline: Optional[float] = None, stop: Optional[threading.Event] = None) -> Watch:
        """The updates of `jobs` (Job objects or ids; None: every job of the owner) over one
        WebSocket, as Job objects updated in place: `for job in client.watch(jobs): ...`.
        Reconnects after a drop and re-reads the unfinished jobs by GET, so no change is
        missed; a state older than one already yielded is dropped. With jobs named, it ends
        when all are finished. PushUnavailable where the service has no push."""
        return Watch(self, jobs, deadline=deadline, stop=stop)

    def _push_hub(self, end: Optional[float] = None) -> Optional[Hub]:
        """The client's one push socket for Job.wait(push=True), opened on first use;
        None where it cannot be, or not before `end` on the client's clock (the waits then poll).
        The service principal has none (its token is refused at connect): its waits poll."""
        if self.service:
            return None
        with self._hub_lock:
            if self._hub is None:
                self._hub = Hub(self)
            hub = self._hub
        # A hub that failed stays failed: this client polls from then on.
        timeout = OPEN_TIMEOUT * self.max_attempts
        if end is not None:
            timeout = max(0.0, min(timeout, end - self.clock()))
        return hub if hub.ready(timeout) else None

    def upload(self, source: Source, *, content_type: Optional[str] = None,
               idempotency_key: Optional[str] = None, filename: Optional[str] = None,
               on_progress: Optional[Progress] = None, wait: float = 0,
               on_part_progress: Optional[PartProgress] = None,
               formats: Sequence[str] = (), stop: Optional[threading.Event] = None,
               metadata: Optional[Dict[str, str]] = None, keep_stopped: bool = False,
               renditions: Optional[Sequence[str]] = None,
               focus: Optional[Tuple[float, float]] = None) -> Job:
        """Upload one image and return its job: `queued` (or further along) once its file is
        stored. After a single PUT the job leaves `awaiting_upload` when storage's notification
        arrives: the upload waits for that, held, for at most polling.ARRIVAL_SECONDS (it reads
        `awaiting_upload` only if the notification is later still).

        Files up to `max_upload_bytes` bytes go through POST /images; larger ones straight to
        storage by one presigned PUT, and from `multipart_threshold` in parts, sent in
        parallel (`on_part_progress` per part). One Idempotency-Key covers the whole logical
        upload and every retry of it; pass your own to resume an upload after a restart, or
        call resume(error.job, source) after a failure half-way.
        `wait`: seconds the upload's answer may be held for the job to finish (Prefer: wait
        on POST /images, a held poll after a direct upload): a fast job comes back finished
        in the same call. Never raises for a job that is still running then.
        `source`: a path (read in chunks as it is sent, never whole in memory), bytes, or a
        binary file object (read once). `on_progress(sent, total)`: the bytes handed to the
        connection so far, after every chunk (64 KiB), on every route; a resumed multipart
        upload's first event counts the parts storage already holds.
        `formats`: extra formats of every rendition besides its JPEG ("avif", "webp"), as the
        server enables them; download(format=...) saves them.
        `renditions`: the sizes to make besides display and thumb (docs/contract.md "Sizes for
        every screen", such as "thumb_512"); None for the server's default set.
        `focus`: (x, y), fractions 0..1 of the upright image, the point the square renditions
        are placed around, where the server has it.
        `metadata`: the app's own strings, kept with the job and shown as `job.metadata`
        (the server's bounds: 16 keys, 512 characters a value, 2 KiB in all).
        `stop`: once set, the upload ends with UploadStopped and starts no request more:
        POST /images or a single PUT at once (between two chunks), a multipart one once the
        parts in flight are stored, starting no other part nor the completion. Its `job` is
        what resume() takes (None when the job was not made: the same key makes it later).
        A direct upload's stopped job is cancelled (an unfinished job counts against its
        owner's limit until its upload's deadline) in one try of at most 5 s, so a stop never
        waits on a slow answer; unless `keep_stopped`: then it stays `awaiting_upload` for
        resume().
        """
        file = UploadFile(source)
        asked = _asked(tuple(formats), renditions, focus)
        if self.resume_dir is not None and file.path is not None and idempotency_key is None:
            state = UploadState(self.base_url, file.path, self.resume_dir,
                                {**asked, **({"metadata": metadata} if metadata else {})})
            return self._upload_kept(state, file, content_type, filename, on_progress, wait, on_part_progress,
                                     asked, stop, metadata, keep_stopped)
        return self._upload(file, content_type, idempotency_key or str(uuid.uuid4()), filename, on_progress,
                            wait, on_part_progress, asked, stop, metadata, keep_stopped)

    def _upload_kept(self, state: UploadState, file: UploadFile, content_type: Optional[str],
                     filename: Optional[str], on_progress: Optional[Progress], wait: float,
                     on_part_progress: Optional[PartProgress], asked: Dict[str, Any],
                     stop: Optional[threading.Event], metadata: Optional[Dict[str, str]],
                     keep_stopped: bool) -> Job:
        """upload() with its record kept under the file's fingerprint: a saved Location is
        resumed (a job gone or without its file is left, and the file uploaded anew with a new
        key); the key is saved before any byte; a cut that leaves the job awaiting its file
        saves its Location (the error's `state` names the record); anything else forgets it."""
        try:
            location = state.load().get("location")
            job = None
            if location:
                assert file.path is not None
                job = self.resume_saved(location, file.path, on_progress=on_progress,
                                        on_part_progress=on_part_progress, stop=stop, keep_stopped=keep_stopped)
                if job is None:
                    state.forget()
                else:
                    job = self._held_poll(job, wait)
            if job is None:
                key = state.load().get("idempotency_key") or str(uuid.uuid4())
                state.save(idempotency_key=key)  # before any byte: a replay finds the same job
                job = self._upload(file, content_type, key, filename, on_progress, wait, on_part_progress, asked,
                                   stop, metadata, keep_stopped)
        except errors.ImageJobsError as exc:
            cut = getattr(exc, "job", None)
            if isinstance(cut, Job) and cut.status == Status.AWAITING_UPLOAD.value:
                state.save(location=cut.location)
                exc.state = state.path  # type: ignore[attr-defined]
            else:
                state.forget()
            raise
        state.forget()
        return job

    def _upload(self, file: UploadFile, content_type: Optional[str], key: str, filename: Optional[str],
                on_progress: Optional[Progress], wait: float, on_part_progress: Optional[PartProgress],
                asked: Dict[str, Any], stop: Optional[threading.Event],
                metadata: Optional[Dict[str, str]], keep_stopped: bool) -> Job:
        ctype = content_type or guess_type(file.head()) or OCTET_STREAM
        name = filename or file.name
        if file.size <= self.max_upload_bytes:
            try:
                return self._upload_through_api(file, ctype, key, on_progress, wait, asked, metadata, stop)
            except errors.FileTooLarge:
                pass  # This server's /images limit is lower than our max_upload_bytes: the direct route has its own.
        job = self._upload_direct(file, ctype, name, key, on_progress, on_part_progress, asked, stop,
                                  metadata, keep_stopped)
        return self._held_poll(job, wait)

    def prepare_upload(self, file: Optional[Source] = None, *, size: Optional[int] = None,
                       content_type: Optional[str] = None, sha256: Optional[str] = None,
                       idempotency_key: Optional[str] = None, formats: Sequence[str] = (),
                       renditions: Optional[Sequence[str]] = None,
                       focus: Optional[Tuple[float, float]] = None,
                       metadata: Optional[Dict[str, str]] = None) -> PreparedUpload:
        """Make the job of an upload whose bytes another program sends (a phone's background
        uploader), and answer a PreparedUpload: its `job`, the plain HTTP `requests` (method,
        url, headers, offset, length) that send the file, and `complete()` for when they are
        sent; `to_dict()` saves it for another process. Below `multipart_threshold` one PUT
        (pinned by the file's SHA-256 when it is known), from it one request a part.

        `file`: a path (read in chunks for its type and checksum), bytes or a file object; or
        None, for a backend that has only what the app told it: `size`, `content_type` and,
        optionally, `sha256` (base64 of the digest; with it storage refuses other bytes).
        The same options as upload(): `idempotency_key` (the same key answers the same job
        and upload, with its stored parts marked), `formats`, `renditions`, `metadata`.
        Never through POST /images, whatever the size: a background uploader sends a file as
        it is, with no form around it."""
        if file is not None:
            source = UploadFile(file)
            size = source.size
            content_type = content_type or guess_type(source.head()) or OCTET_STREAM
            if size < self.multipart_threshold and sha256 is None:
                sha256 = source.sha256()
        if size is None or content_type is None:
            raise ValueError("prepare_upload needs a file, or its size and content_type")
        response = self._create_direct(size, content_type, idempotency_key or str(uuid.uuid4()),
                                       _asked(tuple(formats), renditions, focus), metadata, sha256)
        return PreparedUpload._of(Job._accepted(self, response), size, content_type)

    def prepared(self, saved: Dict[str, Any]) -> PreparedUpload:
        """A PreparedUpload that to_dict() saved (in this process or another), with this client
        for its calls: PreparedUpload.from_dict(saved, client)."""
        return PreparedUpload.from_dict(saved, self)

    def resume(self, job: Job, source: Source, *, on_progress: Optional[Progress] = None,
               on_part_progress: Optional[PartProgress] = None,
               stop: Optional[threading.Event] = None, keep_stopped: bool = False) -> Job:
        """Finish the upload of `job` (still `awaiting_upload`) from `source`, the same file:
        GET its upload, send what storage does not hold yet (for multipart, only the parts
        missing), and complete it; the job as upload() returns it. `stop` and `keep_stopped`
        as in upload(). An upload that had already arrived (the server answers with the job)
        sends nothing: the job is returned as it is."""
        upload = self._describe(job)
        if upload is None:
            return job
        return self._send_rest(job, upload, source, on_progress, on_part_progress, stop, keep_stopped)

    def resume_saved(self, location: str, source: Source, *, on_progress: Optional[Progress] = None,
                     on_part_progress: Optional[PartProgress] = None,
                     stop: Optional[threading.Event] = None, keep_stopped: bool = False) -> Optional[Job]:
        """The job of an upload an earlier run saved (its Location) and did not finish, read,
        and its upload finished from `source` as resume() does; a job whose file had arrived
        is answered as it is. None when there is nothing to go on with: the job is gone (404,
        410) or ended without its file (cancelled, failed `upload_missing`, or its upload
        aborted). Then upload the file afresh with a new Idempotency-Key: the saved one would
        answer the same dead job. The CLI resumes with this."""
        job = self.job(location)
        try:
            job.refresh()
        except (errors.JobNotFound, errors.JobExpired):
            return None
        if _without_its_file(job):
            return None
        if job.status != Status.AWAITING_UPLOAD.value:
            return job  # its file had arrived: only the job is left to follow
        try:
            upload = self._describe(job)
        except errors.InvalidRequest:
            return None  # its upload ended since the read: aborted at its deadline, or with its job
        if upload is not None:
            self._send_rest(job, upload, source, on_progress, on_part_progress, stop, keep_stopped).refresh()
        return job

    def _describe(self, job: Job) -> Optional[Dict[str, Any]]:
        """What is left to send of the job's upload (GET .../upload); None when its file had
        arrived: the answer is then the job itself (no `method`), read into `job`."""
        response = self.request("GET", job.location + "/upload")
        upload = response.json()
        if isinstance(upload, dict) and "method" not in upload and "status" in upload:
            job._with(upload, response)
            return None
        return upload

    def _send_rest(self, job: Job, upload: Dict[str, Any], source: Source, on_progress: Optional[Progress],
                   on_part_progress: Optional[PartProgress], stop: Optional[threading.Event],
                   keep_stopped: bool) -> Job:
        """What storage lacks of a described upload, then the completion, as _send_stored."""
        file = UploadFile(source)
        self._send_stored(job, upload, file, _type_of(upload, file), file.name, on_progress, on_part_progress,
                          stop, keep_stopped)
        return job

    def _upload_through_api(self, file: UploadFile, ctype: str, key: str,
                            on_progress: Optional[Progress], wait: float, asked: Dict[str, Any],
                            metadata: Optional[Dict[str, str]] = None,
                            stop: Optional[threading.Event] = None) -> Job:
        # The length is set by hand so httpx sends Content-Length, not a chunked body.
        headers = {"Content-Type": ctype, "Content-Length": str(file.size), "Idempotency-Key": key}
        if metadata:  # a header (JSON escapes keep it ASCII), never the query string
            headers["Image-Jobs-Metadata"] = json_module.dumps(metadata)
        hold = min(int(wait), self.hold_seconds) if self.waits else 0
        if hold >= 1:
            headers["Prefer"] = f"wait={hold}"
        query = "&".join(f"{name}={_listed(value)}" for name, value in asked.items())
        _stop_if_set(stop, "POST /images")
        response = self.request("POST", f"{API_ROOT}/images{'?' + query if query else ''}",
                                body=lambda: _chunks(file, on_progress, stop), headers=headers)
        job = Job._accepted(self, response)
        if hold >= 1 and not job.finished and not job._held:
            return self._held_poll(job, wait)  # the server did not hold the POST: a GET may
        return job

    def _held_poll(self, job: Job, wait: float) -> Job:
        """Up to `wait` seconds of held polls; the job as it is then, finished or not."""
        if wait < 1 or not self.waits or job.finished:
            return job
        try:
            return job.wait(deadline=wait)
        except errors.WaitTimeout:
            return job

    def _create_direct(self, size: int, ctype: str, key: str, asked: Dict[str, Any],
                       metadata: Optional[Dict[str, str]], sha256: Optional[str] = None,
                       stop: Optional[threading.Event] = None) -> httpx.Response:
        """POST /uploads: a single PUT (pinned by the SHA-256 when given) below the multipart
        threshold, parts from it."""
        body: Dict[str, Any] = {"content_type": ctype, "size": size, **asked}
        if metadata:
            body["metadata"] = dict(metadata)
        if size >= self.multipart_threshold:
            body["method"] = "multipart"
        else:
            body["method"] = "PUT"
            if sha256 is not None:
                body["sha256"] = sha256
        _stop_if_set(stop, "POST /uploads")
        return self.request("POST", f"{API_ROOT}/uploads", headers={"Idempotency-Key": key}, json=body)

    def _upload_direct(self, file: UploadFile, ctype: str, name: str, key: str,
                       on_progress: Optional[Progress],
                       on_part_progress: Optional[PartProgress] = None,
                       asked: Optional[Dict[str, Any]] = None, stop: Optional[threading.Event] = None,
                       metadata: Optional[Dict[str, str]] = None, keep_stopped: bool = False) -> Job:
        sha256 = file.sha256() if file.size < self.multipart_threshold else None
        response = self._create_direct(file.size, ctype, key, asked or {}, metadata, sha256, stop)
        job = Job._accepted(self, response)
        upload = job.raw.get("upload")
        if job.status == Status.AWAITING_UPLOAD and isinstance(upload, dict) and upload.get("method"):
            # Processing can only start once the file is stored: its polls count the server's
            # Retry-After from then.
            self._send_stored(job, upload, file, ctype, name, on_progress, on_part_progress, stop,
                              keep_stopped, polling.retry_after(response.headers))
        elif on_progress is not None and job.status != Status.AWAITING_UPLOAD:
            on_progress(file.size, file.size)  # a replay: the file had already arrived
        return job

    def _send_stored(self, job: Job, upload: Dict[str, Any], file: UploadFile, ctype: str, name: str,
                     on_progress: Optional[Progress], on_part_progress: Optional[PartProgress],
                     stop: Optional[threading.Event], keep_stopped: bool,
                     retry_after: Optional[float] = None) -> None:
        """Send the file as `upload` says, until the job has left `awaiting_upload` (bounded).
        A failure carries the job as `job` (what resume() takes); a stop cancels it first,
        unless the caller keeps it."""
        try:
            self._send(job, upload, file, ctype, name, on_progress, on_part_progress, stop)
        except errors.ImageJobsError as exc:
            if isinstance(exc, errors.UploadStopped) and not keep_stopped:
                _cancel_stopped(job)
            exc.job = job  # type: ignore[attr-defined]
            raise
        job._retry_at = self.clock() + (retry_after or 0.0)
        # A multipart job is queued by its completion; a single PUT's, by storage's event.
        job._await_arrival(polling.ARRIVAL_SECONDS, stop)

    def _send(self, job: Job, upload: Dict[str, Any], file: UploadFile, ctype: str, name: str,
              on_progress: Optional[Progress], on_part_progress: Optional[PartProgress],
              stop: Optional[threading.Event] = None) -> None:
        method = upload.get("method")
        if method == "POST":
            self._post_to_storage(upload, file, ctype, name, on_progress)
        elif method == "PUT":
            self._put_to_storage(upload["url"], upload.get("headers") or {}, file, 0, file.size, on_progress, stop)
        elif method == "multipart":
            self._put_parts(upload, file, on_progress, on_part_progress, stop)
            _stop_if_set(stop, "the completion")  # the parts are stored: a resume completes it
            # No body: the server takes the parts storage holds, so a resume needs no ETags kept.
            job._with_answer(self.request("POST", job.location + "/upload", repeatable=True))
        else:
            raise errors.ImageJobsError(f"unknown upload method {method!r}")

    def _put_to_storage(self, url: str, headers: Dict[str, str], file: UploadFile, offset: int, length: int,
                        on_progress: Optional[Progress], stop: Optional[threading.Event] = None) -> str:
        """One presigned PUT of `length` bytes of the file from `offset`, with exactly the
        signed headers; the answer's ETag. `stop` ends it between two chunks."""
        # The length is signed: sent as a header, never a chunked body (whatever headers say).
        sent = {**{k: v for k, v in headers.items() if k.lower() != "content-length"}, "Content-Length": str(length)}
        response = self._to_storage(lambda: self._http.put(
            url, content=_CountingBody(self, file, offset, length, on_progress, stop), headers=sent))
        return response.headers.get("ETag", "")

    def _put_parts(self, upload: Dict[str, Any], file: UploadFile, on_progress: Optional[Progress],
                   on_part_progress: Optional[PartProgress], stop: Optional[threading.Event] = None) -> None:
        """The parts not stored yet, PART_CONCURRENCY at a time. Once `stop` is set no part
        starts, and those in flight are finished: stored, they need not be sent again.
        Progress starts from what storage holds (a resume's first event says so)."""
        size = upload["part_size"]
        todo = [p for p in upload["parts"] if not p.get("stored")]
        done = sum(p["size"] for p in upload["parts"] if p.get("stored"))
        lock = threading.Lock()
        sent = {p["part_number"]: 0 for p in todo}
        if on_progress is not None:
            on_progress(done, file.size)

        def one(part: Dict[str, Any]) -> None:
            _stop_if_set(stop, f"part {part['part_number']}")
            number = part["part_number"]
            start = (number - 1) * size

            def progress(n: int, total: int) -> None:
                if on_part_progress is not None:
                    on_part_progress(number, n, total)
                with lock:  # held while reporting, so the totals reported never go back
                    sent[number] = n
                    if on_progress is not None:
                        on_progress(done + sum(sent.values()), file.size)

            self._put_to_storage(part["url"], {}, file, start, part["size"], progress)

        with ThreadPoolExecutor(PART_CONCURRENCY) as pool:
            for future in [pool.submit(one, part) for part in todo]:
                future.result()

    def _post_to_storage(self, form: Dict[str, Any], file: UploadFile, ctype: str, name: str,
                         on_progress: Optional[Progress]) -> None:
        """The presigned POST: the form's fields, then the file last, as S3 requires."""
        fields = {str(k): str(v) for k, v in (form.get("fields") or {}).items()}
        # No Authorization header: the form carries its own signature.
        self._to_storage(lambda: self._http.post(
            form["url"], data=fields, files={"file": (name, _ProgressReader(file, on_progress), ctype)}))

    def _to_storage(self, send: Callable[[], httpx.Response]) -> httpx.Response:
        """A request to storage (its body made afresh by `send` for each try): the 2xx
        answer; connection errors and 5xx retried within the client's bounds."""
        attempts = 0
        while True:
            attempts += 1
            try:
                response = send()
            except RETRY_TRANSPORT as exc:
                self._retry_or_raise(attempts, None, errors.ConnectionFailed(f"storage: {exc}"), exc)
                continue
            except httpx.HTTPError as exc:
                raise errors.ConnectionFailed(f"storage: {exc}") from exc
            if response.is_success:
                return response
            if response.status_code >= 500:
                self._retry_or_raise(attempts, polling.retry_after(response.headers), _storage_error(response))
                continue
            raise _storage_error(response)

    # -- HTTP --------------------------------------------------------------------------------
    def request(self, method: str, target: str, *, retry: bool = True,
                body: Optional[Callable[[], Any]] = None, json: Any = None,
                headers: Optional[Dict[str, str]] = None,
                repeatable: Optional[bool] = None, timeout: Optional[float] = None) -> httpx.Response:
        """One API call with the bearer token: a 2xx answer, or the typed error of the last try.

        With `retry`, 429 and 503 are retried up to `max_attempts` times in all, after the
        server's Retry-After or a jittered backoff; connection errors, 502 and 504 too when the
        request is `repeatable` (by default: GET, PUT, DELETE, or with an Idempotency-Key).
        `body` makes the request content afresh for each try. `timeout`: seconds for each try
        at most, below the client's own.
        """
        if repeatable is None:
            repeatable = method.upper() in REPEATABLE_METHODS or "Idempotency-Key" in (headers or {})
        url = self.url(target)
        attempts = 0
        token_refreshed = False
        while True:
            attempts += 1
            token = self._bearer()
            sent = {**(headers or {}), **({"Authorization": f"Bearer {token}"} if token else {})}
            try:
                response = self._http.request(method, url, content=body() if body else None,
                                              json=json, headers=sent, **self._within(timeout))
            except RETRY_TRANSPORT as exc:
                failure = errors.ConnectionFailed(f"{method} {url}: {exc!r}")
                if not retry or not repeatable:
                    raise failure from exc
                self._retry_or_raise(attempts, None, failure, exc)
                continue
            except httpx.HTTPError as exc:
                raise errors.ConnectionFailed(f"{method} {url}: {exc!r}") from exc
            if response.is_success:
                return response
            if (response.status_code == 401 and self._token_provider is not None
                    and not token_refreshed and self._token_provider() != token):
                token_refreshed = True  # the provider had a newer token: one more try with it
                attempts -= 1
                continue
            ra = polling.retry_after(response.headers)
            failure = errors.error_for(response.status_code, _json_or_none(response), ra)
            retried = RETRY_STATUSES if repeatable else RETRY_ALWAYS
            if not retry or response.status_code not in retried:
                raise failure
            self._retry_or_raise(attempts, ra, failure)

    def _within(self, seconds: Optional[float]) -> Dict[str, Any]:
        """httpx's timeout argument that holds a try to `seconds` at most (none: the client's)."""
        if seconds is None:
            return {}
        own = self._http.timeout
        held = {name: seconds if limit is None else min(seconds, limit)
                for name, limit in (("connect", own.connect), ("read", own.read),
                                    ("write", own.write), ("pool", own.pool))}
        return {"timeout": httpx.Timeout(**held)}

    def _retry_or_raise(self, attempts: int, retry_after: Optional[float], failure: Exception,
                        cause: Optional[BaseException] = None) -> None:
        if attempts >= self.max_attempts or (retry_after or 0.0) > self.max_retry_wait:
            raise failure from cause
        self.sleep(polling.retry_wait(attempts, retry_after, self.random))

    def _bearer(self) -> Optional[str]:
        return self._token_provider() if self._token_provider is not None else self._token

    def _download(self, url: str, path: Path, cache_key: Optional[str] = None) -> bool:
        """GET a presigned URL into `path` (atomically), or copy it from cache_dir when the
        cache_key is there. False when storage refuses the URL."""
        cached = None if self.cache_dir is None or cache_key is None else self.cache_dir / cache_key
        if cached is not None and cached.is_file():
            partial = path.with_name(path.name + ".part")
            shutil.copyfile(cached, partial)
            os.replace(partial, path)
            return True
        if not self._fetch(url, path):
            return False
        if cached is not None:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            partial = cached.with_name(cached.name + ".part")
            shutil.copyfile(path, partial)
            os.replace(partial, cached)
        return True

    def _fetch(self, url: str, path: Path) -> bool:
        attempts = 0
        while True:
            attempts += 1
            partial = path.with_name(path.name + ".part")
            try:
                with self._http.stream("GET", url) as response:
                    if response.status_code in (400, 401, 403):
                        return False  # expired or refused signature: the caller re-reads the job
                    if not response.is_success:
                        response.read()
                        if response.status_code < 500:
                            raise _storage_error(response)
                        ra = polling.retry_after(response.headers)
                        self._retry_or_raise(attempts, ra, _storage_error(response))
                        continue
                    with open(partial, "wb") as out:
                        for chunk in response.iter_bytes(CHUNK):
                            out.write(chunk)
                os.replace(partial, path)
                self.downloads += 1
                return True
            except RETRY_TRANSPORT as exc:
                partial.unlink(missing_ok=True)
                self._retry_or_raise(attempts, None, errors.ConnectionFailed(f"download: {exc!r}"), exc)
            except BaseException:
                partial.unlink(missing_ok=True)
                raise


Job.client_class = Client


def is_service_token(token: Optional[str]) -> bool:
    """Whether a bearer token is the service principal's: a JWT whose `scope` claim (OAuth's:
    names separated by spaces) names SERVICE_SCOPE. Read, never verified: it only picks the
    routes, and the server checks every token. Anything else (no token, an opaque one) is an
    owner's."""
    parts = (token or "").split(".")
    if len(parts) != 3:
        return False
    try:
        claims = json_module.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return False
    scope = claims.get("scope") if isinstance(claims, dict) else None
    return isinstance(scope, str) and SERVICE_SCOPE in scope.split()


# A stopped upload's cancel is one try of at most this long: the caller who stopped is not kept
# waiting on a slow or lost answer (a lost cancel's job ends upload_missing at its deadline).
STOPPED_CANCEL_SECONDS = 5.0


def _cancel_stopped(job: Job) -> None:
    """A stopped upload's job, cancelled: it no longer counts against its owner's unfinished
    jobs. Best effort: one whose cancel is lost ends `upload_missing` at its deadline."""
    try:
        job._cancel(retry=False, timeout=STOPPED_CANCEL_SECONDS)
    except errors.ImageJobsError:
        pass


def _asked(formats: Sequence[str], renditions: Optional[Sequence[str]],
           focus: Optional[Tuple[float, float]] = None) -> Dict[str, Any]:
    """What an upload names besides its file, as POST /uploads' body has it: extra formats, the
    sizes (renditions) when given (an empty list asks for display and thumb alone; None for
    the server's default), and the focus (x, y: fractions of the upright image) when given."""
    asked: Dict[str, Any] = {}
    if formats:
        asked["formats"] = list(formats)
    if renditions is not None:
        asked["renditions"] = list(renditions)
    if focus is not None:
        asked["focus"] = {"x": focus[0], "y": focus[1]}
    return asked


def _listed(value: Any) -> str:
    """A body's value as POST /images' query has it: `avif,webp`, `0.3,0.6` for the focus (in
    plain decimals: the query takes 0.00001, never 1e-05)."""
    if isinstance(value, dict):
        return f"{_decimal(value['x'])},{_decimal(value['y'])}"
    return ",".join(value)


def _decimal(value: float) -> str:
    from decimal import Decimal

    return format(Decimal(repr(value)), "f")


def _chunks(file: UploadFile, on_progress: Optional[Progress],
            stop: Optional[threading.Event] = None) -> Iterator[bytes]:
    total = file.size
    if on_progress is not None:
        on_progress(0, total)
    sent = 0
    for chunk in file.chunks():
        _stop_if_set(stop, "the rest of POST /images")
        yield chunk
        sent += len(chunk)
        if on_progress is not None:  # the generator resumes once httpx has written the chunk
            on_progress(sent, total)


def _stop_if_set(stop: Optional[threading.Event], before: str) -> None:
    """Once the caller's stop is set, an upload starts no request (and no chunk) more."""
    if stop is not None and stop.is_set():
        raise errors.UploadStopped(f"stopped before {before}")


def _without_its_file(job: Job) -> bool:
    """A saved upload's job that ended with no file: resuming it cannot help, a new upload can."""
    error = job.error
    return job.status == Status.CANCELLED.value or (
        job.status == Status.FAILED.value and error is not None and error.code == errors.UploadMissing.code)


def _type_of(upload: Dict[str, Any], file: UploadFile) -> str:
    return (upload.get("headers") or {}).get("Content-Type") or guess_type(file.head()) or OCTET_STREAM


class _CountingBody:
    """A PUT body: a range of the file in chunks, read as the connection takes them (httpx
    asks for the next once it has written the last), counted and reported as sent."""

    def __init__(self, client: "Client", file: UploadFile, offset: int, length: int,
                 on_progress: Optional[Progress], stop: Optional[threading.Event] = None):
        self._client, self._file, self._on_progress, self._stop = client, file, on_progress, stop
        self._offset, self._length = offset, length

    def __iter__(self) -> Iterator[bytes]:
        sent = 0
        for chunk in self._file.chunks(self._offset, self._length):
            _stop_if_set(self._stop, "the rest of the PUT")
            self._client.bytes_to_storage += len(chunk)
            yield chunk
            sent += len(chunk)
            if self._on_progress is not None:
                self._on_progress(sent, self._length)


class _ProgressReader(RangeReader):
    """The file part of the storage form; reports bytes as httpx reads them to send."""

    def __init__(self, file: UploadFile, on_progress: Optional[Progress]):
        super().__init__(file, 0, file.size)
        self._on_progress = on_progress

    def read(self, size: Optional[int] = -1) -> bytes:
        chunk = super().read(size)
        if self._on_progress is not None:
            self._on_progress(self.tell(), self._length)
        return chunk


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _storage_error(response: httpx.Response) -> errors.StorageError:
    """S3's XML error: <Error><Code>AccessDenied</Code><Message>...</Message></Error>."""
    code, message = "unknown", response.reason_phrase
    try:
        root = ET.fromstring(response.content)
        code = root.findtext("Code") or code
        message = root.findtext("Message") or message
    except ET.ParseError:
        pass
    return errors.StorageError(response.status_code, code, message)
