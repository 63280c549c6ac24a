"""localstack/init/ready.d/image-jobs.py, run as LocalStack runs it, against the embedded
stack (moto's server speaks the same API): it makes what infra/template.yaml describes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from chalicelib.adapters.dynamo_jobs import OWNER_CREATED_INDEX, DUE_INDEX
from local.provision import load_template, provision
from local.services import aws_client

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "localstack" / "init" / "ready.d" / "image-jobs.py"
COMPOSE = ROOT / "localstack" / "localstack.compose.yaml"
# What LocalStack's PythonScriptRunner does with a ready.d/*.py file.
AS_LOCALSTACK = "import sys; exec(open(sys.argv[1], 'rb').read(), {})"


def run_init_script(settings, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AWS_ENDPOINT_URL")}
    env.update(IMAGE_JOBS_SOURCE=str(ROOT), IMAGE_JOBS_INIT_ENDPOINT=settings.endpoint_url,
               IMAGES_BUCKET=settings.bucket, JOBS_TABLE=settings.table,
               EVENTS_QUEUE=settings.events_queue_name, AWS_REGION=settings.region,
               # LocalStack's own process has no credentials for the script to lean on.
               AWS_ACCESS_KEY_ID="", AWS_SECRET_ACCESS_KEY="")
    # From an empty directory, so only IMAGE_JOBS_SOURCE can make the project importable.
    return subprocess.run([sys.executable, "-c", AS_LOCALSTACK, str(SCRIPT)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)


def test_the_init_script_creates_the_templates_resources(settings_for, tmp_path):
    settings = settings_for()
    result = run_init_script(settings, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"image-jobs: bucket {settings.bucket}" in result.stdout

    template = load_template()
    clients = {n: aws_client(n, settings.region, settings.endpoint_url) for n in ("sqs", "s3", "dynamodb")}
    queue_url = clients["sqs"].get_queue_url(QueueName=settings.events_queue_name)["QueueUrl"]
    attrs = clients["sqs"].get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    events = template["Resources"]["EventsQueue"]["Properties"]
    assert attrs["VisibilityTimeout"] == str(template["Parameters"][events["VisibilityTimeout"]["Ref"]]["Default"])
    redrive = json.loads(attrs["RedrivePolicy"])
    dead_letter_url = clients["sqs"].get_queue_url(QueueName=f"{settings.events_queue_name}-dlq")["QueueUrl"]
    dead_letter_arn = clients["sqs"].get_queue_attributes(QueueUrl=dead_letter_url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    assert redrive["deadLetterTargetArn"] == dead_letter_arn
    assert int(redrive["maxReceiveCount"]) == events["RedrivePolicy"]["maxReceiveCount"]

    (qc,) = clients["s3"].get_bucket_notification_configuration(Bucket=settings.bucket)["QueueConfigurations"]
    assert qc["QueueArn"] == attrs["QueueArn"]
    (rule,) = qc["Filter"]["Key"]["FilterRules"]
    assert (rule["Name"].lower(), rule["Value"]) == ("prefix", settings.originals_prefix)

    table = clients["dynamodb"].describe_table(TableName=settings.table)["Table"]
    assert table["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert sorted(i["IndexName"] for i in table["GlobalSecondaryIndexes"]) == sorted([OWNER_CREATED_INDEX, DUE_INDEX])
    ttl = clients["dynamodb"].describe_time_to_live(TableName=settings.table)["TimeToLiveDescription"]
    assert (ttl["AttributeName"], ttl["TimeToLiveStatus"]) == ("expires_at", "ENABLED")

    # The runner, pointed at this "LocalStack" (EMBEDDED_AWS=0), finds everything in place.
    before = clients["s3"].get_bucket_notification_configuration(Bucket=settings.bucket)
    stack = provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"])
    assert (stack.queue_url, stack.queue_arn) == (queue_url, attrs["QueueArn"])
    after = clients["s3"].get_bucket_notification_configuration(Bucket=settings.bucket)
    assert after["QueueConfigurations"] == before["QueueConfigurations"]


def test_running_it_again_changes_nothing(settings_for, tmp_path):
    """LocalStack with persistence runs ready.d on every start."""
    settings = settings_for()
    assert run_init_script(settings, tmp_path).returncode == 0
    result = run_init_script(settings, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_compose_file_mounts_what_the_script_imports_and_names_the_apps_resources():
    compose = yaml.safe_load(COMPOSE.read_text())
    (service,) = compose["services"].values()
    mounts = {v.split(":")[1]: v.split(":")[0] for v in service["volumes"]}
    assert mounts["/etc/localstack/init/ready.d"] == "./init/ready.d"
    for package in ("infra", "local", "chalicelib"):
        assert (COMPOSE.parent / mounts[f"/opt/image-jobs/{package}"]).resolve() == ROOT / package
    env = service["environment"]
    assert "LOCALSTACK_AUTH_TOKEN" in env
    from chalicelib.config import Settings

    defaults = Settings()
    assert env["IMAGES_BUCKET"] == "${IMAGES_BUCKET:-%s}" % defaults.bucket
    assert env["JOBS_TABLE"] == "${JOBS_TABLE:-%s}" % defaults.table
    assert env["EVENTS_QUEUE"] == "${EVENTS_QUEUE:-%s}" % defaults.events_queue_name
    assert service["ports"] == ["127.0.0.1:4566:4566"]
