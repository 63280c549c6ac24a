"""build_service(settings): the one composition root."""
from __future__ import annotations

import boto3
from botocore.config import Config

from chalicelib.adapters.dynamo_jobs import DynamoJobStore
from chalicelib.adapters.s3_store import S3Store
from chalicelib.adapters.sqs_publisher import SqsPublisher
from chalicelib.config import Settings
from chalicelib.logs import configure
from chalicelib.service import Service


def _s3_client(settings: Settings, endpoint_url):
    config = Config(
        signature_version="s3v4",
        # Emulators on 127.0.0.1 have no per-bucket host names.
        s3={"addressing_style": "path" if endpoint_url else "auto"},
        connect_timeout=2,
        read_timeout=10,
        retries={"mode": "standard", "max_attempts": 3},
    )
    return boto3.session.Session().client(
        "s3", region_name=settings.region, endpoint_url=endpoint_url, config=config
    )


def build_service(settings: Settings) -> Service:
    configure()
    objects = S3Store(
        _s3_client(settings, settings.endpoint_url),
        settings.bucket,
        presign_client=_s3_client(settings, settings.presign_endpoint_url),
    )
    jobs = DynamoJobStore(settings.table, settings.region, settings.endpoint_url)
    sqs = boto3.session.Session().client(
        "sqs", region_name=settings.region, endpoint_url=settings.endpoint_url,
        config=Config(connect_timeout=2, read_timeout=10, retries={"mode": "standard", "max_attempts": 3}),
    )
    publisher = SqsPublisher(sqs, settings.queue_name)
    return Service(settings=settings, jobs=jobs, objects=objects, publisher=publisher)
