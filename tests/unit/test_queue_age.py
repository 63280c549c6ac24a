"""Telling a lost message from a waiting one: the SQS gauge's answer from the queue's counts
and CloudWatch's age of the oldest message (botocore's Stubber plays both services)."""
from datetime import datetime, timedelta, timezone

import boto3
import pytest
from botocore.stub import Stubber

from chalicelib.adapters.cloudwatch_age import QueueAgeMetric
from chalicelib.adapters.sqs_queue import SqsEventsQueue

NOW = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)
URL = "https://sqs.us-east-1.amazonaws.com/123456789012/events"


def clients():
    session = boto3.session.Session(region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    return session.client("sqs"), session.client("cloudwatch")


def counts(stub, visible, in_flight, delayed):
    stub.add_response("get_queue_url", {"QueueUrl": URL}, {"QueueName": "events"})
    stub.add_response("get_queue_attributes", {"Attributes": {
        "ApproximateNumberOfMessages": str(visible), "ApproximateNumberOfMessagesNotVisible": str(in_flight),
        "ApproximateNumberOfMessagesDelayed": str(delayed)}})


def test_an_empty_queue_holds_nothing_sent_before_now():
    sqs, cloudwatch = clients()
    with Stubber(sqs) as stub, Stubber(cloudwatch):
        counts(stub, 0, 0, 0)
        assert SqsEventsQueue(sqs, "events", QueueAgeMetric(cloudwatch, "events")).drained_before(NOW) == NOW


@pytest.mark.parametrize("visible, in_flight, delayed", [(3, 0, 0), (0, 1, 0), (0, 0, 1)])
def test_a_busy_queue_asks_cloudwatch_how_old_its_oldest_message_is(visible, in_flight, delayed):
    sqs, cloudwatch = clients()
    with Stubber(sqs) as stub, Stubber(cloudwatch) as metrics:
        counts(stub, visible, in_flight, delayed)
        minute = NOW - timedelta(minutes=3)
        metrics.add_response("get_metric_statistics", {"Datapoints": [
            {"Timestamp": minute - timedelta(minutes=1), "Maximum": 30.0},
            {"Timestamp": minute, "Maximum": 400.0},  # the latest: 400 s old at that minute
        ]})
        before = SqsEventsQueue(sqs, "events", QueueAgeMetric(cloudwatch, "events")).drained_before(NOW)
    assert before == minute - timedelta(seconds=400)


def test_without_a_datapoint_the_answer_is_unknown():
    sqs, cloudwatch = clients()
    with Stubber(sqs) as stub, Stubber(cloudwatch) as metrics:
        counts(stub, 5, 0, 0)
        metrics.add_response("get_metric_statistics", {"Datapoints": []})
        assert SqsEventsQueue(sqs, "events", QueueAgeMetric(cloudwatch, "events")).drained_before(NOW) is None


def test_without_the_metric_a_busy_queue_is_unknown():
    sqs, _ = clients()
    with Stubber(sqs) as stub:
        counts(stub, 1, 0, 0)
        assert SqsEventsQueue(sqs, "events").drained_before(NOW) is None
