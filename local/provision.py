"""Create the bucket, queues, notification and table from infra/template.yaml.

The local runner calls this against moto's server or LocalStack (and, for the RADOS
Gateway, `provision_rgw`: its topic and notification to RabbitMQ), so the embedded stack is
built from the same definition that the cloud deploys; tests compare the two. Idempotent:
running it on a stack that exists changes nothing. Idempotent under concurrency too: LocalStack's
init hook and `EMBEDDED_AWS=0 make run` may provision at once, so every create that finds its
resource made (or being made) by the other in the meantime counts as success.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlsplit

import yaml
from botocore.exceptions import ClientError

from chalicelib.config import Settings

TEMPLATE = Path(__file__).resolve().parent.parent / "infra" / "template.yaml"
WEBHOOK_QUEUE = "WebhookQueue"


class _CfnLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """Reads CloudFormation's short tags (!Ref X) as their long form ({"Ref": X}). On libyaml
    where PyYAML has it: every runner reads the template at start (0.13 CPU-s in Python)."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict:
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


_CfnLoader.add_multi_constructor("!", _tag)


def load_template(path: Path = TEMPLATE) -> dict:
    with open(path) as handle:
        return yaml.load(handle, Loader=_CfnLoader)


@dataclass(frozen=True)
class Stack:
    """What the app needs to know of a provisioned stack."""

    bucket: str
    table: str
    queue_url: Optional[str]
    queue_arn: Optional[str]
    dead_letter_url: Optional[str]
    webhook_queue_url: Optional[str] = None
    webhook_queue_arn: Optional[str] = None
    webhook_dead_letter_url: Optional[str] = None


def _resources(template: dict, kind: str) -> dict[str, dict]:
    return {
        name: res.get("Properties", {})
        for name, res in template["Resources"].items()
        if res["Type"] == kind
    }


def _plain_value(value: Any, template: dict) -> Any:
    """Resolve a parameter Ref to its default; anything else must be a literal here."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return template["Parameters"][value["Ref"]]["Default"]
    return value


def provision(settings: Settings, sqs, s3, dynamodb, template: dict | None = None,
              sqs_notifications: bool = True, visibility_timeout: Optional[int] = None) -> Stack:
    """sqs_notifications=False: storage notifies elsewhere (MinIO -> AMQP, set up by
    localstack/minio); only the bucket and the table are made here (and no webhook queue).
    visibility_timeout: tests shorten the events queue's, to see redeliveries quickly."""
    template = template or load_template()
    (bucket_props,) = _resources(template, "AWS::S3::Bucket").values()
    if not sqs_notifications:
        _ensure_bucket(s3, settings)
        _ensure_cors(s3, settings.bucket, bucket_props, template)
        _ensure_lifecycle(s3, settings.bucket, bucket_props, template)
        (table_props,) = _resources(template, "AWS::DynamoDB::Table").values()
        _ensure_table(dynamodb, settings.table, table_props)
        return Stack(settings.bucket, settings.table, None, None, None)
    queues = _resources(template, "AWS::SQS::Queue")
    # The events queue is the one the bucket notifies; the webhook queue is named so.
    (events_name,) = {qc["Queue"]["Fn::GetAtt"][0]
                      for qc in bucket_props["NotificationConfiguration"]["QueueConfigurations"]}
    queue_url, queue_arn, dead_letter_url = _ensure_queue_pair(
        sqs, template, queues, events_name, settings.events_queue_name, settings.events_dead_letter_queue_name,
        visibility_timeout)
    webhook_url, webhook_arn, webhook_dead_letter_url = _ensure_queue_pair(
        sqs, template, queues, WEBHOOK_QUEUE, settings.webhook_queue_name,
        settings.webhook_dead_letter_queue_name, None)

    _ensure_bucket(s3, settings)
    _ensure_cors(s3, settings.bucket, bucket_props, template)
    _ensure_lifecycle(s3, settings.bucket, bucket_props, template)
    notification = bucket_props["NotificationConfiguration"]
    desired = {"QueueConfigurations": [
        {
            "QueueArn": queue_arn,
            "Events": [qc["Event"]],
            "Filter": _key_filter(qc),
        }
        for qc in notification["QueueConfigurations"]
    ]}
    current = s3.get_bucket_notification_configuration(Bucket=settings.bucket)
    if _comparable(current.get("QueueConfigurations", [])) != _comparable(desired["QueueConfigurations"]):
        s3.put_bucket_notification_configuration(
            Bucket=settings.bucket, NotificationConfiguration=desired
        )

    (table_props,) = _resources(template, "AWS::DynamoDB::Table").values()
    _ensure_table(dynamodb, settings.table, table_props)
    return Stack(settings.bucket, settings.table, queue_url, queue_arn, dead_letter_url,
                 webhook_url, webhook_arn, webhook_dead_letter_url)


def provision_rgw(settings: Settings, sqs, s3, sns, dynamodb, persistent: bool,
                  template: dict | None = None) -> Stack:
    """Behind Ceph's RADOS Gateway (s3 and sns are the gateway's, sqs and dynamodb moto's):
    the bucket with its CORS and lifecycle rules, a topic that publishes to the AMQP exchange
    (routing key: the topic's name) and the template's notification on it, the table and
    the webhook queue. The exchange must exist first (amqp.declare)."""
    template = template or load_template()
    (bucket_props,) = _resources(template, "AWS::S3::Bucket").values()
    queues = _resources(template, "AWS::SQS::Queue")
    webhook_url, webhook_arn, webhook_dead_letter_url = _ensure_queue_pair(
        sqs, template, queues, WEBHOOK_QUEUE, settings.webhook_queue_name,
        settings.webhook_dead_letter_queue_name, None)
    _ensure_bucket(s3, settings)
    _ensure_cors(s3, settings.bucket, bucket_props, template)
    _ensure_lifecycle(s3, settings.bucket, bucket_props, template)
    topic_arn = sns.create_topic(Name=settings.amqp_routing_key,
                                 Attributes=rgw_topic_attributes(settings, persistent))["TopicArn"]
    s3.put_bucket_notification_configuration(Bucket=settings.bucket, NotificationConfiguration={
        "TopicConfigurations": [
            {"Id": f"originals-{n}", "TopicArn": topic_arn, "Events": [qc["Event"]],
             "Filter": _key_filter(qc)}
            for n, qc in enumerate(bucket_props["NotificationConfiguration"]["QueueConfigurations"])
        ]})
    (table_props,) = _resources(template, "AWS::DynamoDB::Table").values()
    _ensure_table(dynamodb, settings.table, table_props)
    return Stack(settings.bucket, settings.table, None, None, None,
                 webhook_url, webhook_arn, webhook_dead_letter_url)


def _key_filter(configuration: dict) -> dict:
    """A template notification's key filter (CloudFormation's S3Key.Rules) as S3's API takes it."""
    return {"Key": {"FilterRules": [{"Name": rule["Name"], "Value": rule["Value"]}
                                    for rule in configuration["Filter"]["S3Key"]["Rules"]]}}


def rgw_topic_attributes(settings: Settings, persistent: bool) -> dict[str, str]:
    """The gateway's topic attributes for AMQP_URL. It refuses a password in a topic made over
    plain HTTP, and uses guest/guest when none is given: so only those may be left out."""
    url = urlsplit(settings.amqp_url)
    if (url.username or "guest", url.password or "guest") != ("guest", "guest"):
        raise ValueError("the RADOS Gateway takes AMQP credentials only over HTTPS: on this "
                         "machine, use RabbitMQ's guest user (AMQP_URL=amqp://127.0.0.1:5672/%2F)")
    vhost = url.path if url.path not in ("", "/", "/%2F") else ""
    return {"push-endpoint": f"amqp://{url.hostname}:{url.port or 5672}{vhost}",
            "amqp-exchange": settings.amqp_exchange,
            # The gateway counts an event sent once the broker confirms it.
            "amqp-ack-level": "broker",
            "persistent": "true" if persistent else "false"}


def _ensure_queue_pair(sqs, template: dict, queues: dict, logical: str, name: str, dead_letter_name: str,
                       visibility_timeout: Optional[int]) -> tuple[str, str, str]:
    """A queue and the dead-letter queue its redrive policy names: (url, arn, dead-letter url)."""
    props = queues[logical]
    dead_letter_props = queues[props["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]]
    dead_letter_url = _ensure_queue(sqs, dead_letter_name, _queue_attributes(dead_letter_props, template))
    dead_letter_arn = sqs.get_queue_attributes(QueueUrl=dead_letter_url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    attributes = _queue_attributes(props, template)
    attributes["RedrivePolicy"] = json.dumps({
        "deadLetterTargetArn": dead_letter_arn,
        "maxReceiveCount": str(props["RedrivePolicy"]["maxReceiveCount"]),
    })
    if visibility_timeout is not None:
        attributes["VisibilityTimeout"] = str(visibility_timeout)
    url = _ensure_queue(sqs, name, attributes)
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn, dead_letter_url


def _comparable(configurations: list[dict]) -> list[tuple]:
    """Queue notifications without the ids and name casing that S3 adds on read."""
    return sorted(
        (c["QueueArn"], tuple(sorted(c["Events"])), tuple(sorted(
            (r["Name"].lower(), r["Value"]) for r in c.get("Filter", {}).get("Key", {}).get("FilterRules", [])
        )))
        for c in configurations
    )


def _ensure_queue(sqs, name: str, attributes: dict[str, str]) -> str:
    """An existing queue is kept as it is: CreateQueue refuses other attributes for it."""
    try:
        return sqs.get_queue_url(QueueName=name)["QueueUrl"]
    except sqs.exceptions.QueueDoesNotExist:
        pass
    try:
        return sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    except sqs.exceptions.QueueNameExists:
        # Made by another provisioner since, with other attributes (same ones are no error).
        return sqs.get_queue_url(QueueName=name)["QueueUrl"]


def _queue_attributes(props: dict, template: dict) -> dict[str, str]:
    names = ("VisibilityTimeout", "MessageRetentionPeriod")
    return {n: str(_plain_value(props[n], template)) for n in names if n in props}


def _ensure_bucket(s3, settings: Settings) -> None:
    existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    if settings.bucket in existing:
        return
    location = ({} if settings.region == "us-east-1" else
                {"CreateBucketConfiguration": {"LocationConstraint": settings.region}})
    try:
        s3.create_bucket(Bucket=settings.bucket, **location)
    except ClientError as error:
        if error.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise
        # Made by another provisioner since; a name taken by someone else fails here.
        s3.head_bucket(Bucket=settings.bucket)


# CloudFormation's names of a CORS rule's keys where PutBucketCors names them otherwise.
_CORS_KEYS = {"Id": "ID", "MaxAge": "MaxAgeSeconds", "ExposedHeaders": "ExposeHeaders"}


def bucket_cors_rules(bucket_props: dict, template: dict) -> list[dict]:
    """The template's CorsRules as PutBucketCors takes them (parameters at their defaults)."""
    return [
        {_CORS_KEYS.get(key, key): ([_plain_value(v, template) for v in value]
                                    if isinstance(value, list) else _plain_value(value, template))
         for key, value in rule.items()}
        for rule in bucket_props["CorsConfiguration"]["CorsRules"]
    ]


def _ensure_cors(s3, bucket: str, bucket_props: dict, template: dict) -> None:
    desired = bucket_cors_rules(bucket_props, template)
    try:
        current = s3.get_bucket_cors(Bucket=bucket).get("CORSRules", [])
    except ClientError as error:
        code = error.response["Error"]["Code"]
        if code == "NotImplemented":
            return  # MinIO: CORS is a server-wide setting there, not the bucket's
        if code != "NoSuchCORSConfiguration":
            raise
        current = []
    if current != desired:
        s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": desired})


def bucket_lifecycle_rules(bucket_props: dict, template: dict) -> list[dict]:
    """The template's lifecycle rules as PutBucketLifecycleConfiguration takes them: each
    expires a prefix and aborts the multipart uploads left incomplete under it."""
    rules = []
    for rule in bucket_props["LifecycleConfiguration"]["Rules"]:
        desired = {"ID": rule["Id"], "Status": rule["Status"], "Filter": {"Prefix": rule["Prefix"]},
                   "Expiration": {"Days": int(_plain_value(rule["ExpirationInDays"], template))}}
        if "AbortIncompleteMultipartUpload" in rule:
            desired["AbortIncompleteMultipartUpload"] = {"DaysAfterInitiation": int(
                rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"])}
        rules.append(desired)
    return rules


def _ensure_lifecycle(s3, bucket: str, bucket_props: dict, template: dict) -> None:
    desired = bucket_lifecycle_rules(bucket_props, template)
    try:
        current = s3.get_bucket_lifecycle_configuration(Bucket=bucket).get("Rules", [])
    except ClientError as error:
        code = error.response["Error"]["Code"]
        if code == "NotImplemented":
            return
        if code != "NoSuchLifecycleConfiguration":
            raise
        current = []
    if sorted(current, key=lambda r: r.get("ID", "")) != desired:
        s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": desired})


def _ensure_table(dynamodb, name: str, props: dict) -> None:
    if name not in dynamodb.list_tables().get("TableNames", []):
        try:
            dynamodb.create_table(
                TableName=name,
                AttributeDefinitions=props["AttributeDefinitions"],
                KeySchema=props["KeySchema"],
                GlobalSecondaryIndexes=props.get("GlobalSecondaryIndexes", []),
                BillingMode=props["BillingMode"],
            )
        except dynamodb.exceptions.ResourceInUseException:
            pass  # made, or being made, by another provisioner since: the waiter below covers both
    _wait_for_table(dynamodb, name)
    _ensure_indexes(dynamodb, name, props)
    ttl = props["TimeToLiveSpecification"]
    if not _ttl_enabled(dynamodb, name):
        try:
            dynamodb.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": ttl["Enabled"]},
            )
        except ClientError:
            # "TimeToLive is already enabled": another provisioner's update came first.
            if not _ttl_enabled(dynamodb, name):
                raise


def _ttl_enabled(dynamodb, name: str) -> bool:
    status = dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
    return status.get("TimeToLiveStatus") in ("ENABLED", "ENABLING")


def _wait_for_table(dynamodb, name: str) -> None:
    """Until the table is ACTIVE, however it was made; at once when it is already."""
    dynamodb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})


def _ensure_indexes(dynamodb, name: str, props: dict) -> None:
    """A table made before the template gained an index (a kept LocalStack volume) gets it,
    as CloudFormation would: one UpdateTable per index; DynamoDB backfills it. Indexes the
    template dropped are left alone."""
    for index in props.get("GlobalSecondaryIndexes", []):
        if index["IndexName"] in _index_names(dynamodb, name):
            continue
        try:
            dynamodb.update_table(TableName=name, AttributeDefinitions=props["AttributeDefinitions"],
                                  GlobalSecondaryIndexUpdates=[{"Create": index}])
        except ClientError:
            # Another provisioner's UpdateTable for the same index came first.
            if index["IndexName"] not in _index_names(dynamodb, name):
                raise
        _wait_for_table(dynamodb, name)


def _index_names(dynamodb, name: str) -> set[str]:
    described = dynamodb.describe_table(TableName=name)["Table"]
    return {i["IndexName"] for i in described.get("GlobalSecondaryIndexes", [])}
