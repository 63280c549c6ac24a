"""The age of the oldest message in the events queue, from CloudWatch.

SQS has no API for it; CloudWatch's AWS/SQS ApproximateAgeOfOldestMessage has it per minute.
A datapoint for the minute starting at T with maximum age A means: at every moment of that
minute, every message in the queue had been sent after T - A. Messages never come back once
deleted, so none sent before T - A is in the queue now either.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Optional

from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.domain.errors import TransientError

# SQS publishes each minute's datapoint a few minutes late.
_LOOK_BACK = timedelta(minutes=10)


class QueueAgeMetric:
    def __init__(self, client, events_queue_name: str):
        self._client = client
        self._queue_name = events_queue_name

    def sent_after(self, now: datetime) -> Optional[datetime]:
        """A time before which no message still in the queue was sent; None without data."""
        try:
            points = self._client.get_metric_statistics(
                Namespace="AWS/SQS", MetricName="ApproximateAgeOfOldestMessage",
                Dimensions=[{"Name": "QueueName", "Value": self._queue_name}],
                StartTime=now - _LOOK_BACK, EndTime=now, Period=60, Statistics=["Maximum"],
            )["Datapoints"]
        except (BotoCoreError, ClientError) as error:
            raise TransientError("metrics unavailable") from error
        if not points:
            return None
        latest = max(points, key=lambda p: p["Timestamp"])
        return latest["Timestamp"] - timedelta(seconds=latest["Maximum"])
