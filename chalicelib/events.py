"""Storage notifications -> ObjectCreated.

Accepts the body of an SQS message or an AMQP delivery carrying:
- AWS S3's event (`Records[]`, `eventSource` "aws:s3", `eventName` "ObjectCreated:Put",
  URL-encoded keys with `+` for spaces), also wrapped in an SNS envelope;
- S3's `s3:TestEvent`, sent once when a notification is configured (no records);
- MinIO's event (`EventName`, decoded `Key`, `Records[]` with `eventSource` "minio:s3",
  `eventName` keeping the `s3:` prefix, URL-encoded keys).
"""
from __future__ import annotations

import json
from typing import Any, Union
from urllib.parse import unquote_plus

from chalicelib.ports import ObjectCreated


class PoisonMessage(ValueError):
    """A message that no retry can make sense of: drop or dead-letter it."""


def parse_message(body: Union[str, bytes]) -> list[ObjectCreated]:
    """The object-created records of one message; [] for test and other events."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise PoisonMessage("message body is not JSON") from None
    if not isinstance(doc, dict):
        raise PoisonMessage("message body is not a JSON object")
    if doc.get("Type") == "Notification" and isinstance(doc.get("Message"), str):
        return parse_message(doc["Message"])  # S3 -> SNS -> SQS
    if doc.get("Event") == "s3:TestEvent":
        return []
    records = doc.get("Records")
    if not isinstance(records, list):
        raise PoisonMessage("message is not a storage event")
    return [created for created in map(_parse_record, records) if created is not None]


def _parse_record(record: Any) -> ObjectCreated | None:
    if not isinstance(record, dict):
        raise PoisonMessage("event record is not an object")
    name = record.get("eventName")
    if not isinstance(name, str):
        raise PoisonMessage("event record has no eventName")
    # AWS: "ObjectCreated:Put"; MinIO: "s3:ObjectCreated:Put".
    if not name.removeprefix("s3:").startswith("ObjectCreated:"):
        return None
    try:
        s3 = record["s3"]
        bucket = s3["bucket"]["name"]
        obj = s3["object"]
        key = unquote_plus(obj["key"])
        size = int(obj.get("size", 0))
        etag = str(obj.get("eTag", obj.get("etag", ""))).strip('"')
    except (KeyError, TypeError, ValueError):
        raise PoisonMessage("event record lacks bucket or object") from None
    if not isinstance(bucket, str) or not key:
        raise PoisonMessage("event record lacks bucket or object")
    return ObjectCreated(bucket=bucket, key=key, size=size, etag=etag)
