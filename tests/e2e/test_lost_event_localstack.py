"""On LocalStack, the backend closest to AWS: a job whose worker was killed mid-processing and
whose event is gone from the queue is resent by the sweeper, which can tell "lost" from
"waiting behind others" only from the queue's oldest message in CloudWatch (LocalStack runs
CloudWatch, and local/localstack_boot.py publishes SQS's ApproximateAgeOfOldestMessage).

The queue's own redelivery cannot save this job: its message was purged. What the queue does
hold is a message sent after the job was claimed, so it is not empty and the sweeper needs
the metric to know that nothing as old as the job's event is left."""
import json
import signal
import time
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from chalicelib.domain.jobs import JobStatus
from tests.faults.conftest import World, photo

BIG = photo(6000, 6000, fmt="PNG")  # long enough to be killed in the middle


# LocalStack's start (when this test is the first to need it), a minute for the metric to tell,
# and a loaded machine's sweeps: more than the suite's default 300 s.
@pytest.mark.timeout(600)
def test_a_job_whose_worker_died_and_whose_event_was_lost_is_resent_by_the_sweeper(localstack):
    world = World("sqs", localstack.endpoint)
    sqs, queue_url = world.clients["sqs"], world.stack.queue_url
    try:
        (worker,) = world.workers(count=1, concurrency=1)
        (job_id,) = world.upload(1, data=BIG)
        deadline = time.monotonic() + 60
        while world.statuses([job_id])[job_id] is not JobStatus.PROCESSING:
            assert time.monotonic() < deadline, "the job was never claimed"
            time.sleep(0.02)
        worker.process.send_signal(signal.SIGKILL)
        worker.process.wait()
        claimed = world.service.ctx.jobs.get(job_id)
        assert claimed.status is JobStatus.PROCESSING, "the kill did not land in the middle of the job"

        sqs.purge_queue(QueueUrl=queue_url)  # the job's event is lost, in flight as it was
        # A later message keeps the queue from being empty (no worker runs to take it), sent
        # over a minute after the claim: a datapoint covers a minute, and its maximum age only
        # shows that every message was sent after the minute's start less that age.
        wait = (claimed.updated_at + timedelta(seconds=70) - datetime.now(timezone.utc)).total_seconds()
        time.sleep(max(0.0, wait))
        sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps({
            "Service": "Amazon S3", "Event": "s3:TestEvent", "Bucket": world.settings.bucket,
            "Time": datetime.now(timezone.utc).isoformat(), "RequestId": uuid.uuid4().hex}))

        time.sleep(6)  # LocalStack's next sample of the queue (every 5 s here)
        # Sweeps as the schedule runs them, until the job is resent.
        deadline = time.monotonic() + 150
        while (job := world.service.ctx.jobs.get(job_id)).resends == 0:
            assert time.monotonic() < deadline, (
                "the sweeper never re-drove the job whose event was lost: it could not tell the "
                "event lost (no ApproximateAgeOfOldestMessage from LocalStack's CloudWatch?)")
            world.service.sweeper.sweep()
            time.sleep(3)
        assert job.status is JobStatus.PROCESSING and job.attempt == claimed.attempt

        world.start("worker", WORKER_CONCURRENCY=1)
        assert world.wait_terminal([job_id], timeout=120)[job_id] is JobStatus.READY
        done = world.service.ctx.jobs.get(job_id)
        assert done.attempt == claimed.attempt + 1 and done.resends == 1
    finally:
        world.stop_all()
