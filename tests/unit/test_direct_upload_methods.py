"""POST /uploads with "method": "PUT" or "multipart" over the in-memory fakes: the upload each
answers, a multipart upload's state, resume and completion, and its abort on cancel, delete
and expiry."""
import base64
import hashlib
from datetime import timedelta


import pytest

from chalicelib.config import Settings
from chalicelib.domain.errors import InvalidRequest, JobFinished, JobNotFound
from chalicelib.domain.jobs import JobStatus
from chalicelib.domain.vocabulary import SweepOutcome
from chalicelib.usecases.results import UploadParts, UploadPut
from tests.images import jpeg
from tests.unit.test_sweeper_semantics import deliver, make_svc

PART = 4000  # the fakes take parts of any size; S3's 5 MiB floor is Settings._check's


@pytest.fixture
def use_cases():
    return make_svc(multipart_min_bytes=2 * PART, multipart_part_bytes=PART)


def big_jpeg():
    """A JPEG of several parts: noise does not compress."""
    import io
    import os

    from PIL import Image

    buffer = io.BytesIO()
    Image.frombytes("RGB", (200, 150), os.urandom(200 * 150 * 3)).save(buffer, "JPEG", quality=95)
    return buffer.getvalue()


def put_parts(use_cases, upload: UploadParts, data: bytes, numbers=None):
    job_upload = use_cases.ctx.objects.uploads
    upload_id = next(iter(job_upload))
    for part in upload.parts:
        if part.url is not None and (numbers is None or part.number in numbers):
            start = (part.number - 1) * upload.part_size
            use_cases.ctx.objects.put_part(upload_id, part.number, data[start:start + part.size])


def test_a_put_upload_is_pinned_to_type_length_and_checksum_and_ends_ready(use_cases):
    data = jpeg(800, 600)
    digest = base64.b64encode(hashlib.sha256(data).digest()).decode()
    accepted = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(data), method="PUT",
                                                      sha256=digest)
    upload = accepted.upload
    assert isinstance(upload, UploadPut)
    assert upload.headers == {"Content-Type": "image/jpeg", "Content-Length": str(len(data)),
                              "x-amz-checksum-sha256": digest}
    assert accepted.job.upload_method == "PUT" and accepted.job.status is JobStatus.AWAITING_UPLOAD
    use_cases.ctx.objects.put(accepted.job.original_key, data, "image/jpeg")  # the client's PUT
    assert deliver(use_cases) == ["ready"]


@pytest.mark.parametrize("fields,detail", [
    ({"method": "PATCH"}, "method must be"),
    ({"method": "PUT", "sha256": "not base64!"}, "sha256 must be"),
    ({"method": "PUT", "sha256": base64.b64encode(b"short").decode()}, "sha256 must be"),
    ({"method": "POST", "sha256": base64.b64encode(bytes(32)).decode()}, "PUT"),
    ({"method": "multipart", "size": 2 * PART - 1}, "at least"),
])
def test_bad_upload_options_are_400_and_leave_nothing(use_cases, fields, detail):
    size = fields.pop("size", 3 * PART)
    with pytest.raises(InvalidRequest, match=detail):
        use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", size, **fields)
    assert use_cases.ctx.jobs.items == {} and use_cases.ctx.objects.uploads == {}


def test_a_multipart_upload_gives_every_part_and_completes_from_the_parts_stored(use_cases):
    data = big_jpeg()
    accepted = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(data), method="multipart")
    upload = accepted.upload
    assert isinstance(upload, UploadParts) and upload.part_size == PART
    assert [p.size for p in upload.parts] == [PART] * (len(data) // PART) + [len(data) % PART]
    assert all(p.url and p.etag is None for p in upload.parts)
    put_parts(use_cases, upload, data)
    job = use_cases.direct_uploads.complete_upload("alice", accepted.job.job_id, None)
    assert use_cases.ctx.objects.objects[job.original_key] == (data, "image/jpeg")
    assert use_cases.ctx.objects.uploads == {}
    assert job.status is JobStatus.QUEUED  # the completion moved it: the file is there
    assert deliver(use_cases) == ["ready"]
    # A completion retried after a lost answer finds the job on its way.
    assert use_cases.direct_uploads.complete_upload("alice", job.job_id, None).status is JobStatus.READY


def test_a_resumed_upload_lists_the_stored_parts_and_fresh_urls_for_the_others(use_cases):
    data = big_jpeg()
    accepted = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(data), method="multipart")
    put_parts(use_cases, accepted.upload, data, numbers={1, 3})
    with pytest.raises(InvalidRequest, match="Parts missing.*: 2"):
        use_cases.direct_uploads.complete_upload("alice", accepted.job.job_id, None)
    resumed = use_cases.direct_uploads.current_upload("alice", accepted.job.job_id)
    assert [p.number for p in resumed.parts if p.etag] == [1, 3]
    assert all(p.url for p in resumed.parts if p.number not in (1, 3))
    put_parts(use_cases, resumed, data)
    listed = [(p.number, p.etag) for p in use_cases.ctx.objects.list_parts(
        accepted.job.original_key, accepted.job.multipart_upload_id)]
    use_cases.direct_uploads.complete_upload("alice", accepted.job.job_id, listed)
    assert use_cases.ctx.objects.objects[accepted.job.original_key][0] == data


def test_a_completion_naming_a_part_storage_does_not_hold_is_400(use_cases):
    data = big_jpeg()
    accepted = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(data), method="multipart")
    put_parts(use_cases, accepted.upload, data)
    with pytest.raises(InvalidRequest, match="Part 1"):
        use_cases.direct_uploads.complete_upload("alice", accepted.job.job_id, [(1, '"other"')])
    assert accepted.job.original_key not in use_cases.ctx.objects.objects


def test_a_replay_with_the_same_key_answers_the_same_upload_and_starts_no_other(use_cases):
    size = 3 * PART
    first = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", size, "k1", method="multipart")
    again = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", size, "k1", method="multipart")
    assert again.replayed and again.job.job_id == first.job.job_id
    assert again.job.multipart_upload_id == first.job.multipart_upload_id
    assert list(use_cases.ctx.objects.uploads) == [first.job.multipart_upload_id]
    assert [p.url for p in again.upload.parts] == [p.url for p in first.upload.parts]
    put = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 100, "k2", method="PUT")
    assert use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 100, "k2",
                                                  method="PUT").job.job_id == put.job.job_id


@pytest.mark.parametrize("end", ["cancel", "delete", "expiry"])
def test_a_cancel_delete_or_expiry_aborts_the_upload_and_leaves_no_parts(use_cases, end):
    data = big_jpeg()
    accepted = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(data), method="multipart")
    put_parts(use_cases, accepted.upload, data, numbers={1, 2})
    assert len(use_cases.ctx.objects.uploads[accepted.job.multipart_upload_id][2]) == 2
    job_id = accepted.job.job_id
    if end == "cancel":
        use_cases.manage.cancel("alice", job_id)
    elif end == "delete":
        use_cases.manage.delete("alice", job_id)
    else:
        use_cases.ctx.clock.advance(use_cases.ctx.settings.multipart_upload_ttl_seconds + use_cases.ctx.upload_grace.total_seconds() + 1)
        use_cases.sweeper.sweep()
        assert use_cases.ctx.jobs.items[job_id].error_code == "upload_missing"
    assert use_cases.ctx.objects.uploads == {}  # no upload, so no parts
    if end == "cancel":
        with pytest.raises(JobFinished):
            use_cases.direct_uploads.complete_upload("alice", job_id, None)


def test_the_upload_state_is_only_for_its_owner_and_while_awaiting_upload(use_cases):
    accepted = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 3 * PART, method="multipart")
    with pytest.raises(JobNotFound):
        use_cases.direct_uploads.current_upload("bob", accepted.job.job_id)
    use_cases.manage.cancel("alice", accepted.job.job_id)
    with pytest.raises(InvalidRequest, match="cancelled"):
        use_cases.direct_uploads.current_upload("alice", accepted.job.job_id)


@pytest.mark.parametrize("stored,code", [
    ("shorter", "invalid_image"),
    ("other bytes", "invalid_image"),
    ("png", "unsupported_format"),
])
def test_a_put_original_not_as_declared_ends_failed_never_ready(use_cases, stored, code):
    """What storage refuses on AWS and LocalStack, and moto stores: the worker checks again."""
    from tests.images import png

    data = jpeg(800, 600)
    digest = base64.b64encode(hashlib.sha256(data).digest()).decode()
    other = {"shorter": data[:-10], "other bytes": jpeg(800, 600, color=(1, 2, 3)), "png": png()}[stored]
    declared = len(other) if stored != "shorter" else len(data)
    sha = digest if stored == "other bytes" else None
    if stored == "other bytes":
        declared = len(data)
        other = other[:len(data)].ljust(len(data), b"\0")
    accepted = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", declared, method="PUT", sha256=sha)
    use_cases.ctx.objects.put(accepted.job.original_key, other, "image/jpeg")
    assert deliver(use_cases) == ["failed"]
    assert use_cases.ctx.jobs.items[accepted.job.job_id].error_code == code


# -- after the completion, before the event (issue 32, item 2) ---------------------------------


def completed(use_cases, key=None):
    """A multipart upload completed whose completion call ended before it could queue the job
    (its process died): storage lists no parts of it any more (S3: NoSuchUpload), and the job
    is still awaiting_upload until storage's event, or a repeated completion, moves it."""
    data = big_jpeg()
    accepted = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(data), key, method="multipart")
    put_parts(use_cases, accepted.upload, data)
    completed_in_storage(use_cases, accepted.job)
    return accepted, len(data)


def completed_in_storage(use_cases, job):
    """Storage completes the upload; the completion call dies before it can queue the job."""
    objects = use_cases.ctx.objects
    objects.complete_multipart(job.original_key, job.multipart_upload_id,
                               objects.list_parts(job.original_key, job.multipart_upload_id))
    assert use_cases.ctx.jobs.items[job.job_id].status is JobStatus.AWAITING_UPLOAD


def test_the_completion_queues_the_job_and_the_event_that_follows_makes_it_ready_once(use_cases):
    """The multipart completion knows the object exists: the job reads `queued` from its
    answer on, never `awaiting_upload` with every byte stored; storage's event then finds it
    queued, and the worker claims it once."""
    data = big_jpeg()
    accepted = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(data), method="multipart")
    put_parts(use_cases, accepted.upload, data)
    answer = use_cases.direct_uploads.complete_upload("alice", accepted.job.job_id, None)
    assert answer.status is JobStatus.QUEUED
    assert use_cases.ctx.jobs.items[accepted.job.job_id].status is JobStatus.QUEUED
    events = use_cases.ctx.backlog.take()
    assert len(events) == 1  # storage's own event, no second one
    again = events + events  # delivered twice, as SQS may
    assert [use_cases.worker.handle_object_created(e) for e in again] == ["ready", "duplicate"]
    job = use_cases.ctx.jobs.items[accepted.job.job_id]
    assert job.status is JobStatus.READY and job.attempt == 1


def test_a_completion_repeated_after_one_that_died_before_queueing_queues_the_job(use_cases):
    accepted, _ = completed(use_cases)
    answer = use_cases.direct_uploads.complete_upload("alice", accepted.job.job_id, None)
    assert answer.status is JobStatus.QUEUED
    assert deliver(use_cases) == ["ready"]


def test_the_upload_of_a_completed_multipart_upload_answers_the_job_before_its_event(use_cases):
    accepted, _ = completed(use_cases)
    answer = use_cases.direct_uploads.current_upload("alice", accepted.job.job_id)
    assert answer == use_cases.ctx.jobs.items[accepted.job.job_id]  # the job: nothing to send
    assert deliver(use_cases) == ["ready"]
    assert use_cases.direct_uploads.current_upload("alice", accepted.job.job_id).status is JobStatus.READY


def test_a_replay_of_a_completed_multipart_upload_answers_the_job_without_an_upload(use_cases):
    accepted, size = completed(use_cases, key="k1")
    again = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", size, "k1", method="multipart")
    assert again.replayed and again.job.job_id == accepted.job.job_id and again.upload is None
    assert use_cases.ctx.objects.uploads == {}  # the one started for the replay was aborted


def test_the_upload_of_an_aborted_multipart_upload_says_so(use_cases):
    data = big_jpeg()
    accepted = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(data), "k1", method="multipart")
    use_cases.ctx.objects.abort_multipart(accepted.job.original_key, accepted.job.multipart_upload_id)
    with pytest.raises(InvalidRequest, match="aborted"):
        use_cases.direct_uploads.current_upload("alice", accepted.job.job_id)
    with pytest.raises(InvalidRequest, match="aborted"):
        use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(data), "k1", method="multipart")


# -- part URLs sign their length (item 6) ------------------------------------------------------


def test_every_part_url_is_signed_for_its_planned_length(use_cases):
    data = big_jpeg()
    upload = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(data), method="multipart").upload
    assert [f"&length={p.size}&" in p.url for p in upload.parts] == [True] * len(upload.parts)
    assert upload.parts[-1].size == len(data) % PART


# -- an upload in flight at its deadline (item 11) ---------------------------------------------


@pytest.mark.parametrize("method", ["POST", "PUT", "multipart"])
def test_the_sweeper_waits_for_a_transfer_begun_before_the_deadline(use_cases, method):
    """The URLs expire at the deadline and storage checks expiry when a request arrives: the
    job is failed only once the largest transfer allowed has had time to arrive."""
    ctx = use_cases.ctx
    data = big_jpeg()
    job = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(data), method=method).job
    grace = ctx.upload_grace.total_seconds()
    # 50 MiB at 1 Mbit/s, the slowest uplink planned for (docs/contract.md).
    assert grace == 420 and job.sweep_at == job.upload_expires_at + ctx.upload_grace
    ctx.clock.now = job.upload_expires_at + ctx.upload_grace - timedelta(microseconds=1)
    assert SweepOutcome.UPLOAD_MISSING not in use_cases.sweeper.sweep()
    assert ctx.jobs.items[job.job_id].status is JobStatus.AWAITING_UPLOAD
    ctx.clock.advance(0.000001)
    assert use_cases.sweeper.sweep()[SweepOutcome.UPLOAD_MISSING] == 1
    assert ctx.objects.uploads == {}


def test_a_completion_racing_the_sweep_never_leaves_an_original_for_a_failed_job(use_cases):
    """The client's completion lands while the sweep that ends the job looks at storage:
    either the job goes on with its file, or the completion finds the upload aborted."""
    ctx = use_cases.ctx
    data = big_jpeg()
    accepted = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(data), method="multipart")
    put_parts(use_cases, accepted.upload, data)
    ctx.clock.now = accepted.job.upload_expires_at + timedelta(hours=1)  # past any grace
    answers = []
    head = ctx.objects.head

    def head_while_completing(key):
        seen = head(key)
        if not answers:  # the completion lands right after the sweep's look
            ctx.objects.head = head
            try:
                answers.append(use_cases.direct_uploads.complete_upload("alice", accepted.job.job_id, None).status)
            except (InvalidRequest, JobFinished) as error:
                answers.append(error.code)
        return seen

    ctx.objects.head = head_while_completing
    use_cases.sweeper.sweep()
    ctx.objects.head = head
    job = ctx.jobs.items[accepted.job.job_id]
    stored = job.original_key in ctx.objects.objects
    assert (job.status, stored) in {(JobStatus.FAILED, False), (JobStatus.QUEUED, True)}, (answers, job.status)
    assert answers == ["invalid_request"]  # "The upload was aborted": the client is told


# -- an upload completed at its deadline is not judged lost (issue 47, item 11) ----------------


def sweep_after_grace(use_cases, job):
    """The sweep's first look at the job, its event still waiting in the queue."""
    use_cases.ctx.clock.now = job.upload_expires_at + use_cases.ctx.upload_grace
    return use_cases.sweeper.sweep()


def test_a_multipart_upload_completed_at_its_deadline_gets_no_duplicate_event(use_cases):
    """S3 stamps a multipart object's Last-Modified with the upload's initiation (the fake
    does too), hours before the completion whose event is still waiting: not lost. (The
    completion queues the job itself; here its call died first, as the sweep sees it.)"""
    ctx = use_cases.ctx
    data = big_jpeg()
    accepted = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(data), method="multipart")
    ctx.clock.now = accepted.job.upload_expires_at + ctx.upload_grace - timedelta(seconds=1)
    put_parts(use_cases, accepted.upload, data)
    completed_in_storage(use_cases, accepted.job)
    assert ctx.objects.head(accepted.job.original_key).last_modified == accepted.job.created_at
    assert sweep_after_grace(use_cases, accepted.job)[SweepOutcome.UPLOAD_FOUND] == 1
    job = ctx.jobs.items[accepted.job.job_id]
    assert job.status is JobStatus.QUEUED and job.resends == 0
    assert len(ctx.backlog.sent) == 1  # its own event, no duplicate
    assert deliver(use_cases) == ["ready"]


def test_a_lost_multipart_event_is_sent_again_by_the_queued_jobs_look(use_cases):
    """The other side: an event that is lost is re-sent, one queue timeout later."""
    ctx = use_cases.ctx
    data = big_jpeg()
    accepted = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(data), method="multipart")
    put_parts(use_cases, accepted.upload, data)
    completed_in_storage(use_cases, accepted.job)
    ctx.backlog.take()  # delivered, but never run: lost
    assert sweep_after_grace(use_cases, accepted.job)[SweepOutcome.UPLOAD_FOUND] == 1
    assert ctx.jobs.items[accepted.job.job_id].resends == 0
    ctx.clock.advance(ctx.settings.queue_timeout_seconds)
    assert use_cases.sweeper.sweep()[SweepOutcome.RESENT] == 1
    assert deliver(use_cases) == ["ready"]


def test_a_multipart_upload_the_completion_queued_at_its_deadline_gets_no_duplicate_event(use_cases):
    """The completion queued the job a second before the deadline's grace ended: the queued
    job's look measures from that write, not from Last-Modified (the upload's initiation)."""
    ctx = use_cases.ctx
    data = big_jpeg()
    accepted = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(data), method="multipart")
    ctx.clock.now = accepted.job.upload_expires_at + ctx.upload_grace - timedelta(seconds=1)
    put_parts(use_cases, accepted.upload, data)
    assert use_cases.direct_uploads.complete_upload("alice", accepted.job.job_id, None).status is JobStatus.QUEUED
    ctx.clock.advance(ctx.settings.queue_timeout_seconds)  # the queued job's look, its event still waiting
    report = use_cases.sweeper.sweep()
    assert report[SweepOutcome.WAITING] == 1 and SweepOutcome.RESENT not in report
    assert ctx.jobs.items[accepted.job.job_id].resends == 0
    assert len(ctx.backlog.sent) == 1  # its own event, no duplicate
    assert deliver(use_cases) == ["ready"]


@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_a_single_request_begun_at_its_deadline_gets_no_duplicate_event(use_cases, method):
    """A store that stamps a request's start (as S3 may: "the object creation date"): a PUT
    begun at the deadline arrives at the end of the grace, its event still waiting."""
    ctx = use_cases.ctx
    data = jpeg()
    job = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(data), method=method).job
    ctx.clock.now = job.upload_expires_at + ctx.upload_grace - timedelta(seconds=1)
    ctx.objects.put(job.original_key, data, "image/jpeg", began=job.upload_expires_at)
    assert sweep_after_grace(use_cases, job)[SweepOutcome.UPLOAD_FOUND] == 1
    assert ctx.jobs.items[job.job_id].resends == 0 and len(ctx.backlog.sent) == 1
    assert deliver(use_cases) == ["ready"]
