"""Storage notifications: ObjectCreated <-> the JSON that S3, MinIO and Ceph's RADOS Gateway
send. Both directions live here, so that the parser and the builders cannot drift apart.

Accepts the body of an SQS message or an AMQP delivery carrying:
- AWS S3's event (`Records[]`, `eventSource` "aws:s3", `eventName` "ObjectCreated:Put",
  URL-encoded keys with `+` for spaces), also wrapped in an SNS envelope;
- S3's `s3:TestEvent`, sent once when a notification is configured (no records);
- MinIO's event (`EventName`, decoded `Key`, `Records[]` with `eventSource` "minio:s3",
  `eventName` keeping the `s3:` prefix, URL-encoded keys);
- the RADOS Gateway's (`Records[]` of one, `eventSource` "ceph:s3", `eventName`
  "ObjectCreated:Put", and keys RAW: "a b+c%.jpg" arrives as is, so it is never unquoted).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional, Union
from urllib.parse import quote_plus, unquote_plus

from chalicelib.domain.errors import PoisonMessage


@dataclass(frozen=True)
class ObjectCreated:
    bucket: str
    key: str
    size: int
    etag: str = ""


def parse_message(body: Union[str, bytes]) -> list[ObjectCreated]:
    """The object-created records of one message; [] for test and other events. Anything
    that does not parse is PoisonMessage: no later delivery of the same bytes can parse."""
    doc = _json_object(body)
    if doc.get("Type") == "Notification" and isinstance(doc.get("Message"), str):
        doc = _json_object(doc["Message"])  # S3 -> SNS -> SQS: one envelope, never nested
    if doc.get("Event") == "s3:TestEvent":
        return []
    records = doc.get("Records")
    if not isinstance(records, list):
        raise PoisonMessage("message is not a storage event")
    return [created for created in map(_parse_record, records) if created is not None]


def _json_object(body: Union[str, bytes]) -> dict:
    try:
        # RecursionError: brackets nested deeper than the parser recurses.
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise PoisonMessage("message body is not JSON") from None
    if not isinstance(doc, dict):
        raise PoisonMessage("message body is not a JSON object")
    return doc


# The storages whose records carry the key as stored, not URL-encoded.
RAW_KEY_SOURCES = frozenset({"ceph:s3"})


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
        key = obj["key"]
        if record.get("eventSource") not in RAW_KEY_SOURCES:
            key = unquote_plus(key)
        size = obj.get("size", 0)
        etag = str(obj.get("eTag", obj.get("etag", ""))).strip('"')
    except (KeyError, TypeError, ValueError, AttributeError):
        raise PoisonMessage("event record lacks bucket or object") from None
    if not isinstance(bucket, str) or not key:
        raise PoisonMessage("event record lacks bucket or object")
    # A byte count: JSON's Infinity, NaN, 1.5, "12" or true are not one.
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise PoisonMessage("event record's object size is not a byte count")
    return ObjectCreated(bucket=bucket, key=key, size=size, etag=etag)


def aws_event(created: ObjectCreated) -> dict:
    """The notification S3 sends to SQS (what the sweeper's resend imitates)."""
    return {"Records": [{
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "eventName": "ObjectCreated:Put",
        "s3": {"s3SchemaVersion": "1.0", "configurationId": "sweeper-redrive",
               "bucket": {"name": created.bucket},
               "object": {"key": quote_plus(created.key), "size": created.size}},
    }]}


def minio_event(created: ObjectCreated, now: Optional[datetime] = None) -> dict:
    """The envelope MinIO publishes to AMQP for an object-created notification."""
    now = now or datetime.now(timezone.utc)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    bucket, key = created.bucket, created.key
    return {
        "EventName": "s3:ObjectCreated:Put",
        "Key": f"{bucket}/{key}",
        "Records": [{
            "eventVersion": "2.0", "eventSource": "minio:s3", "awsRegion": "",
            "eventTime": stamp, "eventName": "s3:ObjectCreated:Put",
            "s3": {"s3SchemaVersion": "1.0", "configurationId": "Config",
                   "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"},
                   "object": {"key": quote_plus(key), "size": created.size}},
        }],
    }


def rgw_event(created: ObjectCreated, now: Optional[datetime] = None) -> dict:
    """What the RADOS Gateway publishes to AMQP for an object-created notification: its
    members that the parser reads, and the key raw, as the gateway sends it."""
    now = now or datetime.now(timezone.utc)
    return {"Records": [{
        "eventVersion": "2.2", "eventSource": "ceph:s3", "awsRegion": "",
        "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "eventName": "ObjectCreated:Put",
        "s3": {"s3SchemaVersion": "1.0", "configurationId": "sweeper-redrive",
               "bucket": {"name": created.bucket, "arn": f"arn:aws:s3:::{created.bucket}"},
               "object": {"key": created.key, "size": created.size, "versionId": ""}},
        "opaqueData": "",
    }]}


# The shapes an AMQP resend may take: the storage's own (AMQP_EVENT_SHAPE, whose value for
# the gateway stays "ceph": stages and shells already set it).
AMQP_EVENT_BUILDERS = {"minio": minio_event, "ceph": rgw_event}
