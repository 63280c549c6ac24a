"""The MinIO compose file and setup script say what the app expects (no drift)."""
from pathlib import Path

import yaml

from chalicelib.config import Settings
from local.provision import load_template

MINIO = Path(__file__).resolve().parents[2] / "localstack" / "minio"


def test_minio_publishes_where_the_consumer_listens():
    env = yaml.safe_load((MINIO / "compose.yaml").read_text())["services"]["minio"]["environment"]
    s = Settings()
    assert env["MINIO_NOTIFY_AMQP_ENABLE_PRIMARY"] == "on"
    assert env["MINIO_NOTIFY_AMQP_EXCHANGE_PRIMARY"] == s.amqp_exchange
    assert env["MINIO_NOTIFY_AMQP_EXCHANGE_TYPE_PRIMARY"] == "direct"  # as chalicelib/adapters/amqp.py declares it
    assert env["MINIO_NOTIFY_AMQP_ROUTING_KEY_PRIMARY"] == s.amqp_routing_key
    assert env["MINIO_NOTIFY_AMQP_DURABLE_PRIMARY"] == "on"
    assert env["MINIO_NOTIFY_AMQP_PUBLISHER_CONFIRMS_PRIMARY"] == "on"
    assert env["MINIO_NOTIFY_AMQP_QUEUE_DIR_PRIMARY"]


def test_the_notification_covers_the_originals_prefix_only():
    setup = yaml.safe_load((MINIO / "compose.yaml").read_text())["services"]["setup"]["environment"]
    (bucket,) = [r["Properties"] for r in load_template()["Resources"].values() if r["Type"] == "AWS::S3::Bucket"]
    (qc,) = bucket["NotificationConfiguration"]["QueueConfigurations"]
    assert setup["ORIGINALS_PREFIX"] == qc["Filter"]["S3Key"]["Rules"][0]["Value"] == Settings().originals_prefix
    assert setup["IMAGES_BUCKET"] == Settings().bucket
    script = (MINIO / "setup.sh").read_text()
    assert 'arn:minio:sqs::PRIMARY:amqp --event put --prefix "$ORIGINALS_PREFIX"' in script
