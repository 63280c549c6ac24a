"""infra/template.yaml's webhook queue, alarms and dashboard agree with the code that feeds them."""
from __future__ import annotations

import json
import re

import pytest

from chalicelib.config import Settings
from chalicelib.runtime.metrics import Metric
from local.provision import load_template
from tests.deploy.test_stage_config import CLOUD_STAGES, config

TEMPLATE = load_template()
RESOURCES = TEMPLATE["Resources"]
EMITTED = {m.value for m in Metric}


def test_the_webhook_queue_keeps_a_dead_letter_safety_net_beside_the_apps_own_count():
    queue = RESOURCES["WebhookQueue"]["Properties"]
    settings = Settings()
    # The app counts attempts in the event; a copy is received twice on a good day, so a
    # redrive after a few more receives only catches a handler that keeps failing.
    assert queue["RedrivePolicy"]["maxReceiveCount"] >= 5
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["WebhookDeadLetterQueue", "Arn"]}
    # No event may expire before its last attempt, nor in the dead-letter queue before a look.
    assert queue["MessageRetentionPeriod"] > sum(settings.webhook_delays) + 3600
    dead_letter = RESOURCES["WebhookDeadLetterQueue"]["Properties"]
    assert dead_letter["MessageRetentionPeriod"] >= 7 * 86400


@pytest.mark.parametrize("stage", CLOUD_STAGES)
def test_the_webhook_queue_outlasts_every_stages_delivery_function(stage):
    timeout = config()["stages"][stage]["lambda_functions"]["deliver_webhook"]["lambda_timeout"]
    # 6 times, as AWS advises for a Lambda source queue (the events queue follows the same rule).
    assert RESOURCES["WebhookQueue"]["Properties"]["VisibilityTimeout"] >= 6 * timeout
    assert timeout >= Settings().webhook_attempt_seconds + 10


def alarm_metrics(alarm: dict) -> list[dict]:
    if "MetricName" in alarm:
        return [{"Namespace": alarm["Namespace"], "MetricName": alarm["MetricName"],
                 "Dimensions": alarm.get("Dimensions", [])}]
    return [m["MetricStat"]["Metric"] for m in alarm["Metrics"] if "MetricStat" in m]


def test_the_apps_alarms_watch_metrics_the_code_emits_for_this_stacks_service():
    alarms = {name: r["Properties"] for name, r in RESOURCES.items() if r["Type"] == "AWS::CloudWatch::Alarm"}
    watched = {m["MetricName"] for a in alarms.values() for m in alarm_metrics(a) if m["Namespace"] == "ImageJobs"}
    assert watched == {"ApiServerErrors", "ApiRequests", "JobsFailed", "JobsReady", "EndToEnd"}
    assert watched <= EMITTED
    for alarm in alarms.values():
        for metric in alarm_metrics(alarm):
            if metric["Namespace"] == "ImageJobs":
                assert {"Name": "service", "Value": {"Ref": "AWS::StackName"}} in metric["Dimensions"]
    p95 = alarms["EndToEndP95Alarm"]
    assert p95["ExtendedStatistic"] == "p95" and p95["Unit"] == "Milliseconds"
    # DLQ depth for both dead-letter queues, the oldest event's age, error rates, p95.
    assert {"DeadLetterQueueDepthAlarm", "WebhookDeadLetterQueueDepthAlarm", "OldestMessageAgeAlarm",
            "ApiErrorRateAlarm", "JobFailureRateAlarm", "EndToEndP95Alarm"} <= set(alarms)


def dashboard() -> dict:
    body, variables = RESOURCES["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    assert set(variables) == {"Service"}
    # What CloudFormation substitutes: any ${...} becomes a plain string here.
    return json.loads(re.sub(r"\$\{[^}]+\}", "x", body))


def test_the_dashboard_is_valid_json_and_shows_only_metrics_that_exist():
    widgets = dashboard()["widgets"]
    shown = set()
    for widget in widgets:
        if widget["type"] != "metric":
            continue
        previous = None
        for row in widget["properties"]["metrics"]:
            items = [i for i in row if not isinstance(i, dict)]
            if items[0] == "...":
                items = previous[:-1] + items[1:]
            elif items[0] == ".":
                items = [previous[0]] + items[1:]
            namespace, name = items[0], items[1]
            shown.add((namespace, name))
            previous = items
    ours = {name for namespace, name in shown if namespace == "ImageJobs"}
    assert ours <= EMITTED
    assert {"JobsAccepted", "JobsReady", "JobsFailed", "QueueWait", "ProcessingTime", "EndToEnd",
            "RequestsShed", "WebhookDeliveries", "WebhookFailures"} <= ours
    assert ("AWS/SQS", "ApproximateNumberOfMessagesVisible") in shown
    alarms_widget = [w for w in widgets if w["type"] == "alarm"]
    assert len(alarms_widget) == 1 and len(alarms_widget[0]["properties"]["alarms"]) == 6
