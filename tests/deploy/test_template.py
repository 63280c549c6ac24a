"""infra/template.yaml: cfn-lint clean, and consistent with itself, the app and the stages."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from chalicelib.config import Settings
from infra.stage_config import OUTPUT_SETTINGS, POLICY_OUTPUTS, WORKER_FUNCTION
from local.provision import TEMPLATE, load_template

ROOT = Path(__file__).resolve().parents[2]


def resources(template, kind):
    return {name: r for name, r in template["Resources"].items() if r["Type"] == kind}


def test_cfn_lint_is_clean():
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    result = subprocess.run([str(cfn_lint), str(TEMPLATE)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_queue_policy_names_the_bucket_the_template_creates():
    """The policy builds the bucket's ARN from its name (a reference would be a cycle)."""
    template = load_template()
    bucket = template["Resources"]["ImagesBucket"]
    (statement,) = template["Resources"]["EventsQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    source_arn = statement["Condition"]["ArnLike"]["aws:SourceArn"]["Fn::Sub"]
    assert source_arn == "arn:${AWS::Partition}:s3:::" + bucket["Properties"]["BucketName"]["Fn::Sub"]
    assert statement["Action"] == "sqs:SendMessage"
    assert statement["Principal"] == {"Service": "s3.amazonaws.com"}
    assert template["Resources"]["EventsQueuePolicy"]["Properties"]["Queues"] == [{"Ref": "EventsQueue"}]
    # S3 checks the queue policy when the notification is created.
    assert bucket["DependsOn"] == "EventsQueuePolicy"


def test_the_bucket_is_private_and_encrypted():
    (bucket,) = resources(load_template(), "AWS::S3::Bucket").values()
    props = bucket["Properties"]
    assert set(props["PublicAccessBlockConfiguration"].values()) == {True}
    assert len(props["PublicAccessBlockConfiguration"]) == 4
    (rule,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in ("AES256", "aws:kms")


def test_lifecycle_rules_expire_after_the_sweeper_would_have():
    """A backstop: never before a finished job's retention has run out. The app knows the
    value (it refuses a retention past it), from the stack's output."""
    template = load_template()
    (bucket,) = resources(template, "AWS::S3::Bucket").values()
    settings = Settings()
    rules = {r["Prefix"]: r for r in bucket["Properties"]["LifecycleConfiguration"]["Rules"]}
    assert set(rules) == {settings.originals_prefix, settings.renditions_prefix}
    days = template["Parameters"]["ObjectExpirationDays"]["Default"]
    assert days == settings.bucket_lifecycle_days
    assert template["Outputs"]["ObjectExpirationDays"]["Value"] == {"Ref": "ObjectExpirationDays"}
    assert OUTPUT_SETTINGS["ObjectExpirationDays"] == "bucket_lifecycle_days"
    for rule in rules.values():
        assert rule["Status"] == "Enabled"
        assert rule["ExpirationInDays"] == {"Ref": "ObjectExpirationDays"}
        assert days * 86400 > settings.retention_seconds + 86400


def test_alarms_watch_the_dead_letter_queue_and_the_oldest_event():
    template = load_template()
    alarms = {name: a["Properties"] for name, a in resources(template, "AWS::CloudWatch::Alarm").items()}
    depth = alarms["DeadLetterQueueDepthAlarm"]
    assert depth["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert depth["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": ["DeadLetterQueue", "QueueName"]}}]
    assert (depth["Threshold"], depth["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    age = alarms["OldestMessageAgeAlarm"]
    assert age["MetricName"] == "ApproximateAgeOfOldestMessage"
    assert age["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": ["EventsQueue", "QueueName"]}}]
    for alarm in (depth, age):
        assert alarm["Namespace"] == "AWS/SQS"
    for alarm in alarms.values():
        assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}]
    # The events queue is the one whose redrive names the DLQ the depth alarm watches.
    redrive = template["Resources"]["EventsQueue"]["Properties"]["RedrivePolicy"]
    assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}


def test_visibility_timeout_is_six_times_every_stages_worker_timeout_and_covers_the_lease():
    """AWS's rule for a Lambda source queue (docs/scale.md), read from the stages' config."""
    template = load_template()
    visibility = template["Resources"]["EventsQueue"]["Properties"]["VisibilityTimeout"]
    seconds = template["Parameters"][visibility["Ref"]]["Default"]
    config = json.loads((ROOT / ".chalice" / "config.json").read_text())
    for name, stage in config["stages"].items():
        if name == "local":
            continue
        assert seconds >= 6 * stage["lambda_functions"][WORKER_FUNCTION]["lambda_timeout"], name
    assert seconds >= Settings().lease_seconds
    # Lambda's other rule for its source queues: a message gets 5 receives before the DLQ.
    redrive = template["Resources"]["EventsQueue"]["Properties"]["RedrivePolicy"]
    assert redrive["maxReceiveCount"] >= 5


def test_the_table_is_on_demand_with_ttl_and_point_in_time_recovery():
    (table,) = resources(load_template(), "AWS::DynamoDB::Table").values()
    props = table["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table["DeletionPolicy"] == "Retain"


def test_the_table_streams_each_jobs_old_and_new_image_for_push():
    """DynamoJobChanges tells a status change from a write that leaves it alone by both images."""
    template = load_template()
    (table,) = resources(template, "AWS::DynamoDB::Table").values()
    assert table["Properties"]["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert template["Outputs"]["JobsTableStreamArn"]["Value"] == {"Fn::GetAtt": ["JobsTable", "StreamArn"]}
    assert OUTPUT_SETTINGS["JobsTableStreamArn"] == "push_stream_arn"


def test_outputs_give_the_app_everything_it_reads(outputs):
    template_outputs = set(load_template()["Outputs"])
    assert set(OUTPUT_SETTINGS) | set(POLICY_OUTPUTS) <= template_outputs
    # The recorded outputs the deploy tests use are those of this template (a stack without
    # the renditions distribution, whose outputs are conditional: RenditionsPublicKeyPem).
    cdn = {k for k, v in load_template()["Outputs"].items() if v.get("Condition") == "HasCdn"}
    assert cdn == {"RenditionsDomain", "RenditionsKeyPairId", "RenditionsSigningKeyArn", "RenditionsDistributionId"}
    assert set(outputs) == template_outputs - cdn
    for key in ("UserPoolId", "UserPoolClientId", "EventsQueueUrl", "DeadLetterQueueUrl", "AlarmTopicArn"):
        assert key in template_outputs  # what docs/deploy.md's commands use


def test_the_user_pool_client_can_sign_in_without_a_secret():
    template = load_template()
    props = template["Resources"]["UserPoolClient"]["Properties"]
    assert props["GenerateSecret"] is False
    assert "ALLOW_USER_PASSWORD_AUTH" in props["ExplicitAuthFlows"]  # docs/deploy.md's curl
    assert props["UserPoolId"] == {"Ref": "UserPool"}


def test_browsers_may_post_uploads_and_read_renditions_from_the_web_origin():
    template = load_template()
    (bucket,) = resources(template, "AWS::S3::Bucket").values()
    (rule,) = bucket["Properties"]["CorsConfiguration"]["CorsRules"]
    assert {"POST", "PUT", "GET"} <= set(rule["AllowedMethods"])
    assert rule["ExposedHeaders"] == ["ETag"]  # a part's ETag, for the multipart completion
    assert rule["AllowedOrigins"] == [{"Ref": "WebOrigin"}]
    # The API answers the same origin: stage_config copies the output into CORS_ALLOW_ORIGIN.
    assert template["Outputs"]["WebOrigin"]["Value"] == {"Ref": "WebOrigin"}
    assert OUTPUT_SETTINGS["WebOrigin"] == "cors_allow_origin"


def test_the_hosted_ui_signs_the_web_page_in_with_a_code_and_pkce_only_when_asked():
    template = load_template()
    props = template["Resources"]["UserPoolClient"]["Properties"]
    assert props["AllowedOAuthFlows"] == {"Fn::If": ["HasHostedUi", ["code"], {"Ref": "AWS::NoValue"}]}
    assert props["CallbackURLs"] == {"Fn::If": ["HasHostedUi", [{"Ref": "WebAppUrl"}], {"Ref": "AWS::NoValue"}]}
    assert props["GenerateSecret"] is False  # a page cannot keep one; PKCE instead
    (domain,) = resources(template, "AWS::Cognito::UserPoolDomain").values()
    assert domain["Condition"] == "HasHostedUi"


def test_the_renditions_distribution_reaches_only_renditions_through_signed_urls():
    """DELIVERY=cloudfront: origin access control, the renditions/ prefix only (the origin
    path and the bucket policy), a trusted key group, and a cache key without the signing
    parameters."""
    template = load_template()
    (distribution,) = resources(template, "AWS::CloudFront::Distribution").values()
    config = distribution["Properties"]["DistributionConfig"]
    (origin,) = config["Origins"]
    assert origin["OriginPath"] == "/renditions" and origin["S3OriginConfig"] == {"OriginAccessIdentity": ""}
    assert origin["OriginAccessControlId"] == {"Fn::GetAtt": ["RenditionsOriginAccessControl", "Id"]}
    behaviour = config["DefaultCacheBehavior"]
    assert "CacheBehaviors" not in config  # no other path pattern, no other origin
    assert behaviour["TrustedKeyGroups"] == [{"Ref": "RenditionsKeyGroup"}]
    assert behaviour["ViewerProtocolPolicy"] == "https-only" and behaviour["AllowedMethods"] == ["GET", "HEAD"]
    (policy,) = resources(template, "AWS::CloudFront::CachePolicy").values()
    keyed = policy["Properties"]["CachePolicyConfig"]["ParametersInCacheKeyAndForwardedToOrigin"]
    assert keyed["QueryStringsConfig"] == {"QueryStringBehavior": "none"}
    assert keyed["HeadersConfig"] == {"HeaderBehavior": "none"} and keyed["CookiesConfig"] == {"CookieBehavior": "none"}
    statements = template["Resources"]["ImagesBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    (cdn,) = [s["Fn::If"][1] for s in statements if "Fn::If" in s]
    assert cdn["Principal"] == {"Service": "cloudfront.amazonaws.com"} and cdn["Action"] == "s3:GetObject"
    assert cdn["Resource"] == {"Fn::Sub": "${ImagesBucket.Arn}/renditions/*"}
    assert "distribution/${RenditionsDistribution}" in cdn["Condition"]["StringEquals"]["AWS:SourceArn"]["Fn::Sub"]
    (oac,) = resources(template, "AWS::CloudFront::OriginAccessControl").values()
    assert oac["Properties"]["OriginAccessControlConfig"]["SigningBehavior"] == "always"


def test_the_service_client_gets_the_service_scope_by_client_credentials_only():
    """The app's backend: an access token with image-jobs/service, from the template's
    resource server, by the client-credentials grant; the users' client never gets it."""
    from chalicelib.http.auth import SERVICE_SCOPE

    template = load_template()
    clients = resources(template, "AWS::Cognito::UserPoolClient")
    assert set(clients) == {"UserPoolClient", "ServiceClient"}
    (server,) = resources(template, "AWS::Cognito::UserPoolResourceServer").values()
    scopes = [f"{server['Properties']['Identifier']}/{s['ScopeName']}" for s in server["Properties"]["Scopes"]]
    assert scopes == [SERVICE_SCOPE]
    props = clients["ServiceClient"]["Properties"]
    assert props["GenerateSecret"] is True and props["AllowedOAuthFlows"] == ["client_credentials"]
    assert props["AllowedOAuthScopes"] == [SERVICE_SCOPE] and props["AllowedOAuthFlowsUserPoolClient"] is True
    assert "ExplicitAuthFlows" not in props  # no user sign-in through it
    assert SERVICE_SCOPE not in json.dumps(clients["UserPoolClient"])


def test_the_list_index_is_keys_only_on_owner_then_creation():
    from chalicelib.adapters.dynamo_jobs import OWNER_CREATED_INDEX

    table = load_template()["Resources"]["JobsTable"]["Properties"]
    (index,) = [i for i in table["GlobalSecondaryIndexes"] if i["IndexName"] == OWNER_CREATED_INDEX]
    assert index["KeySchema"] == [{"AttributeName": "owner", "KeyType": "HASH"},
                                  {"AttributeName": "created_at", "KeyType": "RANGE"}]
    assert index["Projection"] == {"ProjectionType": "KEYS_ONLY"}
