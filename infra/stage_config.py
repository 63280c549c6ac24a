"""Copy a deployed stack's outputs into .chalice/: the stage's variables and its IAM policy.

    python -m infra.stage_config dev                   # reads stack image-jobs-dev
    python -m infra.stage_config prod --stack my-stack --region eu-west-1
    python -m infra.stage_config dev --outputs outputs.json   # offline, from saved outputs

As the chalice-workshop's recordresources.py does, this writes the names of the bucket,
table, queue and user pool into `stages.<stage>.environment_variables` of
.chalice/config.json (other keys are kept), and writes .chalice/policy-<stage>.json: the
stage's least-privilege policy (config.json sets `autogen_policy: false`), naming exactly
this stack's resources. Run it again whenever the stack is replaced.

Push's WebSocket API is Chalice's (the stage's first `chalice deploy` creates it), so its URL
and the policy's ManageConnections on it come from Chalice's record of the last deploy,
.chalice/deployed/<stage>.json, once there is one: `make deploy` runs this again after
deploying, and deploys a second time when that changed the stage.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Mapping

from chalicelib.adapters.dynamo_jobs import OWNER_CREATED_INDEX, DUE_INDEX
from chalicelib.config import Settings, env_name
from infra.capacity import VISIBILITY_PER_FUNCTION_TIMEOUT

ROOT = Path(__file__).resolve().parent.parent

# Stack output -> the Settings field it fills. The environment variable's name comes from
# chalicelib/config.py, so the stack and the app cannot disagree on it.
OUTPUT_SETTINGS = {
    "ImagesBucket": "bucket",
    "JobsTable": "table",
    "EventsQueueName": "events_queue_name",
    "DeadLetterQueueName": "events_dead_letter_queue",
    "WebhookQueueName": "webhook_queue_name",
    "WebhookDeadLetterQueueName": "webhook_dead_letter_queue",
    "MetricsService": "metrics_service",
    "UserPoolArn": "cognito_user_pool_arn",
    # Whose ID tokens name an owner (chalicelib/http/auth.py cognito_owner).
    "UserPoolClientId": "cognito_app_client_ids",
    # The bucket's CORS origin, so that the API answers the same page (docs/web.md).
    "WebOrigin": "cors_allow_origin",
    # The app refuses a retention the bucket's lifecycle would cut short.
    "ObjectExpirationDays": "bucket_lifecycle_days",
    # Push's trigger; with it the app declares the WebSocket API (app.py).
    "JobsTableStreamArn": "push_stream_arn",
}
# lambda_functions.<name>.lambda_timeout -> the Settings field the app budgets time with
# (chalicelib/runtime/deadline.py); the lease must also outlast the worker's (Settings._check).
FUNCTION_TIMEOUTS = {
    "api_handler": "api_timeout_seconds",
    "handle_object_created": "worker_timeout_seconds",
    "sweep": "sweep_timeout_seconds",
    "sweep_orphans": "orphan_scan_timeout_seconds",
    "deliver_webhook": "webhook_function_timeout_seconds",
    "push_job_changes": "push_stream_timeout_seconds",
}
# The outputs the policy names, beside those above.
POLICY_OUTPUTS = ("ImagesBucketArn", "JobsTableArn", "EventsQueueArn", "DeadLetterQueueArn",
                  "WebhookQueueArn", "WebhookDeadLetterQueueArn")
WORKER_FUNCTION = "handle_object_created"
WEBHOOK_FUNCTION = "deliver_webhook"
# Lambda sets these itself and refuses a function that sets them.
LAMBDA_RESERVED = {
    "_HANDLER", "_X_AMZN_TRACE_ID", "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_EXECUTION_ENV",
    "AWS_LAMBDA_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "AWS_LAMBDA_FUNCTION_VERSION",
    "AWS_LAMBDA_INITIALIZATION_TYPE", "AWS_LAMBDA_LOG_GROUP_NAME", "AWS_LAMBDA_LOG_STREAM_NAME",
    "AWS_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
    "AWS_LAMBDA_RUNTIME_API", "LAMBDA_TASK_ROOT", "LAMBDA_RUNTIME_DIR",
}


_DEPLOYED = {"CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "IMPORT_COMPLETE"}


class StageConfigError(Exception):
    """The stack and the stage's settings do not fit together; nothing was written."""


def stack_outputs(stack: str, region: str | None) -> dict[str, str]:
    import boto3

    cloudformation = boto3.session.Session(region_name=region).client("cloudformation")
    (described,) = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    if described["StackStatus"] not in _DEPLOYED:
        raise StageConfigError(f"stack {stack} is {described['StackStatus']}, not deployed")
    return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}


def read_outputs_file(path: Path) -> dict[str, str]:
    """`aws cloudformation describe-stacks --query Stacks[0].Outputs` output, or a plain map."""
    data = json.loads(path.read_text())
    if isinstance(data, dict) and "Stacks" in data:
        data = data["Stacks"][0]["Outputs"]
    if isinstance(data, list):
        return {o["OutputKey"]: o["OutputValue"] for o in data}
    return dict(data)


def environment_for(outputs: Mapping[str, str], stage_config: Mapping | None = None) -> dict[str, str]:
    missing = [key for key in (*OUTPUT_SETTINGS, *POLICY_OUTPUTS) if not outputs.get(key)]
    if missing:
        raise StageConfigError(f"the stack has no output {', '.join(missing)}: "
                               "deploy infra/template.yaml from this checkout first")
    env = {env_name(field): outputs[key] for key, field in OUTPUT_SETTINGS.items()}
    if outputs.get("RenditionsDomain"):  # the stack has the distribution (RenditionsPublicKeyPem)
        env.update({env_name("delivery"): "cloudfront",
                    env_name("cloudfront_domain"): outputs["RenditionsDomain"],
                    env_name("cloudfront_key_pair_id"): outputs["RenditionsKeyPairId"],
                    env_name("cloudfront_private_key_secret"): outputs["RenditionsSigningKeyArn"]})
        if outputs.get("RenditionsDistributionId"):  # a stack deployed before it has none
            env[env_name("cloudfront_distribution_id")] = outputs["RenditionsDistributionId"]
    functions = (stage_config or {}).get("lambda_functions", {})
    for function, field in FUNCTION_TIMEOUTS.items():
        timeout = functions.get(function, {}).get("lambda_timeout", (stage_config or {}).get("lambda_timeout"))
        if timeout is not None:
            env[env_name(field)] = str(timeout)
    return env


def deployed_websocket_api(project_dir: Path, stage: str) -> str | None:
    """The WebSocket API's id from Chalice's record of the stage's last deploy; None before
    the first (that deploy creates it: `make deploy` then writes the stage again)."""
    path = project_dir / ".chalice" / "deployed" / f"{stage}.json"
    if not path.exists():
        return None
    for resource in json.loads(path.read_text()).get("resources", []):
        if resource.get("resource_type") == "websocket_api":
            return resource["websocket_api_id"]
    return None


def push_endpoints(api_id: str, region: str, partition: str, api_stage: str) -> dict[str, str]:
    """PUSH_URL and PUSH_MANAGEMENT_URL of a WebSocket API: the host Chalice's
    configure_from_api_id builds, wss:// for clients and https:// for PostToConnection."""
    suffix = "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"
    host = f"{api_id}.execute-api.{region}.{suffix}/{api_stage}"
    return {env_name("push_url"): f"wss://{host}", env_name("push_management_url"): f"https://{host}"}


def _with_push_endpoints(env: dict, project_dir: Path, stage: str, stage_config: Mapping,
                         outputs: Mapping[str, str]) -> tuple[str, str] | None:
    """Set the WebSocket API's URLs in `env` once it is deployed (never a stale one before);
    its (id, API Gateway stage) for the policy, or None."""
    api_id = deployed_websocket_api(project_dir, stage) if outputs.get("JobsTableStreamArn") else None
    if api_id is None:
        for field in ("push_url", "push_management_url"):
            env.pop(env_name(field), None)
        return None
    api_stage = stage_config.get("api_gateway_stage", "api")
    partition, region, _ = _arn_parts(outputs["JobsTableArn"])
    env.update(push_endpoints(api_id, region, partition, api_stage))
    return api_id, api_stage


def _arn_parts(arn: str) -> tuple[str, str, str]:
    """(partition, region, account) of a regional ARN."""
    _, partition, _, region, account, _ = arn.split(":", 5)
    return partition, region, account


def stage_policy(outputs: Mapping[str, str], settings: Settings, app_name: str, stage: str,
                 websocket_api: tuple[str, str] | None = None) -> dict:
    """What the functions of one stage may do: the calls chalicelib/adapters make, the
    SQS event source's polling, the stream's reading, and their own logs; with
    `websocket_api` (its id and API Gateway stage), posting to its connections.
    tests/deploy/test_policy.py derives the calls from the code and checks this list
    against them, both ways."""
    bucket_arn = outputs["ImagesBucketArn"]
    table_arn = outputs["JobsTableArn"]
    partition, region, account = _arn_parts(table_arn)
    prefixes = (settings.originals_prefix, settings.renditions_prefix)
    # Chalice names the functions <app>-<stage> (the API) and <app>-<stage>-<handler>.
    log_groups = f"arn:{partition}:logs:{region}:{account}:log-group:/aws/lambda/{app_name}-{stage}*"
    push = []
    if outputs.get("JobsTableStreamArn"):
        push += [
            {
                "Sid": "PushStream",
                "Effect": "Allow",
                # The stream's event source reads with the function's role: this stream only.
                "Action": ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"],
                "Resource": [outputs["JobsTableStreamArn"]],
            },
            {
                "Sid": "PushStreamList",
                "Effect": "Allow",
                # ListStreams names no one stream: the table's streams, no other table's.
                "Action": ["dynamodb:ListStreams"],
                "Resource": [f"{table_arn}/stream/*"],
            },
        ]
    if outputs.get("RenditionsSigningKeyArn"):
        push.append({
            "Sid": "RenditionsSigningKey",
            "Effect": "Allow",
            # DELIVERY=cloudfront: the URL signing key, read once per warm function; this secret only.
            "Action": ["secretsmanager:GetSecretValue"],
            "Resource": [outputs["RenditionsSigningKeyArn"]],
        })
    if settings.invalidate_on_delete:
        push.append({
            "Sid": "RenditionsInvalidation",
            "Effect": "Allow",
            # A DELETE's invalidation of the job's renditions (INVALIDATE_ON_DELETE), on the
            # stage's distribution only; CloudFront's ARNs have no region.
            "Action": ["cloudfront:CreateInvalidation"],
            "Resource": [f"arn:{partition}:cloudfront::{account}:distribution/{settings.cloudfront_distribution_id}"],
        })
    if websocket_api:
        api_id, api_stage = websocket_api
        push.append({
            "Sid": "PushConnections",
            "Effect": "Allow",
            # PostToConnection on this WebSocket API's stage only.
            "Action": ["execute-api:ManageConnections"],
            "Resource": [f"arn:{partition}:execute-api:{region}:{account}:{api_id}/{api_stage}/POST/@connections/*"],
        })
    return {
        "Version": "2012-10-17",
        "Statement": push + [
            {
                "Sid": "OwnLogs",
                "Effect": "Allow",
                "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
                "Resource": [log_groups],
            },
            {
                "Sid": "ImageObjects",
                "Effect": "Allow",
                # PutObject also covers the presigned POST of direct uploads, GetObject the
                # presigned rendition URLs: S3 checks them against this role.
                "Action": ["s3:DeleteObject", "s3:GetObject", "s3:PutObject"],
                "Resource": [f"{bucket_arn}/{prefix}*" for prefix in prefixes],
            },
            {
                "Sid": "MultipartOriginals",
                "Effect": "Allow",
                # Multipart direct uploads: PutObject covers starting one, its presigned parts
                # and the completion; listing its parts (resume) and aborting it (cancel,
                # delete, expiry) need these, on originals only.
                "Action": ["s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
                "Resource": [f"{bucket_arn}/{settings.originals_prefix}*"],
            },
            {
                "Sid": "ListImages",
                "Effect": "Allow",
                # Unconditional: S3 checks ListBucket, with no s3:prefix in the request, to
                # decide whether a missing key reads as 404 (upload_missing) or 403 (an
                # outage, retried until processing_failed). The bucket holds nothing else.
                "Action": ["s3:ListBucket"],
                "Resource": [bucket_arn],
            },
            {
                "Sid": "EventsQueue",
                "Effect": "Allow",
                # Send: the sweeper's resend. Receive, Delete, GetQueueAttributes: the SQS
                # event source polls with the function's role.
                "Action": ["sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl",
                           "sqs:ReceiveMessage", "sqs:SendMessage"],
                "Resource": [outputs["EventsQueueArn"]],
            },
            {
                "Sid": "QueueAgeMetric",
                "Effect": "Allow",
                # The sweeper's test for a lost message (chalicelib/adapters/cloudwatch_age.py).
                # CloudWatch has no resource-level permissions for reading metrics.
                "Action": ["cloudwatch:GetMetricStatistics"],
                "Resource": ["*"],
            },
            {
                "Sid": "WebhookQueue",
                "Effect": "Allow",
                # Send: a job became terminal, or a copy of an event for its retry or its
                # deferral. ChangeMessageVisibility: a copy due later than SQS can delay it.
                # Receive, Delete, GetQueueAttributes: the event source, and its depth.
                "Action": ["sqs:ChangeMessageVisibility", "sqs:DeleteMessage",
                           "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:ReceiveMessage",
                           "sqs:SendMessage"],
                "Resource": [outputs["WebhookQueueArn"]],
            },
            {
                "Sid": "WebhookDeadLetters",
                "Effect": "Allow",
                # An event's last failed attempt puts it there itself: its copies are new
                # messages, so the redrive policy's receive count never reaches it.
                "Action": ["sqs:SendMessage"],
                "Resource": [outputs["WebhookDeadLetterQueueArn"]],
            },
            {
                "Sid": "DeadLetterDepths",
                "Effect": "Allow",
                # The sweeper reports how many messages are dead-lettered.
                "Action": ["sqs:GetQueueAttributes", "sqs:GetQueueUrl"],
                "Resource": [outputs["DeadLetterQueueArn"], outputs["WebhookDeadLetterQueueArn"]],
            },
            {
                "Sid": "JobsTable",
                "Effect": "Allow",
                # The idempotent create is a TransactWriteItems of two conditional puts;
                # IAM checks each put as dynamodb:PutItem.
                # BatchWriteItem: the sweeper deletes expired jobs 25 a call. BatchGetItem:
                # the orphan scan reads jobs 100 a call, and its points.
                "Action": ["dynamodb:BatchGetItem", "dynamodb:BatchWriteItem", "dynamodb:DeleteItem",
                           "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
                "Resource": [table_arn],
            },
            {
                "Sid": "SweepIndex",  # the due index's statement, its id as deployed
                "Effect": "Allow",
                # The sweeper's shards, and the list's owner index.
                "Action": ["dynamodb:Query"],
                "Resource": [f"{table_arn}/index/{DUE_INDEX}",
                             f"{table_arn}/index/{OWNER_CREATED_INDEX}"],
            },
        ],
    }


def check_stage(stage_config: dict, settings: Settings | None, outputs: Mapping[str, str]) -> None:
    """Refuse what would deploy but then misbehave (without settings: only the variables)."""
    env = stage_config.get("environment_variables", {})
    reserved = sorted(LAMBDA_RESERVED & set(env))
    if reserved:
        raise StageConfigError(f"Lambda reserves {', '.join(reserved)}: remove them from the stage")
    if "LOCAL_RUNNER" in env:
        raise StageConfigError("LOCAL_RUNNER marks the local runner, never a cloud stage: remove it")
    if settings is None:
        return
    worker = stage_config.get("lambda_functions", {}).get(WORKER_FUNCTION, {})
    timeout = worker.get("lambda_timeout", stage_config.get("lambda_timeout", 60))
    reserved = worker.get("reserved_concurrency", stage_config.get("reserved_concurrency"))
    if reserved is not None and reserved < settings.worker_max_concurrency:
        raise StageConfigError(
            f"the worker's reserved_concurrency ({reserved}) is below WORKER_MAX_CONCURRENCY "
            f"({settings.worker_max_concurrency}): the event source would invoke it more often "
            "than Lambda lets it run, and the throttled messages would wait (docs/scale.md)")
    visibility = outputs.get("VisibilityTimeoutSeconds")
    if visibility is not None:
        wanted = VISIBILITY_PER_FUNCTION_TIMEOUT * timeout
        if int(visibility) < wanted:
            raise StageConfigError(
                f"the queue's visibility timeout ({visibility} s) is under {VISIBILITY_PER_FUNCTION_TIMEOUT} "
                f"times the worker's lambda_timeout ({timeout} s = {wanted} s), AWS's rule for a Lambda "
                "source queue: a throttled invocation could not be retried before the message "
                "counts a receive, and one still in work would be delivered twice")
        if int(visibility) < settings.lease_seconds:
            raise StageConfigError(
                f"the queue's visibility timeout ({visibility} s) is shorter than the job lease "
                f"({settings.lease_seconds} s): redeliveries would find the job still leased")
    delivery = stage_config.get("lambda_functions", {}).get(WEBHOOK_FUNCTION, {})
    delivery_timeout = delivery.get("lambda_timeout", stage_config.get("lambda_timeout", 60))
    # Resolving the name, reading the job and signing come on top of the HTTP attempt itself.
    if delivery_timeout < settings.webhook_attempt_seconds + 10:
        raise StageConfigError(
            f"{WEBHOOK_FUNCTION}'s lambda_timeout ({delivery_timeout} s) leaves too little room "
            f"around a delivery attempt of WEBHOOK_ATTEMPT_SECONDS ({settings.webhook_attempt_seconds} s)")


def write_stage(project_dir: Path, stage: str, outputs: Mapping[str, str]) -> tuple[Path, Path]:
    chalice_dir = project_dir / ".chalice"
    config_path = chalice_dir / "config.json"
    config = json.loads(config_path.read_text())
    if stage not in config.get("stages", {}):
        raise StageConfigError(f"stage {stage!r} is not in {config_path}")
    stage_config = config["stages"][stage]
    env = stage_config.setdefault("environment_variables", {})
    env.update(environment_for(outputs, stage_config))
    websocket_api = _with_push_endpoints(env, project_dir, stage, stage_config, outputs)
    check_stage(stage_config, None, outputs)
    settings = Settings.from_environ(env)  # the app's own start-up checks, before deploying
    check_stage(stage_config, settings, outputs)

    policy_name = stage_config.get("iam_policy_file", f"policy-{stage}.json")
    policy_path = chalice_dir / policy_name
    policy = stage_policy(outputs, settings, config["app_name"], stage, websocket_api)
    policy_path.write_text(json.dumps(policy, indent=2) + "\n")
    config_path.write_text(json.dumps(config, indent=2) + "\n")
    return config_path, policy_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage", help="a stage of .chalice/config.json (dev, prod)")
    parser.add_argument("--stack", help="the CloudFormation stack (default image-jobs-<stage>)")
    parser.add_argument("--region", help="the stack's region (default: the AWS CLI's)")
    parser.add_argument("--outputs", type=Path, help="saved outputs instead of asking AWS")
    parser.add_argument("--project-dir", type=Path, default=ROOT, help=argparse.SUPPRESS)
    parser.add_argument("--changed-exit-code", type=int, default=0, metavar="N",
                        help="exit N when this changed the variables or the policy (make deploy "
                             "deploys again then: the first deploy creates the WebSocket API)")
    args = parser.parse_args(argv)
    before = _stage_files(args.project_dir)
    try:
        if args.outputs:
            outputs = read_outputs_file(args.outputs)
        else:
            outputs = stack_outputs(args.stack or f"image-jobs-{args.stage}", args.region)
        config_path, policy_path = write_stage(args.project_dir, args.stage, outputs)
    except (StageConfigError, ValueError) as error:
        print(f"stage_config: {error}", file=sys.stderr)
        return 1
    print(f"wrote the {args.stage} stage's variables to {config_path} and its policy to {policy_path}")
    if args.changed_exit_code and _stage_files(args.project_dir) != before:
        print("stage_config: the stage changed (the WebSocket API's URL, say): deploy it again")
        return args.changed_exit_code
    return 0


def _stage_files(project_dir: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in (project_dir / ".chalice").glob("*.json")}


if __name__ == "__main__":
    sys.exit(main())
