"""GET URLs signed without the S3 client are the very URLs the client makes, at the signing
time given (botocore's own signs only at the clock's second: boto/botocore#2647)."""
from __future__ import annotations

import datetime

import botocore.session
import pytest
from botocore.config import Config

from chalicelib.adapters.s3_presign import GetPresigner

KEYS = ("renditions/6f1c1d7e/1/display.jpg", "odd keys/ü + &=?#%/x y.jpg", "a~b/c!d'e(f)*.jpg")


@pytest.fixture()
def session(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "token/with+odd=chars")
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda: FROZEN)
    return botocore.session.Session()


FROZEN = datetime.datetime(2026, 3, 1, 12, 0, 0)
# A signing time other than the clock's: a window's start, an hour before.
WINDOW_START = datetime.datetime(2026, 3, 1, 11, 0, 0, tzinfo=datetime.timezone.utc)


def at_window_start(reference, monkeypatch, **presign):
    """What the client makes when its clock reads the window's start."""
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda: WINDOW_START.replace(tzinfo=None))
    try:
        return reference.generate_presigned_url("get_object", **presign)
    finally:
        monkeypatch.setattr("botocore.auth.get_current_datetime", lambda: FROZEN)


def client(session, region, endpoint_url):
    style = "path" if endpoint_url else "auto"
    return session.create_client("s3", region_name=region, endpoint_url=endpoint_url,
                                 config=Config(signature_version="s3v4", s3={"addressing_style": style}))


@pytest.mark.parametrize("region, endpoint_url, bucket", [
    ("us-east-1", "http://127.0.0.1:4566", "image-jobs"),
    ("eu-west-1", "http://images.test:8080/", "image-jobs"),
    ("us-east-1", None, "image-jobs-123"),
    ("eu-central-1", None, "image-jobs-123"),
    ("ap-southeast-2", None, "b12"),
    ("me-south-1", None, "image-jobs"),
])
def test_a_url_signed_here_is_the_one_the_client_makes(session, region, endpoint_url, bucket):
    reference = client(session, region, endpoint_url)
    ours = GetPresigner(session.get_credentials, region, endpoint_url, client=None)
    for key in KEYS:
        expected = reference.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key},
                                                    ExpiresIn=900)
        assert ours.url(bucket, key, 900) == expected


@pytest.mark.parametrize("region, endpoint_url, bucket", [
    ("us-east-1", "http://127.0.0.1:4566", "image-jobs"),
    ("eu-central-1", None, "image-jobs-123"),
    ("us-east-1", None, "dotted.bucket.name"),
    ("cn-north-1", None, "image-jobs"),
])
def test_a_url_signed_at_a_given_time_is_the_one_the_client_makes_at_that_time(
        session, monkeypatch, region, endpoint_url, bucket):
    reference = client(session, region, endpoint_url)
    ours = GetPresigner(session.get_credentials, region, endpoint_url, client=reference)
    for key in KEYS:
        expected = at_window_start(reference, monkeypatch, Params={"Bucket": bucket, "Key": key}, ExpiresIn=7200)
        assert ours.url(bucket, key, 7200, signed_at=WINDOW_START) == expected
        assert "X-Amz-Date=20260301T110000Z" in expected
        # The clock (FROZEN) plays no part: the same arguments, the same URL.
        assert ours.url(bucket, key, 7200, signed_at=WINDOW_START) == expected


@pytest.mark.parametrize("region, bucket", [("us-east-1", "dotted.bucket.name"), ("cn-north-1", "image-jobs"),
                                            ("us-gov-west-1", "image-jobs")])
def test_other_shapes_are_left_to_the_client(session, region, bucket):
    reference = client(session, region, None)
    ours = GetPresigner(session.get_credentials, region, None, client=reference)
    expected = reference.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "k"}, ExpiresIn=60)
    assert ours.url(bucket, "k", 60) == expected
