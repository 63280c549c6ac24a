"""The SDK's choice of method by size, and a multipart upload cut at 90 % through the TCP
proxy that resumes with only the parts storage does not hold."""
from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest

from image_jobs import Client, ConnectionFailed
from tests.client.conftest import token_for
from tests.e2e.test_upload_methods import BUCKET, ORIGINALS, padded_jpeg, s3
from tests.proxy import TcpProxy

SIZE = 40_000_000


class ToProxy(httpx.HTTPTransport):
    """Sends storage's requests through the proxy (moto checks no signature, so no Host pin)."""

    def __init__(self, storage_port: int, proxy: TcpProxy):
        super().__init__()
        self._storage_port, self._proxy = storage_port, proxy

    def handle_request(self, request):
        if request.url.port == self._storage_port:
            request.url = request.url.copy_with(port=self._proxy.port)
        return super().handle_request(request)


@pytest.mark.parametrize("size,method", [(5 * 1024 * 1024, "PUT"), (17 * 1024 * 1024, "multipart")])
def test_upload_picks_put_then_multipart_by_size_and_answers_once_the_job_has_its_file(runner, owner, size, method):
    """Every byte stored, the job has left awaiting_upload when upload() answers, and a refresh
    agrees: a multipart job is queued by its completion, a single PUT's by storage's event,
    which the upload waits for, held (issue 47, 10 d)."""
    import json

    sent: list[httpx.Request] = []
    with httpx.Client(timeout=30, event_hooks={"request": [sent.append]}) as http, \
            Client(runner.api, token_for(owner), http=http) as client:
        job = client.upload(padded_jpeg(size))
        (create,) = [r for r in sent if r.url.path == "/api/v1/uploads"]
        assert json.loads(create.content)["method"] == method
        assert job.status in ("queued", "processing", "ready")
        assert job.refresh().status in ("queued", "processing", "ready")
        assert job.wait(120).status == "ready"


def test_a_40_mb_upload_cut_at_90_percent_resumes_with_only_the_missing_parts(runner, owner, capsys):
    data = padded_jpeg(SIZE)
    proxy = TcpProxy(urlsplit(runner.aws).port)
    http = httpx.Client(transport=ToProxy(urlsplit(runner.aws).port, proxy), timeout=60)
    client = Client(runner.api, token_for(owner), http=http, max_attempts=1)
    cut = {"done": False}
    parts_sent = []

    def progress(sent, total):
        if not cut["done"] and sent >= 0.9 * total:
            cut["done"] = True
            proxy.down()

    with pytest.raises(ConnectionFailed) as failed:
        client.upload(data, on_progress=progress)
    sent_before = client.bytes_to_storage
    proxy.up()
    job = failed.value.job
    job_id = job.location.rsplit("/", 1)[-1]
    # What storage holds after the cut: the parts finished before it (up to four were in
    # flight at once, so several may have been cut at 90 % of the bytes sent).
    # A client that retries as a default one does (the first gave up at the cut on purpose).
    resumer = Client(runner.api, token_for(owner), http=http)
    described = resumer.request("GET", job.location + "/upload").json()
    missing = {p["part_number"]: p["size"] for p in described["parts"] if not p["stored"]}
    sent_parts = {}

    def part_progress(number, sent, total):
        if sent == total:
            sent_parts[number] = total

    resumer.resume(job, data, on_part_progress=part_progress)
    assert resumer.job(job_id).wait(180).status == "ready"
    resumed = resumer.bytes_to_storage
    assert 0 < sum(missing.values()) < SIZE
    # Only what was cut: no part stored at the cut is sent again, nor the whole file. A part
    # whose bytes had all reached storage before the cut may still be stored after this
    # description was read (storage finishes a request it has whole): resume's own reading
    # then skips it too, so the parts sent are a subset of those missing here.
    assert sent_parts and set(sent_parts) <= set(missing)
    assert resumed == sum(sent_parts.values())
    parts_sent.extend(sent_parts)
    listed = s3(runner).list_objects_v2(Bucket=BUCKET, Prefix=ORIGINALS + job_id)["Contents"]
    assert [o["Key"] for o in listed] == [ORIGINALS + job_id]
    with capsys.disabled():
        print(f"\n40 MB cut at 90 %: {sent_before:,} bytes before the cut, {resumed:,} on resume "
              f"(parts {sorted(set(parts_sent))}), {sent_before + resumed:,} in all for {SIZE:,}")
    proxy.down()
    http.close()


# -- the command line: Ctrl-C during a multipart upload, then the same command again ------------
PART = 8 * 1024 * 1024
HEADS = 64 * 1024  # request lines and headers of every storage request, generously


@pytest.fixture(scope="module")
def counted():
    """A runner of its own whose presigned URLs go through a proxy that counts what clients
    send to storage: the bytes a resume saves, measured outside the CLI."""
    from tests.local_runner import dedicated_runner, free_port

    aws_port = free_port()
    proxy = TcpProxy(aws_port)
    with dedicated_runner(aws_port, PUBLIC_S3_ENDPOINT_URL=f"http://127.0.0.1:{proxy.port}") as api:
        yield api, f"http://127.0.0.1:{aws_port}", proxy
    proxy.down()


def test_ctrl_c_during_a_multipart_upload_then_the_same_command_sends_only_the_missing_parts(
        counted, owner, tmp_path, capsys):
    import json
    import os
    import signal
    import subprocess
    import time

    from tests.client.test_cli import CLI

    api, aws, proxy = counted
    (tmp_path / "big.jpg").write_bytes(padded_jpeg(SIZE))  # 5 parts: 4 of 8 MiB and the rest
    cache = tmp_path / "cache"
    env = {**os.environ, "IMAGE_JOBS_URL": api, "IMAGE_JOBS_TOKEN": token_for(owner),
           "XDG_CACHE_HOME": str(cache)}
    start = proxy.bytes_up
    # A slow uplink from the start (64 KiB each 50 ms a connection: 6 s a part) until the CLI
    # says it has set its stop, so no part can start between the signal and the stop however
    # loaded the machine. Slowed only once 10 % had gone, a test held off the CPU for a moment
    # saw loopback carry all five parts before it sent the signal.
    proxy.pause = SLOW
    try:
        cut = subprocess.Popen([str(CLI), "upload", "big.jpg"], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for_bytes(proxy, start + SIZE // 10, cut)  # the first four parts are on their way
        cut.send_signal(signal.SIGINT)
        assert "Ctrl-C again to stop at once" in cut.stderr.readline()
        proxy.pause = 0.0
        stdout, stderr = cut.communicate(timeout=60)
    finally:
        proxy.pause = 0.0
    before = settled(proxy) - start
    assert cut.returncode == 130, stdout + stderr
    assert stdout.startswith("big.jpg: awaiting_upload, interrupted; resume with the same command"), stdout
    (saved,) = (cache / "image-jobs" / "uploads").glob("*.json")
    state = json.loads(saved.read_text())
    assert str(saved) in stdout and state["file"] == str((tmp_path / "big.jpg").resolve())
    job_id = state["location"].rsplit("/", 1)[-1]
    (started,) = s3(runner_at(aws)).list_multipart_uploads(Bucket=BUCKET, Prefix=ORIGINALS + job_id)["Uploads"]
    stored = s3(runner_at(aws)).list_parts(Bucket=BUCKET, Key=ORIGINALS + job_id,
                                           UploadId=started["UploadId"]).get("Parts", [])
    stored_bytes = sum(p["Size"] for p in stored)
    # The parts in flight were finished, none started after Ctrl-C: nothing sent is lost.
    assert 0 < len(stored) < 5 and stored_bytes <= before <= stored_bytes + HEADS

    again = subprocess.run([str(CLI), "upload", "big.jpg", "--wait", "--json"], cwd=tmp_path, env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
    assert again.returncode == 0, again.stdout + again.stderr
    (job,) = [json.loads(line) for line in again.stdout.splitlines()]
    assert job["job_id"] == job_id and job["status"] == "ready"
    assert not saved.exists()  # done: the next upload of this file is a new one
    total = proxy.bytes_up - start
    resumed = total - before
    assert SIZE <= total <= SIZE + PART + HEADS
    assert resumed <= SIZE - stored_bytes + HEADS  # the stored parts were not sent again
    listed = s3(runner_at(aws)).list_objects_v2(Bucket=BUCKET, Prefix=ORIGINALS + job_id)["Contents"]
    assert [o["Key"] for o in listed] == [ORIGINALS + job_id]
    with capsys.disabled():
        print(f"\nCLI, 40 MB, Ctrl-C at 10 %: {before:,} bytes before ({len(stored)} parts stored), "
              f"{resumed:,} on resume, {total:,} in all for {SIZE:,} ({total / SIZE:.4f} x)")


SLOW = 0.05  # the proxy's pause after each 64 KiB a connection sends up


def wait_for_bytes(proxy: TcpProxy, count: int, process) -> None:
    import time

    deadline = time.monotonic() + 60
    while proxy.bytes_up < count:
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        time.sleep(0.005)


def settled(proxy: TcpProxy) -> int:
    """The proxy's count once what a dead client left in the sockets' buffers has gone up."""
    import time

    last = -1
    while proxy.bytes_up != last:
        last = proxy.bytes_up
        time.sleep(0.5)
    return last


def runner_at(aws: str):
    """What tests.e2e's s3() needs of a runner."""
    from types import SimpleNamespace

    return SimpleNamespace(aws=aws, s3=aws)  # s3: the storage endpoint, on the embedded stack the same


def test_a_stop_during_a_put_ends_it_at_once_and_resume_sends_the_file_again(runner, owner):
    """A PUT cannot be resumed half-way: stop ends it between two chunks (UploadStopped with
    the job), and resume() sends it whole, freshly signed."""
    import threading

    from image_jobs import UploadStopped

    data = padded_jpeg(6 * 1024 * 1024)
    stop = threading.Event()
    with Client(runner.api, token_for(owner)) as client:
        with pytest.raises(UploadStopped) as stopped:
            client.upload(data, stop=stop, on_progress=lambda sent, total: sent >= total // 2 and stop.set(),
                          keep_stopped=True)
        job = stopped.value.job
        assert client.bytes_to_storage < len(data)  # the rest never went
        assert job.refresh().status == "awaiting_upload"
        client.resume(job, data)
        assert job.wait(120).status == "ready"


def test_a_stopped_upload_cancels_its_job_so_it_no_longer_counts_against_the_owner(runner, owner):
    """Stopped, and not kept to resume: its job is cancelled at once, not left awaiting its
    file (one of the owner's 20 unfinished jobs) until its deadline (issue 47, 10 f)."""
    import threading

    from image_jobs import UploadStopped

    data = padded_jpeg(6 * 1024 * 1024)
    stop = threading.Event()
    with Client(runner.api, token_for(owner)) as client:
        with pytest.raises(UploadStopped) as stopped:
            client.upload(data, stop=stop, on_progress=lambda sent, total: sent >= total // 2 and stop.set())
        assert stopped.value.job.status == "cancelled"
        assert client.job(stopped.value.job.job_id).refresh().status == "cancelled"
        assert [j.status for j in client.jobs()] == ["cancelled"]


def test_the_cli_keeps_an_upload_by_api_file_size_and_mtime(tmp_path, monkeypatch):
    import os

    from image_jobs.upload_state import UploadState

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    photo = tmp_path / "a.jpg"
    photo.write_bytes(b"x" * 100)
    state = UploadState("http://api.example/", photo)
    assert state.load() == {}
    state.save(idempotency_key="k")
    state.save(location="/api/v1/image-jobs/j")
    assert UploadState("http://api.example", photo).load() == {  # the same upload
        "idempotency_key": "k", "location": "/api/v1/image-jobs/j", "file": str(photo.resolve())}
    assert UploadState("http://other.example", photo).load() == {}  # another API
    os.utime(photo, ns=(1, 1))
    assert UploadState("http://api.example", photo).load() == {}  # the file was touched since
    state.path.write_text("{half")
    assert state.load() == {}  # unreadable: start afresh
    state.forget()
    assert not state.path.exists()
    state.forget()  # nothing to forget is fine


def test_a_second_ctrl_c_stops_at_once_and_the_same_command_still_resumes(counted, owner, tmp_path, capsys):
    """The second Ctrl-C ends the process with the parts in flight cut: the saved key alone
    brings the same job back (a replay of POST /uploads marks the parts stored)."""
    import json
    import os
    import signal
    import subprocess
    import time

    from tests.client.test_cli import CLI

    api, aws, proxy = counted
    (tmp_path / "big.jpg").write_bytes(padded_jpeg(SIZE))
    env = {**os.environ, "IMAGE_JOBS_URL": api, "IMAGE_JOBS_TOKEN": token_for(owner),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    start = proxy.bytes_up
    proxy.pause = SLOW  # from the start, as above: the four parts take about 6 s
    try:
        cut = subprocess.Popen([str(CLI), "upload", "big.jpg", "--json"], cwd=tmp_path, env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for_bytes(proxy, start + SIZE // 10, cut)
        # Now nearly stalled (64 KiB a second a connection: a part takes two minutes), so the
        # parts in flight cannot finish however long a loaded machine takes between the two
        # signals: an exit within the timeout below is the second Ctrl-C's doing. (At 6 s a
        # part, a CI run once saw all four through before the CLI had read the second.)
        proxy.pause = 1.0
        cut.send_signal(signal.SIGINT)
        assert "Ctrl-C again to stop at once" in cut.stderr.readline()
        cut.send_signal(signal.SIGINT)
        stdout, stderr = cut.communicate(timeout=30)
        at_exit = proxy.bytes_up - start
    finally:
        proxy.pause = 0.0
    assert cut.returncode == 130, stdout + stderr
    # The CLI ended before the parts in flight were through the uplink. What it had written
    # into its sockets' buffers still reaches storage after it died (the kernel sends it: up
    # to whole parts on loopback, whose buffers grow to megabytes), so storage's count is not
    # the test; the proxy's at the exit is.
    assert at_exit < 4 * PART
    before = settled(proxy) - start

    again = subprocess.run([str(CLI), "upload", "big.jpg", "--wait", "--json"], cwd=tmp_path, env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
    assert again.returncode == 0, again.stdout + again.stderr
    (job,) = [json.loads(line) for line in again.stdout.splitlines()]
    assert job["status"] == "ready" and "upload" not in job
    from tests.client.conftest import jobs_of

    jobs = [item["pk"]["S"] for item in jobs_of(runner_at(aws), owner) if item["pk"]["S"].startswith("job#")]
    assert jobs == ["job#" + job["job_id"]]  # one job: the first run's
    total = proxy.bytes_up - start
    assert total <= SIZE + 4 * PART + HEADS  # at worst the four parts in flight, cut
    with capsys.disabled():
        print(f"\nCLI, 40 MB, Ctrl-C twice: {before:,} bytes before, {total - before:,} on resume, "
              f"{total:,} in all for {SIZE:,} ({total / SIZE:.4f} x)")
