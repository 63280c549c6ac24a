"""`image-jobs` run the way a script runs it: the installed entry point in a subprocess, set up by
the environment, read by its exit code, stdout and stderr."""
from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from PIL import Image

from tests.client.conftest import noisy_png, token_for
from tests.images import jpeg

CLI = Path(sys.executable).with_name("image-jobs")


@pytest.fixture
def cli(runner, owner, tmp_path):
    """Runs the CLI in tmp_path with IMAGE_JOBS_URL and IMAGE_JOBS_TOKEN set, stdin closed."""
    assert CLI.exists(), "the venv has no image-jobs entry point: is clients/python installed?"

    def run(*args: str, env: dict | None = None, stderr=subprocess.PIPE) -> subprocess.CompletedProcess:
        full = {**os.environ, "IMAGE_JOBS_URL": runner.api, "IMAGE_JOBS_TOKEN": token_for(owner),
                **(env or {})}
        full = {k: v for k, v in full.items() if v is not None}
        return subprocess.run([str(CLI), *args], cwd=tmp_path, env=full, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=180)

    return run


def json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def test_upload_wait_out_json_gives_one_job_per_line_and_the_files(cli, tmp_path):
    (tmp_path / "small.jpg").write_bytes(jpeg(1600, 1200))
    (tmp_path / "big.png").write_bytes(noisy_png())  # > 4 MiB: the direct route
    done = cli("upload", "small.jpg", "big.png", "--out", "renditions", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == ""  # not a terminal: no progress at all
    small, big = json_lines(done.stdout)  # in the order given
    assert small["status"] == big["status"] == "ready" and small["job_id"] != big["job_id"]
    assert small["renditions"]["display"]["width"] == 1280 and big["renditions"]["display"]["height"] == 1024
    assert sorted(p.name for p in (tmp_path / "renditions").iterdir()) == [
        "big.display.jpg", "big.thumb.jpg", "big.thumb_512.jpg",
        "small.display.jpg", "small.thumb.jpg", "small.thumb_512.jpg"]


def test_a_failed_job_prints_its_code_and_the_exit_code_is_1(cli, tmp_path):
    whole = io.BytesIO()
    Image.effect_noise((900, 700), 60).convert("RGB").save(whole, "JPEG", quality=95)
    (tmp_path / "cut.jpg").write_bytes(whole.getvalue()[: len(whole.getvalue()) // 2])
    (tmp_path / "fine.jpg").write_bytes(jpeg())
    done = cli("upload", "cut.jpg", "fine.jpg", "--wait")
    assert done.returncode == 1
    cut, fine = done.stdout.splitlines()
    assert cut.startswith("cut.jpg: failed invalid_image ")
    assert fine.startswith("fine.jpg: ready ")


def test_a_refused_file_prints_its_code_and_the_exit_code_is_1(cli, tmp_path):
    (tmp_path / "notes.txt").write_text("not an image")
    done = cli("upload", "notes.txt", "--json")
    assert done.returncode == 1
    (problem,) = json_lines(done.stdout)  # stdout stays JSON: the problem, for that line
    assert problem["code"] == "unsupported_format" and problem["status"] == 415
    assert "notes.txt: unsupported_format" in done.stderr


def test_status_cancel_and_delete_take_an_id_or_a_url(cli, runner, tmp_path):
    (tmp_path / "a.jpg").write_bytes(jpeg())
    done = cli("upload", "a.jpg", "--json")  # no --wait: accepted is enough
    assert done.returncode == 0, done.stderr
    (accepted,) = json_lines(done.stdout)
    job_id = accepted["job_id"]
    url = f"{runner.api}/api/v1/image-jobs/{job_id}"
    assert accepted["status"] in ("queued", "processing", "ready")
    assert set(accepted) >= {"created_at", "expires_at"}  # GET's shape, not the 202's

    waited = cli("status", url, "--wait", "--json")
    assert waited.returncode == 0 and json_lines(waited.stdout)[0]["status"] == "ready"
    shown = cli("status", job_id)
    assert shown.returncode == 0 and shown.stdout.startswith(f"{job_id}: ready {job_id}")
    refused = cli("cancel", job_id)
    assert refused.returncode == 1 and "job_finished" in refused.stdout
    deleted = cli("delete", url)
    assert deleted.returncode == 0 and deleted.stdout.strip() == f"{url}: deleted"
    gone = cli("status", job_id, "--json")
    assert gone.returncode == 1 and json_lines(gone.stdout)[0]["code"] == "job_not_found"


def test_cancel_prints_the_cancelled_job(cli, runner, owner):
    import httpx

    created = httpx.post(f"{runner.api}/api/v1/uploads", json={"content_type": "image/png", "size": 10},
                         headers={"Authorization": f"Bearer {token_for(owner)}"})
    job_id = created.json()["job_id"]
    done = cli("cancel", job_id, "--json")
    assert done.returncode == 0 and json_lines(done.stdout)[0]["status"] == "cancelled"


def test_a_deadline_before_the_job_finishes_exits_3_with_how_to_resume(cli, tmp_path):
    (tmp_path / "a.jpg").write_bytes(jpeg())
    done = cli("upload", "a.jpg", "--deadline", "0")  # the first poll is 2 s away
    assert done.returncode == 3
    assert "unfinished; resume with: image-jobs status http" in done.stdout


def test_no_token_is_a_usage_error(cli, tmp_path):
    (tmp_path / "a.jpg").write_bytes(jpeg())
    done = cli("upload", "a.jpg", env={"IMAGE_JOBS_TOKEN": None})
    assert done.returncode == 2 and "IMAGE_JOBS_TOKEN" in done.stderr


def test_flags_win_over_the_environment(cli, runner, owner, tmp_path):
    (tmp_path / "a.jpg").write_bytes(jpeg())
    done = cli("--url", runner.api, "upload", "a.jpg", "--token", token_for(owner),
               env={"IMAGE_JOBS_URL": "http://127.0.0.1:9", "IMAGE_JOBS_TOKEN": "wrong"})
    assert done.returncode == 0, done.stdout + done.stderr


def on_a_terminal(cli, *args: str) -> tuple[subprocess.CompletedProcess, str]:
    """Runs the CLI with stderr on a pseudo-terminal: its answer and what the screen showed."""
    leader, follower = pty.openpty()
    screen = []

    def read():
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the other side closed
                return
            if not chunk:
                return
            screen.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    done = cli(*args, env={"COLUMNS": "120", "TERM": "xterm-256color"}, stderr=follower)
    os.close(follower)
    reader.join(5)
    os.close(leader)
    return done, b"".join(screen).decode(errors="replace")


def test_progress_shows_on_a_terminal_and_results_stay_on_stdout(cli, tmp_path):
    (tmp_path / "a.jpg").write_bytes(jpeg())
    done, shown = on_a_terminal(cli, "upload", "a.jpg", "--wait")
    assert done.returncode == 0
    assert "a.jpg" in shown and "ready" in shown and "kB" in shown  # name, status, bytes sent
    assert done.stdout.startswith("a.jpg: ready ")


def test_ctrl_c_while_waiting_exits_130_and_says_how_to_resume(runner, owner, tmp_path):
    import signal
    import time

    from tests.client.conftest import jobs_of

    (tmp_path / "a.jpg").write_bytes(jpeg())
    env = {**os.environ, "IMAGE_JOBS_URL": runner.api, "IMAGE_JOBS_TOKEN": token_for(owner)}
    # --no-waits --no-push: the contract's schedule, so the job is still queued when Ctrl-C comes.
    process = subprocess.Popen([str(CLI), "upload", "a.jpg", "--wait", "--no-waits", "--no-push"], cwd=tmp_path, env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    deadline = time.monotonic() + 30
    while not jobs_of(runner, owner):  # uploaded: it now sleeps out Retry-After before its first poll
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stdout + stderr
    assert stdout.startswith("a.jpg: queued, unfinished; resume with: image-jobs status http")
    location = stdout.split("image-jobs status ", 1)[1].split()[0]
    resumed = subprocess.run([str(CLI), "status", location, "--wait"], env=env, capture_output=True,
                             text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert resumed.returncode == 0 and " ready " in resumed.stdout


def test_a_multipart_upload_shows_a_bar_per_part_on_a_terminal(cli, tmp_path):
    from tests.e2e.test_upload_methods import padded_jpeg

    (tmp_path / "big.jpg").write_bytes(padded_jpeg(17 * 1024 * 1024))  # 3 parts: 8, 8 and 1 MiB
    done, shown = on_a_terminal(cli, "upload", "big.jpg")
    assert done.returncode == 0, done.stdout
    for number in (1, 2, 3):
        assert f"big.jpg part {number}" in shown
    assert shown.count("stored") >= 3 and "part 4" not in shown


def test_the_same_command_after_the_saved_job_was_cancelled_uploads_the_file_anew(cli, runner, owner, tmp_path,
                                                                                   monkeypatch):
    """The state saved for a file names a job that ended without it: the file goes up as a new
    job (with a new key), never the dead job printed as the upload's result."""
    from image_jobs import Client
    from image_jobs.upload_state import UploadState

    (tmp_path / "a.jpg").write_bytes(jpeg())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with Client(runner.api, token_for(owner)) as client:
        made = client.request("POST", "/api/v1/uploads", json={
            "content_type": "image/jpeg", "size": (tmp_path / "a.jpg").stat().st_size, "method": "PUT"})
        dead = client.job(made.headers["location"]).cancel()
    UploadState(runner.api, tmp_path / "a.jpg").save(idempotency_key="k-dead", location=dead.location)
    done = cli("upload", "a.jpg", "--wait", "--json", env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stdout + done.stderr
    (job,) = json_lines(done.stdout)
    assert job["job_id"] != dead.job_id and job["status"] == "ready"
    assert not list((tmp_path / "cache" / "image-jobs" / "uploads").glob("*.json"))  # forgotten


def test_upload_takes_a_focus_and_shows_the_jobs(cli, tmp_path):
    (tmp_path / "wide.jpg").write_bytes(jpeg(900, 300))
    done = cli("upload", "wide.jpg", "--focus", "0.9,0.25", "--wait", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    (job,) = json_lines(done.stdout)
    assert job["focus"] == {"x": 0.9, "y": 0.25, "source": "client"}
    shown = cli("status", job["job_id"])
    assert shown.stdout == f"{job['job_id']}: ready {job['job_id']} focus=0.9,0.25 (client)\n"
    refused = cli("upload", "wide.jpg", "--focus", "1.5,0")
    assert refused.returncode == 1 and "invalid_request" in refused.stdout + refused.stderr
    usage = cli("upload", "wide.jpg", "--focus", "half")
    assert usage.returncode == 2 and "X,Y" in usage.stderr
