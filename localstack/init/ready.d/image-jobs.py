"""LocalStack ready.d hook: image-jobs' bucket, queues, notification and table.

LocalStack runs this once it is ready, inside its own Python (by exec, so there is no
__file__ and no __main__). It builds the resources from infra/template.yaml through
local/provision.py, the very code the local runner uses on its embedded stack, so the cloud,
the embedded stack and LocalStack come from one definition. Names come from the app's own
variables (IMAGES_BUCKET, JOBS_TABLE, EVENTS_QUEUE, AWS_REGION), defaults as the app's.

localstack/localstack.compose.yaml mounts infra/, local/ and chalicelib/ at /opt/image-jobs.
Provisioning is idempotent, even at the same time: the runner may provision too (EMBEDDED_AWS=0).
"""
import os
import sys

SOURCE = os.environ.get("IMAGE_JOBS_SOURCE", "/opt/image-jobs")
# Inside the container LocalStack listens here; tests point it at the embedded stack.
ENDPOINT = os.environ.get("IMAGE_JOBS_INIT_ENDPOINT", "http://localhost:4566")


def _provision_image_jobs():
    import boto3

    sys.path.insert(0, SOURCE)
    try:
        from chalicelib.config import Settings
        from local.provision import provision

        # Local set-up only: it provisions, and never checks a token.
        settings = Settings.from_environ({**os.environ, "AWS_ENDPOINT_URL": ENDPOINT,
                                          "LOCAL_RUNNER": "1"})
        # LocalStack takes any credentials; explicit ones keep its own environment out of it.
        session = boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test",
                                        region_name=settings.region)
        clients = {name: session.client(name, endpoint_url=ENDPOINT)
                   for name in ("sqs", "s3", "dynamodb")}
        stack = provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"])
    finally:
        sys.path.remove(SOURCE)
    print(f"image-jobs: bucket {stack.bucket}, table {stack.table}, queue {stack.queue_url}",
          flush=True)


_provision_image_jobs()
