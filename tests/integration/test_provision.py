"""One definition, no drift: the embedded stack is what infra/template.yaml deploys."""
import json

from chalicelib.adapters.dynamo_jobs import JobItem
from chalicelib.config import Settings
from local.provision import load_template, provision


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
    assert attrs["VisibilityTimeout"] == str(template["Parameters"]["WorkerTimeoutSeconds"]["Default"])
    redrive = json.loads(attrs["RedrivePolicy"])
    assert int(redrive["maxReceiveCount"]) == events["RedrivePolicy"]["maxReceiveCount"]
    assert int(attrs["MessageRetentionPeriod"]) == events["MessageRetentionPeriod"]


def test_provisioning_twice_changes_nothing(stack):
    settings, provisioned, clients = stack
    before = clients["s3"].get_bucket_notification_configuration(Bucket=settings.bucket)
    again = provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"])
    assert again == provisioned
    after = clients["s3"].get_bucket_notification_configuration(Bucket=settings.bucket)
    assert after["QueueConfigurations"] == before["QueueConfigurations"]  # not re-put
