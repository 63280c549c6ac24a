"""Where moto (the embedded stack), LocalStack and Ceph's RADOS Gateway differ, what each does,
and what the service does on each. The POST policy is in test_lifecycle_api.py, next to the
direct upload."""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from urllib.parse import urlsplit, urlunsplit

import requests

from chalicelib.adapters.dynamo_jobs import DynamoJobStore
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.config import Settings
from chalicelib.domain.events import parse_message
from local.services import aws_client
from tests.e2e.test_images_api import assert_problem, headers, poll, upload_raw
from tests.images import jpeg


def ready_job(runner) -> tuple[str, dict]:
    r = upload_raw(runner, jpeg(600, 400))
    assert r.status_code == 202, r.text
    job = poll(runner, r.headers["Location"]).json()
    assert job["status"] == "ready"
    return r.headers["Location"], job


def test_presigned_urls_name_the_endpoint_and_strict_storage_checks_their_signature(runner):
    """URLs are path-style on the endpoint the app was given. LocalStack (as started by
    local/localstack.py) and the RADOS Gateway check the signature, which covers the host, as
    S3 does: a URL presigned for one host name fails on another, so PUBLIC_S3_ENDPOINT_URL must
    be the host clients use. moto serves any of them."""
    _, job = ready_job(runner)
    url = urlsplit(job["image_url"])
    assert f"{url.scheme}://{url.netloc}" == runner.s3
    assert url.path.startswith(f"/{Settings().bucket}/renditions/")
    assert requests.get(job["image_url"], timeout=10).status_code == 200

    other_host = urlunsplit(url._replace(netloc=url.netloc.replace("127.0.0.1", "localhost")))
    forged = job["image_url"][:-8] + "00000000"  # the signature's last characters
    for variant in (other_host, forged):
        answer = requests.get(variant, timeout=10)
        if runner.strict:
            assert answer.status_code == 403 and b"SignatureDoesNotMatch" in answer.content
        else:
            assert answer.status_code == 200


def test_ttl_deletion_turns_an_expired_job_from_410_into_404(runner):
    """Past `expires_at` a job is 410 at once (the service checks at read time). LocalStack
    deletes expired items as DynamoDB's TTL does (DYNAMODB_REMOVE_EXPIRED_ITEMS=1, hourly, or now
    through its developer endpoint), after which the job is 404; moto never deletes them."""
    location, _ = ready_job(runner)
    settings = Settings(endpoint_url=runner.aws)
    store = DynamoJobStore(DynamoTable(settings.table, settings.region, runner.aws))
    job = store.get(location.rsplit("/", 1)[1])
    store.move(replace(job, expires_at=datetime.now(timezone.utc) - timedelta(seconds=1)), job.status)
    assert_problem(requests.get(runner.api + location, headers=headers(), timeout=10), 410, "job_expired")

    if runner.backend == "localstack":
        swept = requests.delete(f"{runner.aws}/_aws/dynamodb/expired", timeout=30)
        assert swept.status_code == 200 and swept.json()["ExpiredItems"] >= 1
        assert_problem(requests.get(runner.api + location, headers=headers(), timeout=10), 404, "job_not_found")
    else:
        assert requests.delete(f"{runner.aws}/_aws/dynamodb/expired", timeout=30).status_code == 404
        assert_problem(requests.get(runner.api + location, headers=headers(), timeout=10), 410, "job_expired")


# What each backend puts in an S3 ObjectCreated record (AWS's has LocalStack's fields), and how it
# encodes the key "originals/a b+c/é.jpg": AWS and LocalStack keep the slashes.
EVENT_SHAPES = {
    "embedded": {
        "record": {"awsRegion", "eventName", "eventSource", "eventTime", "eventVersion", "s3"},
        "object": {"eTag", "key", "size"},
        "key": "originals%2Fa+b%2Bc%2F%C3%A9.jpg",
    },
    "localstack": {
        "record": {"awsRegion", "eventName", "eventSource", "eventTime", "eventVersion", "s3",
                   "requestParameters", "responseElements", "userIdentity"},
        "object": {"eTag", "key", "size", "sequencer"},
        "key": "originals/a%20b%2Bc/%C3%A9.jpg",
    },
}


def test_event_shapes_differ_and_the_worker_reads_both_the_same(runner):
    """The same put, notified by each backend through a queue of its own (prefix originals/)."""
    if runner.backend == "rgw":
        return rgw_event_shape(runner)
    s3, sqs = (aws_client(name, "us-east-1", runner.aws) for name in ("s3", "sqs"))
    name = f"shape-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=name)
    queue = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    s3.put_bucket_notification_configuration(Bucket=name, NotificationConfiguration={"QueueConfigurations": [{
        "QueueArn": arn, "Events": ["s3:ObjectCreated:*"],
        "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "originals/"}]}}}]})
    key = "originals/a b+c/é.jpg"
    etag = s3.put_object(Bucket=name, Key=key, Body=b"12345")["ETag"].strip('"')
    s3.put_object(Bucket=name, Key="elsewhere/x.jpg", Body=b"1")

    bodies, deadline = [], time.monotonic() + 20
    while time.monotonic() < deadline and not any("Records" in json.loads(b) for b in bodies):
        messages = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1, MaxNumberOfMessages=10)
        bodies += [m["Body"] for m in messages.get("Messages", [])]
    time.sleep(1)  # the filtered-out put must not arrive late either
    bodies += [m["Body"] for m in sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])]

    test_event, created = [json.loads(b) for b in bodies]  # exactly these two
    assert test_event["Event"] == "s3:TestEvent" and parse_message(json.dumps(test_event)) == []
    (record,) = created["Records"]
    shape = EVENT_SHAPES[runner.backend]
    assert set(record) == shape["record"]
    assert set(record["s3"]["object"]) == shape["object"]
    assert record["s3"]["object"]["key"] == shape["key"]
    assert (record["eventSource"], record["eventName"]) == ("aws:s3", "ObjectCreated:Put")
    (parsed,) = parse_message(json.dumps(created))
    assert (parsed.bucket, parsed.key, parsed.size, parsed.etag) == (name, key, 5, etag)



# The RADOS Gateway's record (Ceph 16.2.15): more members than AWS's, and the key RAW.
RGW_SHAPE = {
    "record": {"awsRegion", "eventId", "eventName", "eventSource", "eventTime", "eventVersion",
               "opaqueData", "requestParameters", "responseElements", "s3", "userIdentity"},
    "object": {"eTag", "key", "metadata", "sequencer", "size", "tags", "versionId"},
    "key": "originals/a b+c/é.jpg",
}


def rgw_event_shape(runner):
    """The gateway publishes to RabbitMQ itself: a topic of the test's, on the runner's exchange
    (one gateway publishes to one exchange per broker: see below), routed to a queue of the
    test's, gets the put under originals/ (once, in its own shape) and not the other."""
    import pika

    from local.provision import rgw_topic_attributes

    s3, sns = (aws_client(name, "us-east-1", runner.s3) for name in ("s3", "sns"))
    name = f"shape-{uuid.uuid4().hex[:10]}"
    exchange = runner.env["AMQP_EXCHANGE"]
    connection = pika.BlockingConnection(pika.URLParameters(Settings().amqp_url))
    channel = connection.channel()
    topics = []

    def notify(bucket: str, exchange: str) -> None:
        s3.create_bucket(Bucket=bucket)
        attributes = rgw_topic_attributes(Settings(amqp_exchange=exchange), persistent=False)
        topics.append(sns.create_topic(Name=bucket, Attributes=attributes)["TopicArn"])
        s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={"TopicConfigurations": [{
            "Id": bucket, "TopicArn": topics[-1], "Events": ["s3:ObjectCreated:*"],
            "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "originals/"}]}}}]})

    def drain(queue: str, wait: float) -> list[bytes]:
        bodies, deadline = [], time.monotonic() + wait
        while time.monotonic() < deadline and not bodies:
            method, _, body = channel.basic_get(queue, auto_ack=True)
            if method is None:
                time.sleep(0.1)
            else:
                bodies.append(body)
        time.sleep(1)  # nothing more may arrive late either
        while (got := channel.basic_get(queue, auto_ack=True))[0] is not None:
            bodies.append(got[2])
        return bodies

    try:
        channel.queue_declare(name, exclusive=True)
        channel.queue_bind(name, exchange, routing_key=name)
        notify(name, exchange)
        key = "originals/a b+c/é.jpg"
        etag = s3.put_object(Bucket=name, Key=key, Body=b"12345")["ETag"].strip('"')
        s3.put_object(Bucket=name, Key="elsewhere/x.jpg", Body=b"1")
        bodies = drain(name, 20)

        # A topic on another exchange of the same broker: the gateway keeps one connection per
        # broker URL, refuses it ("AMQP connect: exchange mismatch" in its log) and drops the
        # event, while the upload itself succeeds.
        other = f"{name}-other"
        channel.exchange_declare(other, exchange_type="direct", auto_delete=True)
        channel.queue_declare(other, exclusive=True)
        channel.queue_bind(other, other, routing_key=other)
        notify(other, other)
        assert s3.put_object(Bucket=other, Key="originals/x.jpg", Body=b"1")["ResponseMetadata"]["HTTPStatusCode"] == 200
        assert drain(other, 2) == []
    finally:
        for arn in topics:
            sns.delete_topic(TopicArn=arn)
        connection.close()
    (body,) = bodies  # exactly one: no test event, nothing from outside originals/
    (record,) = json.loads(body)["Records"]
    assert set(record) == RGW_SHAPE["record"]
    assert set(record["s3"]["object"]) == RGW_SHAPE["object"]
    assert record["s3"]["object"]["key"] == RGW_SHAPE["key"]
    assert (record["eventSource"], record["eventName"], record["awsRegion"]) == ("ceph:s3", "ObjectCreated:Put", "")
    (parsed,) = parse_message(body)
    assert (parsed.bucket, parsed.key, parsed.size, parsed.etag) == (name, key, 5, etag)
