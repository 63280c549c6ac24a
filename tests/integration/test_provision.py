"""One definition, no drift: the embedded stack is what infra/template.yaml deploys."""
import json
import threading
import uuid

import pytest
from pynamodb.attributes import TTLAttribute

from chalicelib.adapters.dynamo_jobs import (
    OWNER_CREATED_INDEX, DUE_INDEX, IdempotencyItem, JobItem, job_model,
)
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.config import INCOMPLETE_UPLOAD_DAYS, Settings
from local.provision import bucket_lifecycle_rules, load_template, provision
from local.services import aws_client


def resources(kind):
    template = load_template()
    return [r["Properties"] for r in template["Resources"].values() if r["Type"] == kind]


def test_template_and_app_agree_on_prefixes_keys_and_ttl():
    (bucket,) = resources("AWS::S3::Bucket")
    (table,) = resources("AWS::DynamoDB::Table")
    defaults = Settings()
    (qc,) = bucket["NotificationConfiguration"]["QueueConfigurations"]
    assert qc["Event"] == "s3:ObjectCreated:*"
    assert qc["Filter"]["S3Key"]["Rules"] == [{"Name": "prefix", "Value": defaults.originals_prefix}]
    assert not defaults.renditions_prefix.startswith(defaults.originals_prefix)
    assert table["KeySchema"] == [{"AttributeName": JobItem._hash_keyname, "KeyType": "HASH"}]
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert "expires_at" in JobItem.get_attributes()
    lifecycle = {r["Prefix"] for r in bucket["LifecycleConfiguration"]["Rules"]}
    assert lifecycle == {defaults.originals_prefix, defaults.renditions_prefix}


def test_the_bucket_aborts_incomplete_uploads_as_the_template_says(stack):
    settings, _, clients = stack
    (bucket,) = resources("AWS::S3::Bucket")
    rules = clients["s3"].get_bucket_lifecycle_configuration(Bucket=settings.bucket)["Rules"]
    originals = next(r for r in rules if r["Filter"]["Prefix"] == settings.originals_prefix)
    assert originals["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": INCOMPLETE_UPLOAD_DAYS}
    assert rules == bucket_lifecycle_rules(bucket, load_template())


def test_the_embedded_stack_matches_the_template(stack):
    settings, provisioned, clients = stack
    template = load_template()
    (table,) = resources("AWS::DynamoDB::Table")
    described = clients["dynamodb"].describe_table(TableName=settings.table)["Table"]
    assert described["KeySchema"] == table["KeySchema"]
    assert described["BillingModeSummary"]["BillingMode"] == table["BillingMode"]
    ttl = clients["dynamodb"].describe_time_to_live(TableName=settings.table)["TimeToLiveDescription"]
    assert ttl["AttributeName"] == table["TimeToLiveSpecification"]["AttributeName"]
    assert ttl["TimeToLiveStatus"] == "ENABLED"

    notification = clients["s3"].get_bucket_notification_configuration(Bucket=settings.bucket)
    (qc,) = notification["QueueConfigurations"]
    assert qc["QueueArn"] == provisioned.queue_arn
    (rule,) = qc["Filter"]["Key"]["FilterRules"]
    assert (rule["Name"].lower(), rule["Value"]) == ("prefix", settings.originals_prefix)
    assert qc["Events"] == ["s3:ObjectCreated:*"]

    events = template["Resources"]["EventsQueue"]["Properties"]
    attrs = clients["sqs"].get_queue_attributes(QueueUrl=provisioned.queue_url, AttributeNames=["All"])["Attributes"]
    visibility = events["VisibilityTimeout"]["Ref"]
    assert attrs["VisibilityTimeout"] == str(template["Parameters"][visibility]["Default"])
    redrive = json.loads(attrs["RedrivePolicy"])
    assert int(redrive["maxReceiveCount"]) == events["RedrivePolicy"]["maxReceiveCount"]
    assert int(attrs["MessageRetentionPeriod"]) == events["MessageRetentionPeriod"]
    # The redrive names the dead-letter queue the runner made, with the template's retention.
    dead_letter = clients["sqs"].get_queue_attributes(QueueUrl=provisioned.dead_letter_url,
                                                      AttributeNames=["All"])["Attributes"]
    assert redrive["deadLetterTargetArn"] == dead_letter["QueueArn"]
    dead_letter_logical = events["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
    dead_letter_props = template["Resources"][dead_letter_logical]["Properties"]
    assert int(dead_letter["MessageRetentionPeriod"]) == dead_letter_props["MessageRetentionPeriod"]


def test_the_embedded_table_has_the_templates_index_and_attribute_types(stack):
    settings, _, clients = stack
    (table,) = resources("AWS::DynamoDB::Table")
    described = clients["dynamodb"].describe_table(TableName=settings.table)["Table"]
    assert sorted(described["AttributeDefinitions"], key=str) == sorted(table["AttributeDefinitions"], key=str)
    indexes = {i["IndexName"]: i for i in described["GlobalSecondaryIndexes"]}
    for index in table["GlobalSecondaryIndexes"]:
        assert indexes[index["IndexName"]]["KeySchema"] == index["KeySchema"]
        assert indexes[index["IndexName"]]["Projection"]["ProjectionType"] == index["Projection"]["ProjectionType"]
    assert set(indexes) == {i["IndexName"] for i in table["GlobalSecondaryIndexes"]}


def test_template_table_keys_are_the_models():
    """What PynamoDB reads and writes: the hash key, the due index and their types."""
    (table,) = resources("AWS::DynamoDB::Table")
    types = {d["AttributeName"]: d["AttributeType"] for d in table["AttributeDefinitions"]}
    model = job_model(DynamoTable("t", "us-east-1", None))
    indexes = {i["IndexName"]: i for i in table["GlobalSecondaryIndexes"]}
    assert set(indexes) == {DUE_INDEX, OWNER_CREATED_INDEX}
    for name, model_index in ((DUE_INDEX, model.due_index),
                              (OWNER_CREATED_INDEX, model.owner_created_index)):
        index, schema = indexes[name], model_index._get_schema()
        # PynamoDB lists the keys in its attributes' order, by name: compare them as a set.
        assert sorted(index["KeySchema"], key=str) == sorted(schema["key_schema"], key=str)
        assert index["Projection"]["ProjectionType"] == schema["projection"]["ProjectionType"]
    attributes = model.get_attributes()
    for name, kind in types.items():
        assert attributes[name].attr_type == kind, name
    for item in (JobItem, IdempotencyItem):
        assert item._hash_keyname == "pk"
        assert isinstance(item.get_attributes()["expires_at"], TTLAttribute)


def test_provisioning_twice_changes_nothing(stack):
    settings, provisioned, clients = stack
    before = clients["s3"].get_bucket_notification_configuration(Bucket=settings.bucket)
    again = provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"])
    assert again == provisioned
    after = clients["s3"].get_bucket_notification_configuration(Bucket=settings.bucket)
    assert after["QueueConfigurations"] == before["QueueConfigurations"]  # not re-put


class LinedUp:
    """Holds each write call (create, put, update) until the other provisioner makes the same
    one, so both have looked before either writes: the race of LocalStack's init hook and the
    runner, every time rather than now and then."""

    WRITES = ("Create", "Put", "Update")

    def __init__(self, parties: int = 2, wait: float = 3):
        self.parties, self.wait = parties, wait
        self.barriers: dict[tuple, threading.Barrier] = {}
        self.lock = threading.Lock()

    def attach(self, client) -> None:
        client.meta.events.register("before-call", self._hold)

    def _hold(self, model, params, **_):
        if not model.name.startswith(self.WRITES):
            return
        what = (model.service_model.service_name, model.name,
                params.get("QueueName") or params.get("Bucket") or params.get("TableName"))
        with self.lock:
            barrier = self.barriers.setdefault(what, threading.Barrier(self.parties))
        try:
            barrier.wait(self.wait)
        except threading.BrokenBarrierError:
            pass  # the other went another way (it found the resource made): carry on alone


@pytest.fixture(params=["moto", "localstack"])
def endpoint(request):
    if request.param == "moto":
        return request.getfixturevalue("moto_endpoint")
    return request.getfixturevalue("localstack").endpoint


def test_two_provisioners_at_once_both_succeed_with_one_set_of_resources(endpoint, settings_for):
    settings = settings_for(endpoint_url=endpoint, webhook_queue_name=f"webhooks-{uuid.uuid4().hex[:10]}")
    lined_up = LinedUp()
    results, errors = [], []

    def provision_once():
        clients = {n: aws_client(n, settings.region, endpoint) for n in ("sqs", "s3", "dynamodb")}
        for client in clients.values():
            lined_up.attach(client)
        try:
            results.append(provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"]))
        except Exception as error:  # noqa: BLE001 (the test reports it)
            errors.append(error)

    threads = [threading.Thread(target=provision_once) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    first, second = results
    assert first == second

    sqs, s3, dynamodb = (aws_client(n, settings.region, endpoint) for n in ("sqs", "s3", "dynamodb"))
    for name, urls in ((settings.events_queue_name, [first.queue_url, first.dead_letter_url]),
                       (settings.webhook_queue_name, [first.webhook_queue_url, first.webhook_dead_letter_url])):
        assert sorted(sqs.list_queues(QueueNamePrefix=name).get("QueueUrls", [])) == sorted(urls)
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]].count(settings.bucket) == 1
    (config,) = s3.get_bucket_notification_configuration(Bucket=settings.bucket)["QueueConfigurations"]
    assert config["QueueArn"] == first.queue_arn
    # Every page: the suite's shared server may hold more than one page's 100 tables.
    tables = [name for page in dynamodb.get_paginator("list_tables").paginate() for name in page["TableNames"]]
    assert tables.count(settings.table) == 1
    described = dynamodb.describe_table(TableName=settings.table)["Table"]
    assert described["TableStatus"] == "ACTIVE"
    (table,) = resources("AWS::DynamoDB::Table")
    assert ({i["IndexName"] for i in described["GlobalSecondaryIndexes"]}
            == {i["IndexName"] for i in table["GlobalSecondaryIndexes"]})
    ttl = dynamodb.describe_time_to_live(TableName=settings.table)["TimeToLiveDescription"]
    assert ttl["TimeToLiveStatus"] == "ENABLED"
