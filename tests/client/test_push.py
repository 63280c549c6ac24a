"""The SDK's push (client.watch, Job.wait(push=True), the CLI's --wait) against the real local
runner, its push gateway reached through a proxy the tests can cut."""
from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from image_jobs import Client, Job, PushUnavailable
from tests.client.conftest import token_for
from tests.conftest import ROOT, free_port
from tests.images import jpeg
from tests.local_runner import BACKENDS, dedicated_runner, runner_on
from tests.proxy import TcpProxy

CLI = Path(sys.executable).with_name("image-jobs")


@pytest.fixture(scope="module", params=BACKENDS)
def stack(request):
    """A runner on each backend, its push gateway behind a proxy of its own."""
    proxy = TcpProxy(free_port())
    with runner_on(request.param, request, PUSH_PORT=str(proxy.target[1]),
                   PUSH_URL=f"ws://127.0.0.1:{proxy.port}") as started:
        yield started, proxy
    proxy.down()


@pytest.fixture(scope="module")
def runner(stack):
    return stack[0]


@pytest.fixture(scope="module")
def push_proxy(stack):
    return stack[1]
ORDER = ["queued", "processing", "ready"]


class Watching:
    """A watch iterated in a thread, keeping (job_id, status) of every update it yields."""

    def __init__(self, client: Client, jobs=None):
        self.watch = client.watch(jobs)
        self.updates: list[tuple[str, str]] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for job in self.watch:
                self.updates.append((job.job_id, job.status))
        except BaseException as exc:
            self.error = exc

    def connected(self, count: int = 1, timeout: float = 20) -> None:
        end = time.monotonic() + timeout
        while self.watch.connects < count:
            assert self.error is None, self.error
            if time.monotonic() > end:
                pytest.fail(f"the watch did not connect {count} time(s)")
            time.sleep(0.05)

    def statuses(self, job_id: str) -> list[str]:
        return [status for jid, status in self.updates if jid == job_id]

    def until(self, done, timeout: float = 120) -> None:
        end = time.monotonic() + timeout
        while not done():
            assert self.error is None, self.error
            if time.monotonic() > end:
                pytest.fail(f"timed out; got {self.updates}")
            time.sleep(0.05)


@pytest.fixture
def requests_sent():
    """An httpx client whose every request is recorded."""
    sent: list[httpx.Request] = []
    http = httpx.Client(timeout=30, event_hooks={"request": [sent.append]})
    yield http, sent
    http.close()


def test_twenty_concurrent_uploads_over_one_socket_bring_every_status_of_every_job_in_order(
        runner, owner, push_proxy):
    with Client(runner.api, token_for(owner)) as client:
        accepted = push_proxy.accepted
        watching = Watching(client)  # every job of the owner
        watching.connected()
        with ThreadPoolExecutor(20) as pool:
            jobs = list(pool.map(lambda _: client.upload(jpeg()), range(20)))
        ids = {job.job_id for job in jobs}
        watching.until(lambda: all("ready" in watching.statuses(i) for i in ids))
        watching.watch.close()
        # Every status of every job reached the socket; a late one (two senders, at least
        # once) behind a newer state was dropped, so what was yielded never goes back.
        assert watching.watch.received >= 60
        for job_id in ids:
            statuses = watching.statuses(job_id)
            assert statuses[-1] == "ready" and statuses == [s for s in ORDER if s in statuses], statuses
        assert watching.watch.connects == 1 and push_proxy.accepted == accepted + 1


def test_a_cut_socket_is_reconnected_and_a_get_brings_what_it_missed(runner, owner, push_proxy):
    with Client(runner.api, token_for(owner), max_attempts=30) as client:
        # Direct uploads wait for their file: nothing happens to these jobs until it is sent.
        files = [jpeg(400 + i, 300) for i in range(5)]
        jobs = [Job._accepted(client, client.request("POST", "/api/v1/uploads", json={
            "content_type": "image/jpeg", "size": len(data), "method": "PUT",
            "sha256": base64.b64encode(hashlib.sha256(data).digest()).decode()})) for data in files]
        assert {job.status for job in jobs} == {"awaiting_upload"}
        watching = Watching(client, jobs)
        watching.connected()
        push_proxy.down()  # every socket cut, new ones refused
        try:
            for job, data in zip(jobs, files):  # every job ends while the watch has no socket
                # Another object of the job: resume() reads it until it has its file, and the
                # watched ones must learn only from the watch.
                client.resume(client.job(job.job_id), data)
                with Client(runner.api, token_for(owner)) as other:
                    assert other.job(job.job_id).wait(deadline=90).ready
            assert watching.watch.connects == 1 and not any(job.ready for job in jobs)
        finally:
            push_proxy.up()
        watching.thread.join(90)
        assert not watching.thread.is_alive() and watching.error is None
        assert watching.watch.connects >= 2
        assert all(job.ready and watching.statuses(job.job_id)[-1] == "ready" for job in jobs)


def test_watch_ends_once_every_named_job_is_finished_and_drops_nothing_new(runner, owner):
    with Client(runner.api, token_for(owner)) as client:
        jobs = [client.upload(jpeg()) for _ in range(3)]
        seen = [(job.job_id, job.status) for job in client.watch(jobs, deadline=90)]
        assert all(job.ready for job in jobs)
        for job in jobs:
            statuses = [s for jid, s in seen if jid == job.job_id]
            assert statuses[-1] == "ready" and len(statuses) == len(set(statuses))  # no repeats


def test_job_wait_with_push_polls_once_and_learns_the_rest_from_the_socket(runner, owner, requests_sent):
    http, sent = requests_sent
    with Client(runner.api, token_for(owner), http=http) as client:
        job = client.upload(jpeg())
        before = len(sent)
        statuses = []
        job.wait(deadline=90, push=True, on_status=lambda j: statuses.append(j.status))
        assert job.ready and statuses[-1] == "ready"
        gets = [r for r in sent[before:] if "/image-jobs/" in r.url.path]
        assert [r.url.path for r in sent[before:] if r.url.path.endswith("/push")] == ["/api/v1/push"]
        assert len(gets) == 1 and "prefer" not in gets[0].headers  # one plain GET, no held polls


def test_with_the_socket_refused_job_wait_with_push_falls_back_to_polling(runner, owner, push_proxy):
    push_proxy.down()
    try:
        with Client(runner.api, token_for(owner), max_attempts=2) as client:
            job = client.upload(jpeg())
            assert job.wait(deadline=90, push=True).ready
            with pytest.raises(PushUnavailable):
                list(client.watch([client.upload(jpeg())]))
    finally:
        push_proxy.up()


def test_where_the_stage_has_no_push_waits_poll_and_watch_says_so(owner):
    with dedicated_runner(LOCAL_COMPONENTS="api,worker,sweeper") as api:
        with Client(api, token_for(owner)) as client:
            job = client.upload(jpeg())
            with pytest.raises(PushUnavailable):
                list(client.watch([job]))
            assert job.wait(deadline=90, push=True).ready


def test_the_cli_waits_for_many_files_over_one_socket(runner, owner, push_proxy, tmp_path):
    assert CLI.exists(), "the venv has no image-jobs entry point: is clients/python installed?"
    names = []
    for i in range(6):
        (tmp_path / f"p{i}.jpg").write_bytes(jpeg())
        names.append(f"p{i}.jpg")
    accepted = push_proxy.accepted
    env = {**os.environ, "IMAGE_JOBS_URL": runner.api, "IMAGE_JOBS_TOKEN": token_for(owner),
           "PYTHONPATH": str(ROOT / "clients" / "python" / "src")}  # this tree's SDK
    done = subprocess.run([str(CLI), "upload", *names, "--wait", "--parallel", "6"], cwd=tmp_path, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(": ready ") == 6
    assert push_proxy.accepted == accepted + 1


def test_a_job_whose_messages_are_all_lost_is_still_learnt_by_a_get_when_quiet(runner, owner, monkeypatch):
    """A message may be lost with the socket still open (the service sheds fan-out under
    load): a job quiet for QUIET_SECONDS is read by GET."""
    import image_jobs.push as push

    monkeypatch.setattr(push, "QUIET_SECONDS", 0.5)
    monkeypatch.setattr(push.Watch, "_take", lambda self, frame: None)  # every message lost
    with Client(runner.api, token_for(owner)) as client:
        jobs = [client.upload(jpeg()) for _ in range(2)]
        finished = [job for job in client.watch(jobs, deadline=60)]
        assert all(job.ready for job in jobs) and {j.job_id for j in finished if j.ready} == {j.job_id for j in jobs}
