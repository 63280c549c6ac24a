"""The Python SDK's upload, with and without progress by the byte (issue 52), side by side in
one run: progress events per upload, and the client's CPU (this process's; the server is
another) for each route, from bytes and from a path.

The server is a sink in a child process that plays the API (POST /images, POST /uploads, the
completion, GET of the job) and storage (it reads and drops every body), so what is measured
is the SDK's own work: reading the file, hashing it for the PUT's checksum, handing chunks to
httpx, and the callbacks. Rounds take turns (without, with), so a slow spell of the shared
machine hits both.

    python benchmarks/sdk_progress.py [--rounds 5]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))

from image_jobs import Client  # noqa: E402

MIB = 1024 * 1024
PART = 8 * MIB
ROUTES = (  # (name, file size): POST /images up to 4 MiB, one PUT, then parts from 16 MiB
    ("POST /images", 3 * MIB),
    ("single PUT", 12 * MIB),
    ("multipart", 40 * MIB),
)
JOB = "/api/v1/image-jobs/j-1"


class Sink(BaseHTTPRequestHandler):
    """The API's answers for one job, and storage that drops what it is sent."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _drain(self) -> bytes:
        left = int(self.headers.get("Content-Length") or 0)
        kept = b""
        while left:
            chunk = self.rfile.read(min(left, 1 << 20))
            if not chunk:
                break
            left -= len(chunk)
            if len(kept) < 4096:
                kept += chunk[:4096]
        return kept

    def _answer(self, status: int, body: dict, **headers: str) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", "Content-Length": str(len(data)), **headers}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        start = self._drain()
        job = {"job_id": "j-1", "status": "queued"}
        if self.path.startswith("/api/v1/uploads"):
            asked = json.loads(start)
            base = f"http://127.0.0.1:{self.server.server_port}"
            if asked["method"] == "multipart":
                size = asked["size"]
                parts = [{"part_number": n + 1, "size": min(PART, size - n * PART), "stored": False,
                          "url": f"{base}/part/{n + 1}"} for n in range((size + PART - 1) // PART)]
                upload = {"method": "multipart", "part_size": PART, "parts": parts}
            else:
                upload = {"method": "PUT", "url": f"{base}/put", "headers": {
                    "Content-Type": asked["content_type"], "Content-Length": str(asked["size"])}}
            self._answer(202, {**job, "status": "awaiting_upload", "upload": upload}, Location=JOB)
        elif self.path.startswith("/api/v1/images"):
            self._answer(202, job, Location=JOB)
        else:  # the completion
            self._answer(200, job)

    def do_PUT(self) -> None:
        self._drain()
        self.send_response(200)
        self.send_header("ETag", '"e"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self._answer(200, {"job_id": "j-1", "status": "queued"})


def serve() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    print(server.server_port, flush=True)
    server.serve_forever()


def one(api: str, source, progress: bool) -> tuple[float, int]:
    """(CPU seconds of this process for one upload, progress events)."""
    events = [0]

    def counted(sent: int, total: int) -> None:
        events[0] += 1

    with Client(api, "tok", waits=False) as client:
        before = time.process_time()
        client.upload(source, content_type="image/jpeg", on_progress=counted if progress else None)
        return time.process_time() - before, events[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve()
    sink = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True)
    try:
        api = f"http://127.0.0.1:{sink.stdout.readline().strip()}"
        folder = Path(tempfile.mkdtemp(prefix="sdk-progress-"))
        print(f"the Python SDK's upload to a sink, {args.rounds} rounds, median CPU of the client"
              f" ({os.cpu_count()} cores, shared)\n")
        print("| route | size | source | events | every | CPU without | CPU with | ratio |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for route, size in ROUTES:
            data = b"\xff\xd8\xff\xe0" + os.urandom(size - 4)
            path = folder / f"{size}.jpg"
            path.write_bytes(data)
            for kind, source in (("bytes", data), ("path", path)):
                without, with_, counts = [], [], set()
                one(api, source, True)  # warm: connections, imports
                for _ in range(args.rounds):
                    without.append(one(api, source, False)[0])
                    cpu, events = one(api, source, True)
                    with_.append(cpu)
                    counts.add(events)
                if len(counts) > 1:
                    print(f"  ({route} {kind}: events per upload {sorted(counts)})")
                a, b = statistics.median(without), statistics.median(with_)
                events = max(counts)  # a retried PUT counts again: the most is shown
                print(f"| {route} | {size // MIB} MiB | {kind} | {events} | {size // events // 1024} KiB "
                      f"| {a * 1000:.1f} ms | {b * 1000:.1f} ms | {b / a if a else float('nan'):.3f} |")
    finally:
        sink.terminate()
        sink.wait(10)


if __name__ == "__main__":
    main()
