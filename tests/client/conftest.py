"""The client's tests: fakes for the schedule, and the real local runner for the rest."""
from __future__ import annotations

import time
import uuid

import pytest

from chalicelib.config import Settings
from chalicelib.http.auth import mint_token
from tests.conftest import free_port
from tests.local_runner import local_runner
from tests.proxy import TcpProxy


@pytest.fixture(scope="package")
def push_proxy() -> TcpProxy:
    """Between the SDK and the runner's push gateway (GET /push names it), so that a test can
    cut every socket and refuse new ones (down), then let them in again (up)."""
    return TcpProxy(free_port())


@pytest.fixture(scope="package")
def runner(push_proxy):
    """The e2e suite's runner, but ended with this package so it never idles beside the next."""
    with local_runner(PUSH_PORT=str(push_proxy.target[1]),
                      PUSH_URL=f"ws://127.0.0.1:{push_proxy.port}") as started:
        yield started
    push_proxy.down()


def token_for(owner: str, ttl: int = 3600) -> str:
    return mint_token(owner, Settings().jwt_secret, ttl, int(time.time()))


@pytest.fixture
def owner() -> str:
    """An owner of its own per test, so counting its jobs counts only this test's."""
    return f"client-{uuid.uuid4().hex[:12]}"


def noisy_png(width: int = 1500, height: int = 1200) -> bytes:
    """Random pixels barely compress: 1500x1200 RGB is about 5.4 MB, over /images' 4 MiB limit
    and far under the 50 MP pixel limit."""
    import io
    import os

    from PIL import Image

    out = io.BytesIO()
    Image.frombytes("RGB", (width, height), os.urandom(width * height * 3)).save(out, "PNG", compress_level=1)
    return out.getvalue()


def jobs_of(runner, owner: str) -> list[dict]:
    """The owner's job records, read from the runner's table itself, not through the API."""
    import boto3

    table = boto3.client("dynamodb", endpoint_url=runner.aws, region_name="us-east-1")
    items = []
    for page in table.get_paginator("scan").paginate(
            TableName=Settings().table, FilterExpression="#o = :o",
            ExpressionAttributeNames={"#o": "owner"}, ExpressionAttributeValues={":o": {"S": owner}}):
        items += page["Items"]
    return items
