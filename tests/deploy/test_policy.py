"""The stage policy allows every AWS call the code makes, and nothing else.

The calls are derived from the code, not listed by hand:
  - boto3 adapters: every method called on a client attribute (`self._client.put_object`,
    `get_paginator("list_objects_v2")`, `generate_presigned_url("get_object")`, ...), read
    from their source with ast and named by botocore's own service models;
  - the PynamoDB adapter: every public method of DynamoJobStore run against DynamoDB on
    moto's server, with each request recorded at botocore (PynamoDB picks the operations,
    so they are observed rather than guessed);
  - Lambda itself: the SQS event sources poll and the table's stream is read with the
    function's role, and every function writes its logs.
Each call is mapped to the IAM action and resource AWS authorizes it by.
"""
from __future__ import annotations

import ast
import dataclasses
import fnmatch
import inspect
from datetime import datetime, timedelta, timezone
from pathlib import Path

import boto3
import botocore.client
import pytest
from chalice.app import DynamoDBEventConfig, SQSEventConfig

from chalicelib.adapters.dynamo_jobs import DynamoJobStore
from chalicelib.adapters.dynamo_keys import DynamoKeys
from chalicelib.adapters.dynamo_rates import DynamoRateStore
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.adapters.dynamo_webhooks import DynamoWebhookStore
from chalicelib.config import Settings
from chalicelib.domain.errors import ConditionFailed, IdempotencyKeyTaken
from chalicelib.domain.jobs import Job, JobStatus, Rendition, due_shard
from chalicelib.domain.renditions import RenditionName
from chalicelib.domain.idempotency import IdempotencyRecord
from chalicelib.domain.storage import ScanPoint
from chalicelib.domain.webhooks import Breaker, Webhook
from infra.stage_config import stage_policy

ROOT = Path(__file__).resolve().parents[2]
ADAPTERS = ROOT / "chalicelib" / "adapters"
# Adapter module -> the AWS service of the boto3 client bootstrap.py hands it.
BOTO3_ADAPTERS = {"s3_store.py": "s3", "sqs_queue.py": "sqs", "sqs_webhooks.py": "sqs",
                  "sqs_depth.py": "sqs", "cloudwatch_age.py": "cloudwatch",
                  "apigw_push.py": "apigatewaymanagementapi", "cloudfront_invalidate.py": "cloudfront"}
# SQS adapter module -> the stack outputs of the queues bootstrap.py points it at.
SQS_QUEUES = {"sqs_queue.py": ("EventsQueueArn",), "sqs_webhooks.py": ("WebhookQueueArn",),
              "sqs_depth.py": ("DeadLetterQueueArn", "WebhookDeadLetterQueueArn", "WebhookQueueArn")}
# Queues a module only sends to (an event's last attempt goes to the dead letters itself).
SQS_SENDS_TO = {"sqs_webhooks.py": ("WebhookDeadLetterQueueArn",)}
PYNAMODB_ADAPTERS = {"dynamo_jobs.py", "dynamo_webhooks.py", "dynamo_rates.py", "dynamo_waits.py", "dynamo_keys.py",
                     "dynamo_push.py", "dynamo_table.py"}
# Make clients, configure them (timeouts, the time budget's hook) or sign URLs locally (a ready job's
# GET URLs), but call no operation.
SDK_HOOKS = {"sdk_limits.py", "s3_presign.py", "botocore_clients.py", "cloudfront_sign.py"}
# Not AWS, and not what a cloud stage runs (QUEUE_BACKEND stays sqs; test_stage_config);
# http_webhooks.py calls the owners' receivers.
OTHER_ADAPTERS = {"amqp.py", "http_webhooks.py"}
# Map stored items and call nothing: dynamo_shapes.py reads every stored shape of a job item.
NO_SDK = {"dynamo_shapes.py"}
SDKS = {"boto3", "botocore", "pynamodb"}
# Where IAM's action is not the operation's own name.
IAM_ACTION = {
    "s3:ListObjectsV2": "s3:ListBucket",
    "s3:HeadObject": "s3:GetObject",
    "s3:HeadBucket": "s3:ListBucket",
    "s3:DeleteObjects": "s3:DeleteObject",  # S3 authorizes each key of the batch
    "s3:CreateMultipartUpload": "s3:PutObject",
    "s3:UploadPart": "s3:PutObject",
    "s3:CompleteMultipartUpload": "s3:PutObject",
    "s3:ListParts": "s3:ListMultipartUploadParts",
    # A duplicate's renditions: PutObject on the copy, GetObject on its source
    # (test_a_duplicates_copy_may_read_its_source_and_write_its_copy).
    "s3:CopyObject": "s3:PutObject",
}
# Only a direct upload is multipart, and only originals are uploaded.
ORIGINALS_ONLY = {"s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"}
# A transaction is authorized item by item, as the single-item action.
TRANSACTION_ITEM_ACTION = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
                           "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}
SQS_EVENT_SOURCE = {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}
# Lambda's reading of a DynamoDB stream (the Lambda and DynamoDB guides' execution role):
# the stream's records, and the listing of the table's streams.
STREAM_EVENT_SOURCE = {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}
STREAM_LISTING = "dynamodb:ListStreams"
# The WebSocket API `chalice deploy` records (tests/deploy/chalice-deployed-dev.json), on
# API Gateway's stage "api"; PostToConnection is authorized as ManageConnections on it.
WEBSOCKET_API = ("w9x8y7z6v5", "api")
LOGS = {"logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"}
NOW = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)


# ---------------------------------------------------------------- calls, from the code


def test_only_adapters_and_the_composition_root_touch_an_sdk():
    """Otherwise a call could hide outside what this test reads."""
    allowed = {ADAPTERS / name for name in (*BOTO3_ADAPTERS, *PYNAMODB_ADAPTERS)}
    builders = [ROOT / "chalicelib" / "bootstrap.py", *(ADAPTERS / name for name in SDK_HOOKS)]
    allowed.update(builders)
    for path in [ROOT / "app.py", *(ROOT / "chalicelib").rglob("*.py")]:
        if path in allowed:
            continue
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module.split(".")[0])
        assert not imported & SDKS, f"{path.relative_to(ROOT)} imports {imported & SDKS}"
    # The composition root, the client factory and the hooks build or configure clients but
    # call no operation themselves.
    operations = set()
    for service in ("s3", "sqs", "dynamodb", "cloudwatch", "apigatewaymanagementapi", "cloudfront"):
        client = boto3.session.Session(region_name="us-east-1").client(service)
        operations |= set(client.meta.method_to_api_mapping)
    for path in builders:
        called = {node.func.attr for node in ast.walk(ast.parse(path.read_text()))
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)}
        assert not called & operations, f"{path.name} calls {called & operations}"
    modules = {p.name for p in ADAPTERS.glob("*.py") if p.name != "__init__.py"}
    assert modules == set(BOTO3_ADAPTERS) | PYNAMODB_ADAPTERS | OTHER_ADAPTERS | SDK_HOOKS | NO_SDK, (
        "a new adapter: teach this test which AWS service it calls, if any")


def _literal(node: ast.Call, keyword: str) -> str:
    if node.args and isinstance(node.args[0], ast.Constant):
        return node.args[0].value
    for kw in node.keywords:
        if kw.arg == keyword and isinstance(kw.value, ast.Constant):
            return kw.value.value
    raise AssertionError(f"line {node.lineno}: the operation is not a literal")


def boto3_operations(path: Path) -> set[str]:
    """Client methods (snake_case operations) called on `self.<something>client`."""
    operations = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        receiver = node.func.value
        if not (isinstance(receiver, ast.Attribute) and isinstance(receiver.value, ast.Name)
                and receiver.value.id == "self" and receiver.attr.endswith("client")):
            continue
        method = node.func.attr
        if method == "get_paginator":
            operations.add(_literal(node, "operation_name"))
        elif method == "generate_presigned_url":
            operations.add(_literal(node, "ClientMethod"))  # S3 authorizes the signed call
        elif method == "generate_presigned_post":
            operations.add("put_object")  # a POST upload is authorized as PutObject
        else:
            operations.add(method)
    return operations


def boto3_calls() -> set[tuple[str, str, str]]:
    """(module, service, API operation) of every boto3 call in the adapters."""
    calls = set()
    for module, service in BOTO3_ADAPTERS.items():
        client = boto3.session.Session(region_name="us-east-1").client(service)
        for operation in boto3_operations(ADAPTERS / module):
            assert operation in client.meta.method_to_api_mapping, f"{module}: {service}.{operation}?"
            calls.add((module, service, client.meta.method_to_api_mapping[operation]))
    return calls


def test_the_boto3_reading_finds_the_calls_we_know_of():
    """A guard on the ast reading itself, not the list the policy is checked against."""
    calls = {(service, operation) for _, service, operation in boto3_calls()}
    assert {("s3", "PutObject"), ("s3", "ListObjectsV2"), ("sqs", "SendMessage"),
            ("sqs", "ChangeMessageVisibility")} <= calls


@pytest.fixture
def recorded_dynamodb_calls(stack, monkeypatch):
    """Run every public method of the PynamoDB stores against moto; record each botocore request."""
    settings, _, _ = stack
    calls = []
    make_api_call = botocore.client.BaseClient._make_api_call

    def recording(client, operation, params):
        calls.append((client.meta.service_model.service_name, operation, params))
        return make_api_call(client, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", recording)
    for cls, run in ((DynamoJobStore, exercise), (DynamoWebhookStore, exercise_webhooks),
                     (DynamoRateStore, exercise_rates), (DynamoKeys, exercise_keys)):
        exercised = run(cls(DynamoTable(settings.table, settings.region, settings.endpoint_url)))
        public = {name for name, _ in inspect.getmembers(cls, inspect.isfunction)
                  if not name.startswith("_")}
        assert exercised == public, f"the exercise must call every public method of {cls.__name__}"
    return settings, calls


def exercise_rates(store: DynamoRateStore) -> set[str]:
    now = NOW.timestamp()
    store.take_from_full("alice", now, 0.1, 4.0)
    store.take("alice", now, 0.1, 4.0)
    with pytest.raises(ConditionFailed):
        store.take_from_full("alice", now, 0.1, 4.0)
    assert store.full_at("alice") == pytest.approx(now + 0.2)
    assert store.full_at("bob") is None
    return {"take_from_full", "take", "full_at"}


def exercise_keys(store: DynamoKeys) -> set[str]:
    assert store.key("page-token") == store.key("page-token")  # read, made, read; then known
    return {"key"}


def exercise_webhooks(store: DynamoWebhookStore) -> set[str]:
    called = set()

    def call(name, *args, **kwargs):
        called.add(name)
        return getattr(store, name)(*args, **kwargs)

    hook = Webhook(owner="alice", url="https://example.com/h", secret="whsec_AAAA", created_at=NOW)
    call("create_webhook", hook)
    with pytest.raises(ConditionFailed):
        call("create_webhook", hook)
    call("get_webhook", "alice")
    assert call("get_webhooks", ["alice", "@service"]).keys() == {"alice"}  # BatchGetItem
    call("update_webhook", dataclasses.replace(hook, secret="whsec_BBBB"), seen=hook)
    call("save_breaker", "alice", Breaker(failing_until=NOW, failures=1, suspect_event="msg_1"))
    call("save_breaker", "alice", Breaker())
    call("delete_webhook", "alice")
    call("save_breaker", "alice", Breaker(failing_until=NOW))  # gone: a no-op
    return called


def exercise(store: DynamoJobStore) -> set[str]:
    """Each method the service uses, on its successful and its conditional-failure path."""
    called = set()

    def call(name, *args, **kwargs):
        called.add(name)
        return getattr(store, name)(*args, **kwargs)

    def job(job_id):
        return Job(job_id=job_id, owner="alice", status=JobStatus.QUEUED, created_at=NOW,
                   updated_at=NOW, expires_at=NOW + timedelta(days=7),
                   original_key=f"originals/{job_id}", sweep_at=NOW)

    week = timedelta(days=7)
    call("create", job("j1"), 20)
    call("active_jobs", "alice")
    key = IdempotencyRecord(scope="alice:images:k", fingerprint="f", job_id="j2",
                            expires_at=NOW + timedelta(days=1))
    call("create_with_key", job("j2"), key, NOW, 20)
    with pytest.raises(IdempotencyKeyTaken):
        call("create_with_key", job("j3"), IdempotencyRecord("alice:images:k", "f", "j3", key.expires_at), NOW, 20)
    call("get_idempotency", key.scope)
    call("get", "j1")
    call("objects_of", ["j1", "j2", "nope"])  # BatchGetItem
    call("save_scan_point", "originals/0", ScanPoint(after="originals/0abc", pass_started=NOW))  # PutItem
    call("scan_points", ["originals/0", "originals/1"])  # BatchGetItem
    call("due", JobStatus.QUEUED, NOW + timedelta(minutes=1), 10, shard=due_shard("j1"))
    page = call("owned", "alice", 1)  # Query on the owner index, then BatchGetItem
    call("owned", "alice", 1, page.last, NOW - timedelta(days=1), NOW + timedelta(days=1))
    lease = timedelta(seconds=120)
    claimed = call("claim", "j1", NOW, lease, 3)
    call("release_lease", "j1", claimed.attempt, NOW + timedelta(seconds=1))
    claimed = call("claim", "j1", NOW + timedelta(seconds=2), lease, 3)
    ready = claimed.ready(NOW + timedelta(seconds=3),
                          {RenditionName.DISPLAY: Rendition("renditions/j1/d.jpg", 1280, 960),
                           RenditionName.THUMB: Rendition("renditions/j1/t.jpg", 256, 256)}, week)
    call("finish_attempt", ready, claimed.attempt)
    with pytest.raises(ConditionFailed):
        call("finish_attempt", ready, claimed.attempt)
    call("note_content", "alice", "ab" * 32, "j1", ready.expires_at)  # the duplicate index: PutItem
    call("same_content", "alice", "ab" * 32)  # GetItem
    j2 = call("get", "j2")
    call("update_if_unchanged", j2.resent(NOW, week), j2)
    call("move", j2.cancelled(NOW, week), JobStatus.QUEUED)
    call("release_idempotency", key.scope, "j2")
    call("release_place", "alice", "j1")
    call("delete", "j1")
    call("delete_many", ["j2", "j3"])  # BatchWriteItem
    return called


def dynamodb_permissions(calls, test_table: str, table_arn: str) -> set[tuple[str, str]]:
    """(IAM action, resource) of each recorded request, named as the stack's table."""
    needed = set()

    def on(params: dict) -> str:
        assert params["TableName"] == test_table
        index = params.get("IndexName")
        return f"{table_arn}/index/{index}" if index else table_arn

    for service, operation, params in calls:
        assert service == "dynamodb", f"the job store called {service}.{operation}"
        if operation in ("BatchWriteItem", "BatchGetItem"):  # authorized per table named
            for table in params["RequestItems"]:
                needed.add((f"dynamodb:{operation}", on({"TableName": table})))
        elif operation in ("TransactWriteItems", "TransactGetItems"):
            for item in params["TransactItems"]:
                ((kind, body),) = item.items()
                needed.add((f"dynamodb:{TRANSACTION_ITEM_ACTION[kind]}", on(body)))
        else:
            needed.add((f"dynamodb:{operation}", on(params)))
    return needed


# ---------------------------------------------------------------- needs -> resources


def app_of_the_stage(outputs, monkeypatch):
    """app.py as the cloud stage loads it: with the stack's stream, so its push handlers are
    declared (a fresh module: the tests' own `app` stays as it was)."""
    import importlib.util

    monkeypatch.setenv("PUSH_STREAM_ARN", outputs["JobsTableStreamArn"])
    spec = importlib.util.spec_from_file_location("app_of_the_stage", ROOT / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.app


# A stage that delivers through the distribution and invalidates it on DELETE.
INVALIDATING = Settings(delivery="cloudfront", cloudfront_domain="d111111abcdef8.cloudfront.net",
                        cloudfront_key_pair_id="K2JCJMDEHXQW5F", cloudfront_private_key_secret="arn:secret",
                        invalidate_on_delete=True, cloudfront_distribution_id="E2QWRUHAPOMQZL")


def required_permissions(outputs, test_table, dynamodb_calls, application,
                         settings: Settings = Settings()) -> set[tuple[str, str]]:
    region, account = outputs["JobsTableArn"].split(":")[3:5]
    api_id, api_stage = WEBSOCKET_API
    bucket = outputs["ImagesBucketArn"]
    objects = [f"{bucket}/{prefix}*" for prefix in (settings.originals_prefix, settings.renditions_prefix)]
    needed = set()
    for module, service, operation in boto3_calls():
        action = IAM_ACTION.get(f"{service}:{operation}", f"{service}:{operation}")
        if service == "sqs":
            needed |= {(action, outputs[queue]) for queue in SQS_QUEUES[module]}
            if action in ("sqs:SendMessage", "sqs:GetQueueUrl"):
                needed |= {(action, outputs[queue]) for queue in SQS_SENDS_TO.get(module, ())}
        elif service == "cloudwatch":
            needed.add((action, "*"))  # reading metrics has no resource-level permissions
        elif service == "cloudfront":  # only a stage that invalidates, on its distribution
            if settings.invalidate_on_delete:
                needed.add((action, f"arn:aws:cloudfront::{account}:distribution/{settings.cloudfront_distribution_id}"))
        elif service == "apigatewaymanagementapi":  # the API's @connections, POST for a send
            needed.add(("execute-api:ManageConnections",
                        f"arn:aws:execute-api:{region}:{account}:{api_id}/{api_stage}/POST/@connections/*"))
        elif action == "s3:ListBucket":
            needed.add((action, bucket))
        elif action in ORIGINALS_ONLY:
            needed.add((action, f"{bucket}/{settings.originals_prefix}*"))
        else:
            needed |= {(action, arn) for arn in objects}
    needed |= dynamodb_permissions(dynamodb_calls, test_table, outputs["JobsTableArn"])
    # Each SQS event source is wired by a queue name that a stack output replaces.
    sources = {settings.events_queue_name: outputs["EventsQueueArn"],
               settings.webhook_queue_name: outputs["WebhookQueueArn"]}
    seen = set()
    for source in application.event_sources:
        if isinstance(source, SQSEventConfig):
            assert source.queue in sources, source.queue
            seen.add(source.queue)
            needed |= {(action, sources[source.queue]) for action in SQS_EVENT_SOURCE}
        elif isinstance(source, DynamoDBEventConfig):
            assert source.stream_arn == outputs["JobsTableStreamArn"]
            seen.add(source.stream_arn)
            needed |= {(action, source.stream_arn) for action in STREAM_EVENT_SOURCE}
            needed.add((STREAM_LISTING, outputs["JobsTableArn"] + "/stream/*"))
    assert seen == set(sources) | {outputs["JobsTableStreamArn"]}
    return needed


def granted(policy: dict) -> set[tuple[str, str]]:
    pairs = set()
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow"
        actions = statement["Action"]
        resources = statement["Resource"]
        for action in [actions] if isinstance(actions, str) else actions:
            assert "*" not in action, f"a wildcard action: {action}"
            for resource in [resources] if isinstance(resources, str) else resources:
                pairs.add((action, resource))
    return pairs


@pytest.mark.parametrize("stage_settings", [Settings(), INVALIDATING], ids=["s3", "cloudfront_invalidating"])
def test_the_stage_policy_allows_exactly_what_the_code_calls(recorded_dynamodb_calls, outputs, monkeypatch,
                                                            stage_settings):
    settings, calls = recorded_dynamodb_calls
    policy = stage_policy(outputs, stage_settings, "image-jobs", "dev", WEBSOCKET_API)
    needed = required_permissions(outputs, settings.table, calls, app_of_the_stage(outputs, monkeypatch),
                                  stage_settings)
    allowed = {(a, r) for a, r in granted(policy) if not a.startswith("logs:")}
    assert needed - allowed == set(), "the code makes calls the policy denies"
    assert allowed - needed == set(), "the policy allows calls the code never makes"


def test_the_transaction_and_the_index_are_what_pynamodb_really_sends(recorded_dynamodb_calls):
    _, calls = recorded_dynamodb_calls
    operations = {operation for _, operation, _ in calls}
    assert "TransactWriteItems" in operations and "Query" in operations
    # PynamoDB 6 knows the schema from the model: it never asks DescribeTable.
    assert "DescribeTable" not in operations


def test_logs_only_for_the_stages_own_functions(outputs):
    policy = stage_policy(outputs, Settings(), "image-jobs", "dev")
    logs = {(a, r) for a, r in granted(policy) if a.startswith("logs:")}
    assert {a for a, _ in logs} == LOGS
    (resource,) = {r for _, r in logs}
    assert resource == "arn:aws:logs:us-east-1:123456789012:log-group:/aws/lambda/image-jobs-dev*"
    for function in ("image-jobs-dev", "image-jobs-dev-handle_object_created", "image-jobs-dev-sweep",
                     "image-jobs-dev-sweep_orphans", "image-jobs-dev-deliver_webhook",
                     "image-jobs-dev-push_job_changes", "image-jobs-dev-websocket_connect",
                     "image-jobs-dev-websocket_disconnect"):
        assert fnmatch.fnmatchcase(f"arn:aws:logs:us-east-1:123456789012:log-group:/aws/lambda/{function}:log-stream:x", resource)


# ---------------------------------------------------------------- a missing key reads as 404


def allows(policy: dict, action: str, resource: str, context: dict[str, str]) -> bool:
    """IAM's evaluation for our policies' shape (Allow statements; StringLike/StringEquals
    conditions): a condition on a key the request does not carry never matches."""
    operators = {"StringLike": fnmatch.fnmatchcase, "StringEquals": str.__eq__}
    for statement in policy["Statement"]:
        actions, resources = statement["Action"], statement["Resource"]
        if action not in ([actions] if isinstance(actions, str) else actions):
            continue
        if not any(fnmatch.fnmatchcase(resource, r) for r in ([resources] if isinstance(resources, str) else resources)):
            continue
        conditions = statement.get("Condition", {})
        if all(key in context and any(operators[op](context[key], v) for v in ([values] if isinstance(values, str) else values))
               for op, keyed in conditions.items() for key, values in keyed.items()):
            return True
    return False


# S3, for a GetObject or HeadObject of a key that does not exist, answers 404 only if the
# caller may s3:ListBucket the bucket, checked for a request that carries no s3:prefix;
# otherwise 403, which the adapters rightly treat as an outage (retried, then
# processing_failed) instead of upload_missing.
MISSING_KEY_CHECK = ("s3:ListBucket", {})


def test_a_missing_original_reads_as_404_under_the_stage_policy(outputs):
    policy = stage_policy(outputs, Settings(), "image-jobs", "dev")
    action, context = MISSING_KEY_CHECK
    assert allows(policy, action, outputs["ImagesBucketArn"], context)
    # And the reads themselves, on the objects.
    original = f"{outputs['ImagesBucketArn']}/{Settings().originals_prefix}5a3e2c1d"
    assert allows(policy, "s3:GetObject", original, {})


def test_a_duplicates_copy_may_read_its_source_and_write_its_copy(outputs):
    """S3 authorizes CopyObject as GetObject on the source and PutObject on the copy, both
    renditions (chalicelib/usecases/duplicates.py)."""
    policy = stage_policy(outputs, Settings(), "image-jobs", "dev")
    rendition = f"{outputs['ImagesBucketArn']}/{Settings().renditions_prefix}5a3e2c1d/1/display.jpg"
    assert allows(policy, "s3:GetObject", rendition, {})
    assert allows(policy, "s3:PutObject", rendition, {})


def test_a_prefix_condition_on_listing_would_make_it_403():
    """Guards the evaluator above: the statement this project used to grant is refused."""
    bucket = "arn:aws:s3:::b"
    old = {"Statement": [{"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket],
                          "Condition": {"StringLike": {"s3:prefix": ["originals/*", "renditions/*"]}}}]}
    action, context = MISSING_KEY_CHECK
    assert not allows(old, action, bucket, context)
    assert allows(old, action, bucket, {"s3:prefix": "originals/x"})  # a listing would pass


def test_the_worker_and_sweeper_ask_for_a_missing_original_with_calls_the_policy_allows(outputs):
    """HeadObject (the sweeper) and GetObject (the worker) are both authorized as
    s3:GetObject; the 404 comes with the listing permission above."""
    calls = {(service, operation) for _, service, operation in boto3_calls()}
    assert {("s3", "HeadObject"), ("s3", "GetObject")} <= calls
    policy = stage_policy(outputs, Settings(), "image-jobs", "dev")
    (listing,) = [st for st in policy["Statement"] if st["Action"] == ["s3:ListBucket"]]
    assert "Condition" not in listing and listing["Resource"] == [outputs["ImagesBucketArn"]]
