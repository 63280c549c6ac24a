"""infra/stage_config.py and the cloud stages of .chalice/config.json."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from chalicelib.config import Settings, env_name
from infra.stage_config import (
    FUNCTION_TIMEOUTS, LAMBDA_RESERVED, OUTPUT_SETTINGS, StageConfigError, main, write_stage,
)
from tests.deploy.conftest import CHALICE_DEPLOYED_FILE, FUNCTIONS, copy_project

ROOT = Path(__file__).resolve().parents[2]
CLOUD_STAGES = ("dev", "prod")


def config():
    return json.loads((ROOT / ".chalice" / "config.json").read_text())


@pytest.mark.parametrize("stage", CLOUD_STAGES)
def test_cloud_stages_use_their_own_least_privilege_policy(stage):
    stage_config = config()["stages"][stage]
    assert stage_config["autogen_policy"] is False
    assert stage_config["iam_policy_file"] == f"policy-{stage}.json"
    assert stage_config.get("manage_iam_role", True) is True


@pytest.mark.parametrize("stage", CLOUD_STAGES)
def test_cloud_stages_size_every_function_and_use_cognito(stage):
    stage_config = config()["stages"][stage]
    functions = stage_config["lambda_functions"]
    assert set(functions) == FUNCTIONS
    for settings in functions.values():
        assert 128 <= settings["lambda_memory_size"] <= 10240
        assert 1 <= settings["lambda_timeout"] <= 900
    # API Gateway gives up after 29 s; the API function must end first.
    assert functions["api_handler"]["lambda_timeout"] < 29
    env = stage_config["environment_variables"]
    assert env["AUTH_MODE"] == "cognito"
    # API Gateway's stage name comes first in every URL: with it the paths are the contract's.
    assert f"/{stage_config['api_gateway_stage']}{env['ROUTE_PREFIX']}" == Settings().route_prefix
    # Lambda's worker is the SQS event source; the policy knows no other queue.
    assert env.get("QUEUE_BACKEND", "sqs") == "sqs"
    assert 2 <= int(env["WORKER_MAX_CONCURRENCY"]) <= 1000
    assert 2 <= int(env["WEBHOOK_MAX_CONCURRENCY"]) <= 1000
    assert not LAMBDA_RESERVED & set(env)
    # Never in the cloud: loopback receivers are for the local runner.
    assert env.get("WEBHOOK_ALLOW_LOOPBACK", "0") == "0"


def test_the_local_stage_keeps_the_apps_own_hs256_check():
    env = config()["stages"]["local"].get("environment_variables", {})
    assert env.get("AUTH_MODE", "jwt") == "jwt"


def test_writes_the_outputs_as_the_apps_variables_and_keeps_the_rest(tmp_path, outputs):
    project = copy_project(tmp_path / "p")
    config_path, policy_path = write_stage(project, "dev", outputs)
    stage = json.loads(config_path.read_text())["stages"]["dev"]
    env = stage["environment_variables"]
    settings = Settings.from_environ(env)
    assert settings.bucket == outputs["ImagesBucket"]
    assert settings.table == outputs["JobsTable"]
    assert settings.events_queue_name == outputs["EventsQueueName"]
    assert settings.cognito_user_pool_arn == outputs["UserPoolArn"]
    assert settings.auth_mode == "cognito"
    assert set(env) == {"AUTH_MODE", "ROUTE_PREFIX", "WORKER_MAX_CONCURRENCY", "MAX_BACKLOG",
                        "WEBHOOK_MAX_CONCURRENCY",
                        *map(env_name, OUTPUT_SETTINGS.values()),
                        *map(env_name, FUNCTION_TIMEOUTS.values())}
    # The app budgets each function's time with the timeout Lambda enforces on it.
    functions = stage["lambda_functions"]
    assert settings.api_timeout_seconds == functions["api_handler"]["lambda_timeout"]
    assert settings.worker_timeout_seconds == functions["handle_object_created"]["lambda_timeout"]
    assert settings.sweep_timeout_seconds == functions["sweep"]["lambda_timeout"]
    assert settings.orphan_scan_timeout_seconds == functions["sweep_orphans"]["lambda_timeout"]
    # ... and derives from them the lease and the sweeps' budgets the defaults give.
    assert (settings.lease_seconds, settings.sweep_budget_seconds, settings.orphan_scan_budget_seconds) == (120, 40, 840)
    assert settings.webhook_function_timeout_seconds == functions["deliver_webhook"]["lambda_timeout"]
    assert settings.push_stream_timeout_seconds == functions["push_job_changes"]["lambda_timeout"]
    # Only this app's clients' ID tokens name an owner (chalicelib/http/auth.py cognito_owner).
    assert settings.cognito_app_clients == {outputs["UserPoolClientId"]}
    assert settings.bucket_lifecycle_days == int(outputs["ObjectExpirationDays"])
    assert settings.metrics_service == outputs["MetricsService"]
    assert settings.webhook_queue_name == outputs["WebhookQueueName"]
    assert settings.webhook_dead_letter_queue_name == outputs["WebhookDeadLetterQueueName"]
    assert settings.events_dead_letter_queue_name == outputs["DeadLetterQueueName"]
    assert stage["lambda_functions"] == config()["stages"]["dev"]["lambda_functions"]
    # The other stage is untouched.
    assert json.loads(config_path.read_text())["stages"]["prod"] == config()["stages"]["prod"]
    assert policy_path.name == "policy-dev.json"
    # Twice gives the same files.
    before = config_path.read_text(), policy_path.read_text()
    write_stage(project, "dev", outputs)
    assert (config_path.read_text(), policy_path.read_text()) == before


def _push_of(config_path, policy_path):
    env = json.loads(config_path.read_text())["stages"]["dev"]["environment_variables"]
    sids = {st["Sid"] for st in json.loads(policy_path.read_text())["Statement"]}
    return {k: v for k, v in env.items() if k.startswith("PUSH_")}, sids & {"PushStream", "PushStreamList", "PushConnections"}


def test_before_the_first_deploy_push_has_its_stream_but_no_url_and_no_connections_to_post_to(tmp_path, outputs):
    """The first `chalice deploy` creates the WebSocket API (app.py declares it where the stage
    has the stream); until Chalice has recorded its id there is no URL to publish, and a stale
    one is never kept."""
    project = copy_project(tmp_path / "p")
    config_path = project / ".chalice" / "config.json"
    stale = json.loads(config_path.read_text())
    stale["stages"]["dev"]["environment_variables"]["PUSH_URL"] = "wss://gone.example/api"
    config_path.write_text(json.dumps(stale))
    config_path, policy_path = write_stage(project, "dev", outputs)
    env, sids = _push_of(config_path, policy_path)
    assert env == {"PUSH_STREAM_ARN": outputs["JobsTableStreamArn"], "PUSH_STREAM_TIMEOUT_SECONDS": "60"}
    assert sids == {"PushStream", "PushStreamList"}
    assert Settings(push_stream_arn=env["PUSH_STREAM_ARN"]).serves_push


def test_after_the_first_deploy_push_publishes_that_apis_url_and_may_post_to_it_only(tmp_path, outputs, capsys):
    project = copy_project(tmp_path / "p")
    args = ["dev", "--outputs", str(Path(__file__).parent / "stack-outputs.json"),
            "--project-dir", str(project), "--changed-exit-code", "3"]
    assert main(args) == 3  # the first write: everything changed
    assert main(args) == 0  # nothing new: make deploy deploys once
    (project / ".chalice" / "deployed").mkdir()
    (project / ".chalice" / "deployed" / "dev.json").write_text(CHALICE_DEPLOYED_FILE.read_text())
    assert main(args) == 3  # Chalice recorded the WebSocket API: deploy again with its URL
    assert main(args) == 0
    env, sids = _push_of(project / ".chalice" / "config.json", project / ".chalice" / "policy-dev.json")
    assert env == {"PUSH_STREAM_ARN": outputs["JobsTableStreamArn"], "PUSH_STREAM_TIMEOUT_SECONDS": "60",
                   "PUSH_URL": "wss://w9x8y7z6v5.execute-api.us-east-1.amazonaws.com/api",
                   "PUSH_MANAGEMENT_URL": "https://w9x8y7z6v5.execute-api.us-east-1.amazonaws.com/api"}
    assert sids == {"PushStream", "PushStreamList", "PushConnections"}
    assert "deploy it again" in capsys.readouterr().out


def test_refuses_a_queue_under_six_times_the_workers_timeout(tmp_path, outputs):
    """AWS's rule for a Lambda source queue; 300 s would still cover the 60 s timeout once."""
    project = copy_project(tmp_path / "p")
    timeout = config()["stages"]["dev"]["lambda_functions"]["handle_object_created"]["lambda_timeout"]
    for seconds in (30, 6 * timeout - 1):
        with pytest.raises(StageConfigError, match="6 times the worker's lambda_timeout"):
            write_stage(project, "dev", {**outputs, "VisibilityTimeoutSeconds": str(seconds)})
    assert not (project / ".chalice" / "policy-dev.json").exists()
    write_stage(project, "dev", {**outputs, "VisibilityTimeoutSeconds": str(6 * timeout)})


def test_refuses_a_queue_shorter_than_the_job_lease(tmp_path, outputs):
    project = copy_project(tmp_path / "p")
    path = project / ".chalice" / "config.json"
    edited = json.loads(path.read_text())
    edited["stages"]["dev"]["lambda_functions"]["handle_object_created"]["lambda_timeout"] = 13
    # The lease set, as the one derived from the timeout always fits the visibility rule.
    edited["stages"]["dev"]["environment_variables"]["LEASE_SECONDS"] = "120"
    edited["stages"]["dev"]["environment_variables"]["ANIMATION_CPU_SECONDS"] = "5"  # 6 + 5 under 13
    path.write_text(json.dumps(edited))
    with pytest.raises(StageConfigError, match="lease"):
        write_stage(project, "dev", {**outputs, "VisibilityTimeoutSeconds": "90"})
    assert not (project / ".chalice" / "policy-dev.json").exists()


def test_refuses_a_reservation_below_the_event_sources_maximum_concurrency(tmp_path, outputs):
    project = copy_project(tmp_path / "p")
    path = project / ".chalice" / "config.json"
    edited = json.loads(path.read_text())
    prod = edited["stages"]["prod"]
    maximum = int(prod["environment_variables"]["WORKER_MAX_CONCURRENCY"])
    prod["lambda_functions"]["handle_object_created"]["reserved_concurrency"] = maximum - 1
    path.write_text(json.dumps(edited))
    with pytest.raises(StageConfigError, match="reserved_concurrency"):
        write_stage(project, "prod", outputs)
    assert not (project / ".chalice" / "policy-prod.json").exists()


def test_refuses_a_stack_without_the_outputs_the_app_needs(tmp_path, outputs):
    project = copy_project(tmp_path / "p")
    partial = {k: v for k, v in outputs.items() if k != "UserPoolArn"}
    with pytest.raises(StageConfigError, match="UserPoolArn"):
        write_stage(project, "dev", partial)


def test_settings_that_would_break_a_deploy_are_refused_at_import():
    with pytest.raises(ValueError, match="COGNITO_USER_POOL_ARN"):
        Settings.from_environ({"AUTH_MODE": "cognito"})
    with pytest.raises(ValueError, match="WORKER_MAX_CONCURRENCY"):
        Settings.from_environ({"WORKER_MAX_CONCURRENCY": "1", "LOCAL_RUNNER": "1"})
    with pytest.raises(ValueError, match="ROUTE_PREFIX"):
        Settings.from_environ({"ROUTE_PREFIX": "v1/", "LOCAL_RUNNER": "1"})


def _edit_stage(project, stage, edit):
    path = project / ".chalice" / "config.json"
    config = json.loads(path.read_text())
    edit(config["stages"][stage])
    path.write_text(json.dumps(config))


def test_refuses_a_stage_that_sets_the_local_runner_marker(tmp_path, outputs):
    project = copy_project(tmp_path / "p")
    _edit_stage(project, "dev", lambda st: st["environment_variables"].update(LOCAL_RUNNER="1"))
    with pytest.raises(StageConfigError, match="LOCAL_RUNNER"):
        write_stage(project, "dev", outputs)


def test_refuses_a_worker_that_may_outlive_its_lease(tmp_path, outputs):
    project = copy_project(tmp_path / "p")
    def edit(st):
        st["lambda_functions"]["handle_object_created"].update(lambda_timeout=150)  # within the queue's 180 s
        st["environment_variables"]["LEASE_SECONDS"] = "120"  # set: a derived lease outlives any timeout
    _edit_stage(project, "dev", edit)
    with pytest.raises(ValueError, match="LEASE_SECONDS"):
        write_stage(project, "dev", outputs)
    assert not (project / ".chalice" / "policy-dev.json").exists()


def test_refuses_a_retention_the_bucket_lifecycle_would_cut_short(tmp_path, outputs):
    project = copy_project(tmp_path / "p")
    with pytest.raises(ValueError, match="RETENTION_SECONDS"):
        write_stage(project, "dev", {**outputs, "ObjectExpirationDays": "7"})


def test_a_stack_with_the_renditions_distribution_delivers_through_it_and_may_read_its_key_only(tmp_path, outputs):
    """RenditionsPublicKeyPem given: the stage signs CloudFront URLs, and its policy reads that
    one secret; without it the stage keeps presigned S3 URLs and reads no secret at all."""
    project = copy_project(tmp_path / "p")
    config_path, policy_path = write_stage(project, "dev", outputs)
    env = json.loads(config_path.read_text())["stages"]["dev"]["environment_variables"]
    assert "DELIVERY" not in env and Settings.from_environ({**env, "AUTH_JWT_SECRET": "s"}).delivery == "s3"
    assert not [st for st in json.loads(policy_path.read_text())["Statement"]
                if any(a.startswith("secretsmanager:") for a in st["Action"])]
    secret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:image-jobs-dev-renditions-signing-key-AbCdEf"
    cdn = {**outputs, "RenditionsDomain": "d111111abcdef8.cloudfront.net", "RenditionsKeyPairId": "K2JCJMDEHXQW5F",
           "RenditionsSigningKeyArn": secret}
    config_path, policy_path = write_stage(copy_project(tmp_path / "q"), "dev", cdn)
    env = json.loads(config_path.read_text())["stages"]["dev"]["environment_variables"]
    settings = Settings.from_environ({**env, "AUTH_JWT_SECRET": "s"})
    assert (settings.delivery, settings.cloudfront_domain, settings.cloudfront_key_pair_id,
            settings.cloudfront_private_key_secret) == ("cloudfront", "d111111abcdef8.cloudfront.net",
                                                        "K2JCJMDEHXQW5F", secret)
    reads = [st for st in json.loads(policy_path.read_text())["Statement"]
             if any(a.startswith("secretsmanager:") for a in st["Action"])]
    assert reads == [{"Sid": "RenditionsSigningKey", "Effect": "Allow",
                      "Action": ["secretsmanager:GetSecretValue"], "Resource": [secret]}]


def test_a_stage_that_invalidates_on_delete_may_invalidate_its_distribution_only(tmp_path, outputs):
    """INVALIDATE_ON_DELETE=1 in the stage's variables: the distribution's id comes from the
    stack, and the policy grants CreateInvalidation on that distribution; without the setting,
    no CloudFront call at all."""
    cdn = {**outputs, "RenditionsDomain": "d111111abcdef8.cloudfront.net", "RenditionsKeyPairId": "K2JCJMDEHXQW5F",
           "RenditionsSigningKeyArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:k",
           "RenditionsDistributionId": "E2QWRUHAPOMQZL"}

    def cloudfront_statements(project):
        _, policy_path = write_stage(project, "dev", cdn)
        return [st for st in json.loads(policy_path.read_text())["Statement"]
                if any(a.startswith("cloudfront:") for a in st["Action"])]

    assert cloudfront_statements(copy_project(tmp_path / "p")) == []
    project = copy_project(tmp_path / "q")
    config_path = project / ".chalice" / "config.json"
    config = json.loads(config_path.read_text())
    config["stages"]["dev"].setdefault("environment_variables", {})[env_name("invalidate_on_delete")] = "1"
    config_path.write_text(json.dumps(config))
    assert cloudfront_statements(project) == [{
        "Sid": "RenditionsInvalidation", "Effect": "Allow", "Action": ["cloudfront:CreateInvalidation"],
        "Resource": ["arn:aws:cloudfront::123456789012:distribution/E2QWRUHAPOMQZL"]}]
    env = json.loads(config_path.read_text())["stages"]["dev"]["environment_variables"]
    assert Settings.from_environ({**env, "AUTH_JWT_SECRET": "s"}).cloudfront_distribution_id == "E2QWRUHAPOMQZL"
