"""PreparedUpload: an upload whose job is made, and whose bytes another program sends as plain
HTTP requests (a phone's background uploader: iOS URLSession, Android WorkManager, Expo's
FileSystem.uploadAsync), finished later, from this process or another, by complete()."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional

from . import errors, polling
from .job import Api, Job

# The shape to_dict() writes; from_dict() refuses others rather than misread them.
VERSION = 1


@dataclass(frozen=True)
class UploadRequest:
    """One plain HTTP request that sends `length` bytes of the file from `offset`: send them as
    the body, with exactly these headers (the URL's signature pins them, the length too)."""

    method: str
    url: str
    headers: Dict[str, str]
    offset: int
    length: int
    part_number: Optional[int] = None  # a multipart upload's part; None for the single PUT

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


class PreparedUpload:
    """An upload made by Client.prepare_upload(): its `job` (`awaiting_upload`), the `requests`
    that send the file's bytes (one PUT, or one a part), `expires_at` (when a request must
    begin by; renew() signs them afresh), and complete() once they are sent.

    to_dict() is JSON; PreparedUpload.from_dict(saved, client) takes it up in another process
    (with a client of the same owner) to renew or complete it.
    """

    def __init__(self, job: Job, method: str, size: int, requests: List[UploadRequest],
                 expires_at: Optional[str] = None, part_size: Optional[int] = None):
        self.job = job
        self.method = method  # "PUT" or "multipart"
        self.size = size
        self.requests = requests
        self.expires_at = expires_at
        self.part_size = part_size

    @classmethod
    def _of(cls, job: Job, size: int) -> "PreparedUpload":
        """From the answer of POST /uploads (or GET .../upload) that `job` was read from."""
        prepared = cls(job, "PUT", size, [])
        upload = job.raw.get("upload")
        if isinstance(upload, dict) and upload.get("method"):
            prepared._take(upload)
        return prepared

    def _take(self, upload: Dict[str, Any]) -> None:
        self.method = upload["method"]
        self.requests = requests_of(upload, self.size)
        self.expires_at = upload.get("expires_at")
        self.part_size = upload.get("part_size")

    def __repr__(self) -> str:
        return f"<PreparedUpload {self.job.job_id} {self.method} {len(self.requests)} requests>"

    # -- what the backend calls ---------------------------------------------------------------
    def renew(self) -> "PreparedUpload":
        """Ask the service what is left to send (GET .../upload): `requests` become the parts
        storage does not hold, with fresh URLs (the PUT again, freshly signed), and
        `expires_at` their new deadline. Once the file has arrived there is nothing left:
        `requests` is empty and `job` is read as GET shows it."""
        client = self.job._client
        response = client.request("GET", self.job.location + "/upload")
        upload = response.json()
        if isinstance(upload, dict) and "method" not in upload and "status" in upload:
            self.job._with(upload, response)
            self.requests = []
            return self
        self._take(upload)
        return self

    def complete(self, deadline: float = polling.ARRIVAL_SECONDS) -> Job:
        """Once the requests are sent: the job, having its file. Multipart: the completion
        (POST .../upload; the server lists the stored parts, so no ETags are needed), which
        queues the job; a part missing raises InvalidRequest naming it (renew(), send those,
        complete again). A single PUT has no completion: this waits, held, for storage's
        event to move the job past `awaiting_upload`, at most `deadline` seconds; the job is
        answered as it is then (still `awaiting_upload` if its file had not arrived)."""
        job = self.job
        if self.method == "multipart":
            return job._with_answer(job._client.request("POST", job.location + "/upload", repeatable=True))
        job.refresh()
        return job._await_arrival(deadline)

    # -- saved and taken up again -------------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        """Everything needed to finish this upload elsewhere, as JSON-safe values (no token)."""
        return {"version": VERSION, "location": self.job.location, "job_id": self.job.job_id,
                "method": self.method, "size": self.size, "part_size": self.part_size,
                "expires_at": self.expires_at, "requests": [r.to_dict() for r in self.requests]}

    @classmethod
    def from_dict(cls, saved: Dict[str, Any], client: Api) -> "PreparedUpload":
        """A PreparedUpload saved by to_dict(), with `client` (the same owner's) for its calls.
        Nothing is fetched: renew() or complete() ask the service."""
        if saved.get("version") != VERSION:
            raise ValueError(f"a prepared upload of version {saved.get('version')!r}; this SDK reads {VERSION}")
        job = client.job(saved["location"])
        requests = [UploadRequest(r["method"], r["url"], dict(r["headers"]), int(r["offset"]), int(r["length"]),
                                  r.get("part_number")) for r in saved["requests"]]
        return cls(job, saved["method"], int(saved["size"]), requests, saved.get("expires_at"),
                   saved.get("part_size"))


def requests_of(upload: Dict[str, Any], size: int) -> List[UploadRequest]:
    """The plain requests that send what an upload (POST /uploads' or GET .../upload's `upload`)
    still lacks: its PUT, or each part not yet stored, from its offset for its size."""
    method = upload["method"]
    if method == "PUT":
        headers = {str(k): str(v) for k, v in (upload.get("headers") or {}).items()}
        headers.setdefault("Content-Length", str(size))
        return [UploadRequest("PUT", upload["url"], headers, 0, size)]
    if method == "multipart":
        part_size = upload["part_size"]
        # A part's URL signs its length alone; the type is named so that no client adds its
        # own default (urllib's is a form's, which a server may try to parse).
        return [UploadRequest("PUT", part["url"], {"Content-Length": str(part["size"]),
                                                   "Content-Type": "application/octet-stream"},
                              (part["part_number"] - 1) * part_size, part["size"], part["part_number"])
                for part in upload["parts"] if not part.get("stored")]
    # The form (method "POST") needs a multipart/form-data body around the file, which a
    # background uploader cannot send from a range of a file: prepare_upload never asks for it.
    raise errors.UnexpectedResponse(f"an upload of method {method!r} cannot be sent as plain requests")
