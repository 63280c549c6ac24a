"""prepare_upload (issue 52): the job made, its bytes sent as plain HTTP requests by another
program (a phone's background uploader), the upload finished from another process. Against
the real local runner: a plain urllib client SIGKILLed while a part is on its way, another
such process sending what storage lacks, and complete() from an SDK object restored from the
saved dict."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from image_jobs import Client, PreparedUpload
from tests.client.conftest import token_for
from tests.e2e.test_upload_methods import BUCKET, ORIGINALS, padded_jpeg, s3

SENDER = Path(__file__).with_name("plain_sender.py")
SIZE = 17 * 1024 * 1024  # three parts: 8 MiB, 8 MiB and the rest


def sender(saved: dict, photo: Path, tmp_path: Path, name: str) -> subprocess.Popen:
    """The plain HTTP client, given only the saved dict (as JSON) and the file."""
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(saved))
    return subprocess.Popen([sys.executable, str(SENDER), str(path), str(photo)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)


def said(process: subprocess.Popen, expected: str) -> None:
    """Wait for the sender's next line, which must start with `expected`."""
    line = process.stdout.readline()
    if not line:  # it ended: say why
        process.wait(30)
    assert line.startswith(expected), (line, "" if line else process.stderr.read())


def test_a_multipart_upload_sent_by_plain_processes_killed_half_way_is_completed_from_the_saved_dict(
        runner, owner, tmp_path):
    photo = tmp_path / "big.jpg"
    photo.write_bytes(padded_jpeg(SIZE))
    with Client(runner.api, token_for(owner)) as backend:
        prepared = backend.prepare_upload(photo, metadata={"album": "trip"})
        saved = json.loads(json.dumps(prepared.to_dict()))  # JSON, as an app would keep it
    assert prepared.job.status == "awaiting_upload" and prepared.method == "multipart"
    assert [(r.part_number, r.offset, r.length) for r in prepared.requests] == [
        (1, 0, 8 << 20), (2, 8 << 20, 8 << 20), (3, 16 << 20, SIZE - (16 << 20))]

    first = sender(saved, photo, tmp_path, "first")
    first.stdin.write("go\n")
    said(first, "sending 1")
    said(first, "stored 1 200")  # part 1 has landed
    first.stdin.write("go\n")
    said(first, "sending 2")  # part 2 is on its way: killed now, part 3 never started
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    job_id = prepared.job.job_id
    (started,) = s3(runner).list_multipart_uploads(Bucket=BUCKET, Prefix=ORIGINALS + job_id)["Uploads"]
    stored = {p["PartNumber"] for p in s3(runner).list_parts(
        Bucket=BUCKET, Key=ORIGINALS + job_id, UploadId=started["UploadId"]).get("Parts", [])}
    assert 1 in stored and 3 not in stored

    # Another process of the backend: what is left, freshly signed, for another plain client.
    with Client(runner.api, token_for(owner)) as again:
        left = PreparedUpload.from_dict(saved, again)
        assert {r.part_number for r in left.renew()} == {1, 2, 3} - stored
        rest = json.loads(json.dumps(left.to_dict()))
    second = sender(rest, photo, tmp_path, "second")
    out, err = second.communicate("go\n" * len(rest["requests"]), timeout=120)
    assert second.returncode == 0, err
    assert [line.split()[:2] for line in out.splitlines() if line.startswith("stored")] == [
        ["stored", str(r["partNumber"])] for r in rest["requests"]]

    with Client(runner.api, token_for(owner)) as last:
        job = last.prepared(saved).complete()  # the first saved dict: completion needs no URLs
        assert job.status in ("queued", "processing", "ready")
        assert job.wait(180).status == "ready"
        assert job.metadata == {"album": "trip"} and job.source["bytes"] == SIZE


def test_a_single_put_prepared_then_sent_by_a_plain_process_is_taken_up_by_complete(runner, owner, tmp_path):
    photo = tmp_path / "small.jpg"
    photo.write_bytes(padded_jpeg(300_000))
    with Client(runner.api, token_for(owner)) as backend:
        prepared = backend.prepare_upload(photo, renditions=[])  # display and thumb alone
    (put,) = prepared.requests
    assert (put.method, put.offset, put.length) == ("PUT", 0, 300_000)
    assert "x-amz-checksum-sha256" in {k.lower() for k in put.headers}  # storage refuses other bytes
    plain = sender(prepared.to_dict(), photo, tmp_path, "put")
    out, err = plain.communicate("go\n", timeout=60)
    assert plain.returncode == 0 and "stored 1 200" in out, err
    with Client(runner.api, token_for(owner)) as last:
        job = PreparedUpload.from_dict(prepared.to_dict(), last).complete()
        assert job.status != "awaiting_upload"  # storage's event has moved it
        assert set(job.wait(120).renditions) == {"display", "thumb"}
