"""infra/stream_source.py after `chalice deploy`: push's stream trigger is retried twice,
halved on each failure and never past the record age, set on a mapping the way Chalice
leaves it (moto's server as Lambda and DynamoDB)."""
from __future__ import annotations

import io
import json
import uuid
import zipfile

import pytest

from infra.stream_source import STREAM_SOURCE, apply, function_name
from local.services import aws_client


def deployed_the_chalice_way(moto_endpoint) -> tuple:
    """A table with a stream, push_job_changes and its mapping as `chalice deploy` makes
    them: batch size and starting position only."""
    suffix = uuid.uuid4().hex[:8]
    dynamodb = aws_client("dynamodb", "us-east-1", moto_endpoint)
    table = dynamodb.create_table(
        TableName=f"jobs-{suffix}", BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
    stream = table["TableDescription"]["LatestStreamArn"]
    iam = aws_client("iam", "us-east-1", moto_endpoint)
    role = iam.create_role(RoleName=f"push-{suffix}", AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                "Principal": {"Service": "lambda.amazonaws.com"}}]}))["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("app.py", "def push_job_changes(event, context):\n    pass\n")
    awslambda = aws_client("lambda", "us-east-1", moto_endpoint)
    name = function_name(f"image-jobs-{suffix}", "dev")
    awslambda.create_function(FunctionName=name, Runtime="python3.11", Role=role, Handler="app.push_job_changes",
                              Code={"ZipFile": code.getvalue()})
    mapping = awslambda.create_event_source_mapping(EventSourceArn=stream, FunctionName=name, BatchSize=100,
                                                    StartingPosition="LATEST")
    return awslambda, name, stream, mapping["UUID"]


def test_the_deployed_stream_source_retries_twice_halves_a_failed_batch_and_drops_old_records(moto_endpoint):
    awslambda, name, stream, mapping = deployed_the_chalice_way(moto_endpoint)
    assert apply(awslambda, name, stream) == [mapping]
    got = awslambda.get_event_source_mapping(UUID=mapping)
    assert {k: got[k] for k in STREAM_SOURCE} == {
        "MaximumRetryAttempts": 2, "BisectBatchOnFunctionError": True, "MaximumRecordAgeInSeconds": 300}
    assert got["BatchSize"] == 100  # what Chalice set stays
    assert apply(awslambda, name, stream) == [mapping]  # after every deploy: the same again


def test_a_stage_deployed_without_its_trigger_is_an_error(moto_endpoint):
    awslambda = aws_client("lambda", "us-east-1", moto_endpoint)
    with pytest.raises(SystemExit, match="no event source mapping"):
        apply(awslambda, "image-jobs-dev-push_job_changes",
              "arn:aws:dynamodb:us-east-1:123456789012:table/none/stream/2026-01-01T00:00:00.000")
