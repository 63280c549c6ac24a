"""The DELETE's CloudFront invalidation (INVALIDATE_ON_DELETE): the adapter as bootstrap makes
it, against moto's server, and against a CloudFront that never answers."""
import socket
import time

import boto3
import pytest

from chalicelib.bootstrap import build_use_cases
from chalicelib.config import Settings
from chalicelib.domain.errors import TransientError

JOB = "3e8b6a2f-1c4d-4f5e-8a9b-0c1d2e3f4a5b"


def cloudfront_settings(endpoint_url, distribution_id, **extra):
    return Settings(endpoint_url=endpoint_url, delivery="cloudfront", cloudfront_domain="d1.cloudfront.net",
                    cloudfront_key_pair_id="K1", cloudfront_private_key_secret="arn:secret",
                    invalidate_on_delete=True, cloudfront_distribution_id=distribution_id, **extra)


@pytest.fixture
def distribution(moto_endpoint):
    client = boto3.client("cloudfront", endpoint_url=moto_endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    created = client.create_distribution(DistributionConfig={
        "CallerReference": f"renditions-{time.time_ns()}", "Comment": "renditions", "Enabled": True,
        "Origins": {"Quantity": 1, "Items": [{
            "Id": "renditions", "DomainName": "images.s3.amazonaws.com", "OriginPath": "/renditions",
            "S3OriginConfig": {"OriginAccessIdentity": ""}}]},
        "DefaultCacheBehavior": {"TargetOriginId": "renditions", "ViewerProtocolPolicy": "https-only",
                                 "MinTTL": 0, "ForwardedValues": {"QueryString": False, "Cookies": {"Forward": "none"}},
                                 "TrustedSigners": {"Enabled": False, "Quantity": 0}}})
    return client, created["Distribution"]["Id"]


def test_the_jobs_prefix_is_invalidated_as_one_wildcard_path_of_the_distribution(moto_endpoint, distribution):
    client, distribution_id = distribution
    edge = build_use_cases(cloudfront_settings(moto_endpoint, distribution_id)).ctx.edge_cache
    edge.invalidate(f"renditions/{JOB}/")
    listed = client.list_invalidations(DistributionId=distribution_id)["InvalidationList"]["Items"]
    assert len(listed) == 1
    batch = client.get_invalidation(DistributionId=distribution_id, Id=listed[0]["Id"])["Invalidation"]
    # The distribution's origin is renditions/: a URL's path is the key under it.
    assert batch["InvalidationBatch"]["Paths"]["Items"] == [f"/{JOB}/*"]
    assert batch["InvalidationBatch"]["CallerReference"] == f"/{JOB}/*"


def test_a_refused_invalidation_is_a_transient_error(moto_endpoint, distribution):
    edge = build_use_cases(cloudfront_settings(moto_endpoint, "ENOSUCHDISTRIBUTION")).ctx.edge_cache
    with pytest.raises(TransientError, match="CloudFront"):
        edge.invalidate(f"renditions/{JOB}/")


def test_a_cloudfront_that_never_answers_costs_one_short_attempt():
    """What keeps a slow CloudFront from holding a DELETE: one attempt, cut at
    INVALIDATION_TIMEOUT_SECONDS (the bound is generous for a loaded machine)."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # connections complete in the kernel's backlog, and nothing ever answers
    try:
        edge = build_use_cases(cloudfront_settings(f"http://127.0.0.1:{silent.getsockname()[1]}", "E1",
                                                   invalidation_timeout_seconds=1)).ctx.edge_cache
        started = time.monotonic()
        with pytest.raises(TransientError):
            edge.invalidate(f"renditions/{JOB}/")
        assert time.monotonic() - started < 10  # one attempt of 1 s; botocore's default retries would take 60+
    finally:
        silent.close()


def test_the_setting_needs_cloudfront_and_the_distribution():
    with pytest.raises(ValueError, match="INVALIDATE_ON_DELETE"):
        Settings.from_environ({"INVALIDATE_ON_DELETE": "1", "LOCAL_RUNNER": "1"})
    with pytest.raises(ValueError, match="CLOUDFRONT_DISTRIBUTION_ID"):
        Settings.from_environ({"INVALIDATE_ON_DELETE": "1", "LOCAL_RUNNER": "1", "DELIVERY": "cloudfront",
                               "CLOUDFRONT_DOMAIN": "d1", "CLOUDFRONT_KEY_PAIR_ID": "K1",
                               "CLOUDFRONT_PRIVATE_KEY_SECRET": "s"})
