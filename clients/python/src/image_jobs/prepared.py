"""PreparedUpload: an upload whose job is made, and whose bytes another program sends as plain
HTTP requests (a phone's background uploader: iOS URLSession, Android WorkManager, Expo's
FileSystem.uploadAsync), finished later, from this process or another, by complete().

to_dict() writes what the JavaScript package's toJSON() writes (its keys, camelCase), so a
prepared upload saved by one SDK is taken up by the other."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from . import errors, polling
from .job import Api, Job, Status

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
        return {"method": self.method, "url": self.url, "headers": dict(self.headers), "offset": self.offset,
                "length": self.length, "partNumber": self.part_number}

    @classmethod
    def from_dict(cls, saved: Dict[str, Any]) -> "UploadRequest":
        number = saved.get("partNumber")
        return cls(saved["method"], saved["url"], {str(k): str(v) for k, v in saved["headers"].items()},
                   int(saved["offset"]), int(saved["length"]), None if number is None else int(number))


class PreparedUpload:
    """An upload made by Client.prepare_upload(): its `job` (`awaiting_upload`), the `requests`
    still to send (one PUT, or one a part storage lacks), `expires_at` (when a request must
    begin by; renew() signs them afresh), and complete() once they are sent.

    to_dict() is JSON-safe (no token); PreparedUpload.from_dict(saved, client) takes it up in
    another process, with a client of the same owner, to renew or complete it.
    """

    def __init__(self, job: Job, method: str, size: int, content_type: str, requests: List[UploadRequest],
                 expires_at: Optional[str] = None, part_size: Optional[int] = None):
        self.job = job
        self.method = method  # "PUT" or "multipart"
        self.size = size
        self.content_type = content_type
        self.requests = requests
        self.expires_at = expires_at
        self.part_size = part_size

    @classmethod
    def _of(cls, job: Job, size: int, content_type: str) -> "PreparedUpload":
        """From the answer of POST /uploads that `job` was read from (a replay whose file had
        arrived has no upload: nothing to send)."""
        prepared = cls(job, "PUT", size, content_type, [])
        upload = job.raw.get("upload")
        if isinstance(upload, dict) and upload.get("method"):
            prepared._take(upload)
        return prepared

    def _take(self, upload: Dict[str, Any]) -> None:
        self.method = upload["method"]
        self.requests = requests_of(upload, self.size)
        self.expires_at = upload.get("expires_at") or self.expires_at
        self.part_size = upload.get("part_size", self.part_size)

    def __repr__(self) -> str:
        return f"<PreparedUpload {self.job.job_id} {self.method} {len(self.requests)} requests>"

    # -- what the backend calls ---------------------------------------------------------------
    def renew(self) -> List[UploadRequest]:
        """Fresh URLs for what storage lacks (GET .../upload), in `requests` and answered: the
        parts not stored yet, or the PUT signed anew; [] once the file has arrived (then `job`
        is read as GET shows it). For URLs that expired (storage answers 403), or a transfer
        moved to another network."""
        upload = self._described()
        self.requests = [] if upload is None else requests_of(upload, self.size)
        if upload is not None and upload.get("expires_at"):
            self.expires_at = upload["expires_at"]
        return self.requests

    def complete(self, timeout: float = polling.ARRIVAL_SECONDS) -> Job:
        """Once the requests are sent: the job with its file, `queued` or further along.
        Multipart: the completion (POST .../upload; the server lists the parts storage holds,
        so no ETags are needed). A single PUT has nothing to complete: this waits, held, for
        storage's event to move the job past `awaiting_upload`, at most `timeout` seconds.
        UploadIncomplete when storage lacks some of the file: `missing` names the parts (their
        requests renewed here), [] for a PUT not arrived."""
        job = self.job
        if self.method == "multipart":
            try:
                job._with_answer(job._client.request("POST", job.location + "/upload", repeatable=True))
            except errors.InvalidRequest as exc:
                upload = self._described()  # which parts, from the server, with fresh URLs
                if upload is not None:
                    self.requests = requests_of(upload, self.size)
                    raise errors.UploadIncomplete(job, [r.part_number or 0 for r in self.requests],
                                                  exc.detail or str(exc)) from exc
        else:
            job.refresh()
            job._await_arrival(timeout)
            if job.status == Status.AWAITING_UPLOAD.value:
                raise errors.UploadIncomplete(job, [], f"storage has not told of the file in {timeout} s: send the "
                                                       "PUT (renew() signs it anew), then complete()")
        self.requests = []
        return job

    def _described(self) -> Optional[Dict[str, Any]]:
        """GET .../upload: the upload still to send, or None once the file has arrived (the job
        then read from the answer)."""
        response = self.job._client.request("GET", self.job.location + "/upload")
        upload = response.json()
        if isinstance(upload, dict) and "method" not in upload and isinstance(upload.get("status"), str):
            self.job._with(upload, response)
            return None
        return upload

    # -- saved and taken up again -------------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        """Everything needed to finish this upload elsewhere, JSON-safe, with no token: the
        JavaScript package's toJSON() shape (PreparedUpload.from() there takes it too)."""
        return {"version": VERSION, "job": self.job.location, "method": self.method, "size": self.size,
                "contentType": self.content_type, "partSize": self.part_size, "expiresAt": self.expires_at,
                "requests": [r.to_dict() for r in self.requests], "record": None}

    @classmethod
    def from_dict(cls, saved: Dict[str, Any], client: Api) -> "PreparedUpload":
        """A PreparedUpload saved by to_dict() (or the JavaScript package's toJSON()), with
        `client` (the same owner's) for its calls. Nothing is fetched: renew() and complete()
        ask the service."""
        if not isinstance(saved, dict) or saved.get("version") != VERSION or not isinstance(saved.get("job"), str):
            version = saved.get("version") if isinstance(saved, dict) else None
            raise ValueError(f"not a prepared upload of version {VERSION} (version {version!r})")
        requests = [UploadRequest.from_dict(r) for r in saved["requests"]]
        part_size = saved.get("partSize")
        return cls(client.job(saved["job"]), saved["method"], int(saved["size"]), str(saved.get("contentType") or ""),
                   requests, saved.get("expiresAt"), None if part_size is None else int(part_size))


def requests_of(upload: Dict[str, Any], size: int) -> List[UploadRequest]:
    """The plain requests that send what an upload (POST /uploads' or GET .../upload's `upload`)
    still lacks: its PUT, or each part not yet stored, from its offset for its size."""
    method = upload.get("method")
    if method == "PUT":
        headers = {str(k): str(v) for k, v in (upload.get("headers") or {}).items() if k.lower() != "content-length"}
        return [UploadRequest("PUT", upload["url"], {**headers, "Content-Length": str(size)}, 0, size)]
    if method == "multipart":
        part_size = upload["part_size"]
        # A part's URL signs its length alone; the type is named so that no client adds a
        # default of its own (urllib's is a form's, which a server may try to parse), and so
        # that uploaders which need one (OkHttp) have it.
        return [UploadRequest("PUT", part["url"], {"Content-Length": str(part["size"]),
                                                   "Content-Type": "application/octet-stream"},
                              (part["part_number"] - 1) * part_size, part["size"], part["part_number"])
                for part in upload["parts"] if not part.get("stored") and part.get("url")]
    # The form (method "POST") needs a multipart/form-data body around the file, which a
    # background uploader cannot send from a range of a file: prepare_upload never asks for it.
    raise errors.UnexpectedResponse(f"an upload by {method!r} cannot be handed over as plain requests")
