"""Progress by the byte (issue 52) and files read by path: on every route `on_progress(sent,
total)` follows the bytes as the connection takes them, at least every 1 % or 256 KiB; a
resumed upload starts from what storage holds; a file given by its path is never held whole
in memory. Against a scripted API whose transport reads each body chunk by chunk."""
from __future__ import annotations

import threading
import tracemalloc

import httpx
import pytest
from image_jobs import Client

from tests.client.fakes import API, JOB_PATH, FakeTime, accepted, job_answer

STORAGE = "http://storage.test"
MIB = 1024 * 1024
EVERY = 256 * 1024  # the bound: at least every 1 % or 256 KiB


class Storage:
    """The API's answers for one route, and a storage that reads bodies chunk by chunk, noting
    after each chunk how many progress events the client had reported: events that follow
    the bytes taken, not bytes buffered first. Keeps only counts, never the bodies."""

    def __init__(self, route: str, size: int, part_size: int = 1):
        self.route, self.size, self.part_size = route, size, part_size
        self.events: list[tuple[int, int]] = []
        self.lock = threading.Lock()
        self.received = 0
        self.gaps: list[int] = []  # per chunk taken: bytes taken minus bytes reported

    def on_progress(self, sent: int, total: int) -> None:
        self.events.append((sent, total))

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.url.host == "storage.test":
            if request.method == "PUT":  # the length is signed: never a chunked body
                assert "transfer-encoding" not in request.headers and "content-length" in request.headers
            for chunk in request.stream:
                with self.lock:
                    self.received += len(chunk)
                    self.gaps.append(self.received - (self.events[-1][0] if self.events else 0))
            return httpx.Response(200 if request.method == "PUT" else 204, headers={"ETag": '"e"'})
        request.read()
        if path == "/api/v1/images":
            with self.lock:
                self.received += len(request.content)
            return accepted("queued")
        if path == "/api/v1/uploads":
            return accepted("awaiting_upload", upload=self.upload())
        if path == JOB_PATH + "/upload" and request.method == "GET":
            return httpx.Response(200, json=self.upload())
        if path == JOB_PATH + "/upload":
            return job_answer("queued")  # the completion
        return job_answer("queued")  # the poll after a single PUT or form

    def upload(self) -> dict:
        if self.route == "POST":
            return {"method": "POST", "url": f"{STORAGE}/bucket", "fields": {"key": "originals/j-1"}}
        if self.route == "PUT":
            return {"method": "PUT", "url": f"{STORAGE}/bucket/originals/j-1", "headers": {}}
        sizes = [min(self.part_size, self.size - start) for start in range(0, self.size, self.part_size)]
        return {"method": "multipart", "part_size": self.part_size, "parts": [
            {"part_number": n, "size": s, "stored": False, "url": f"{STORAGE}/part/{n}"}
            for n, s in enumerate(sizes, start=1)]}

    def client(self, **options) -> Client:
        time_ = FakeTime()
        return Client(API, "tok", http=httpx.Client(transport=Streaming(self.handle)),
                      clock=time_.clock, sleep=time_.sleep, waits=False, **options)


class Streaming(httpx.BaseTransport):
    """httpx.MockTransport reads a body whole before its handler sees it; this one hands the
    request on as it is, so the handler takes the body chunk by chunk, as a socket would."""

    def __init__(self, handler):
        self.handler = handler

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self.handler(request)


ROUTES = {  # route: (file size, client options)
    "images": (3 * MIB, {}),
    "POST": (6 * MIB, {}),
    "PUT": (6 * MIB, {}),
    "multipart": (20 * MIB, {"multipart_threshold": 16 * MIB}),
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_every_route_reports_progress_by_the_byte_as_the_connection_takes_them(route, tmp_path):
    size, options = ROUTES[route]
    photo = tmp_path / "photo.jpg"
    photo.write_bytes(b"\xff\xd8\xff\xe0" + bytes(size - 4))
    storage = Storage(route, size, part_size=8 * MIB)
    client = storage.client(**options)
    if route == "POST":  # the form is what POST /uploads gives an older client: asked by resume()
        client.resume(client.job(JOB_PATH), photo, on_progress=storage.on_progress)
    else:
        client.upload(photo, on_progress=storage.on_progress)
    sent = [s for s, _ in storage.events]
    assert {t for _, t in storage.events} == {size} and sent[-1] == size
    assert sent == sorted(sent)  # never back, parts in parallel or not
    assert max(b - a for a, b in zip([0] + sent, sent)) <= max(size // 100, EVERY)
    # Counted as sent: after each chunk storage took, the client had reported all but a chunk.
    assert storage.gaps == [] or max(storage.gaps) <= 64 * 1024


def test_a_resumed_multipart_upload_starts_from_the_parts_storage_holds():
    size = 20 * MIB
    storage = Storage("multipart", size, part_size=8 * MIB)
    described = storage.upload()
    described["parts"][0].update(stored=True, etag='"e1"')
    del described["parts"][0]["url"]
    storage.upload = lambda: described  # GET .../upload: part 1 is stored
    client = storage.client(multipart_threshold=16 * MIB)
    client.resume(client.job(JOB_PATH), b"\xff\xd8\xff\xe0" + bytes(size - 4), on_progress=storage.on_progress)
    assert storage.events[0] == (8 * MIB, size) and storage.events[-1] == (size, size)
    assert storage.received == size - 8 * MIB


@pytest.mark.parametrize("route", ["PUT", "multipart"])
def test_a_file_given_by_its_path_is_never_held_whole_in_memory(route, tmp_path):
    size = 24 * MIB
    photo = tmp_path / "big.jpg"
    with open(photo, "wb") as out:
        out.write(b"\xff\xd8\xff\xe0")
        for _ in range(size // MIB - 1):
            out.write(bytes(MIB))
        out.write(bytes(MIB - 4))
    storage = Storage(route, size, part_size=8 * MIB)
    client = storage.client(multipart_threshold=16 * MIB if route == "multipart" else 64 * MIB)
    tracemalloc.start()
    try:
        client.upload(photo)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert storage.received == size
    assert peak < 2 * MIB, f"{peak:,} bytes at the peak for a {size:,}-byte file"
