"""LocalStack's runtime, started by local/localstack.py with LocalStack's own Python (3.13).

The same as `python -m localstack.runtime.main`, but on loopback only, in two places:
- LocalStack 2026.3's twisted gateway ignores the host of GATEWAY_LISTEN for IPv4 addresses
  ("TODO: interface = host?" in localstack/runtime/server/twisted.py) and listens on every
  interface; here it is handed the host.
- DynamoDB Local has no option for its address; LocalStack starts it through our launcher
  (localstack/java/LoopbackDynamoDBLocal.java), which binds it to 127.0.0.1.
And one metric it leaves out: SQS's ApproximateAgeOfOldestMessage in CloudWatch, which the
sweeper reads to tell a lost event from one waiting its turn (chalicelib/adapters/
cloudwatch_age.py). LocalStack publishes the other queue gauges every
SQS_CLOUDWATCH_METRICS_REPORT_INTERVAL seconds ("TODO ApproximateAgeOfOldestMessage is
missing" in its SQS provider); here the same publisher adds it.
"""
import math
import os
import time

from twisted.internet import endpoints

import localstack.runtime.server.twisted as gateway_server

LISTEN_HOST = os.environ["GATEWAY_LISTEN"].rsplit(":", 1)[0]


class _LoopbackEndpoints:
    """Stands in for twisted.internet.endpoints in that one module."""

    TCP6ServerEndpoint = endpoints.TCP6ServerEndpoint

    @staticmethod
    def TCP4ServerEndpoint(reactor, port, backlog=50, interface=""):
        return endpoints.TCP4ServerEndpoint(reactor, port, backlog, interface or LISTEN_HOST)


assert gateway_server.endpoints is endpoints, "LocalStack's gateway changed: check this patch"
gateway_server.endpoints = _LoopbackEndpoints

from localstack.services.dynamodb.packages import dynamodblocal_package  # noqa: E402
from localstack.services.dynamodb.server import DynamodbServer  # noqa: E402

_dynamodb_command = DynamodbServer._create_shell_command


def _loopback_dynamodb_command(self):
    """[java, opts..., -jar, DynamoDBLocal.jar, args...] -> [java, opts..., -cp, launcher:jar,
    LoopbackDynamoDBLocal, args...]; the jar's manifest class path still applies."""
    command = _dynamodb_command(self)
    at = command.index("-jar")
    launcher = os.path.join(dynamodblocal_package.get_installed_dir(), "loopback-launcher.jar")
    return [*command[:at], "-cp", f"{launcher}:{command[at + 1]}", "LoopbackDynamoDBLocal",
            *command[at + 2:]]


DynamodbServer._create_shell_command = _loopback_dynamodb_command

from localstack.services.sqs import provider as sqs_provider  # noqa: E402
from localstack.services.sqs.models import StandardQueue  # noqa: E402
from localstack.utils.cloudwatch.cloudwatch_util import publish_sqs_metric_batch  # noqa: E402

_publish_gauges = sqs_provider.CloudwatchPublishWorker.publish_approximate_cloudwatch_metrics


def _publish_gauges_and_age(self):
    """LocalStack's gauges, then each standard queue's ApproximateAgeOfOldestMessage: the age
    of its oldest message not deleted, whether waiting, in a consumer's hands or delayed (0
    when there is none), rounded up so that it never makes a message look younger."""
    _publish_gauges(self)
    now = time.time()
    for account_id, region, store in sqs_provider.sqs_stores.iter_stores():
        batch = []
        for queue in list(store.queues.values()):
            if not isinstance(queue, StandardQueue):
                continue
            with queue.mutex:
                sent = [m.created for m in (*queue.visible.queue, *queue.inflight, *queue.delayed)
                        if not m.deleted]
            batch.append({"QueueName": queue.name, "MetricName": "ApproximateAgeOfOldestMessage",
                          "Unit": "Seconds", "Value": math.ceil(now - min(sent)) if sent else 0})
        if batch:
            publish_sqs_metric_batch(account_id=account_id, region=region, sqs_metric_batch_data=batch)


sqs_provider.CloudwatchPublishWorker.publish_approximate_cloudwatch_metrics = _publish_gauges_and_age

from localstack.runtime.main import main  # noqa: E402  (after the patches)

main()
