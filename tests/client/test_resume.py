"""The SDK's choice of method by size, and a multipart upload cut at 90 % through the TCP
proxy that resumes with only the parts storage does not hold."""
from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest

from image_jobs import Client, ConnectionFailed
from tests.client.conftest import token_for
from tests.e2e.test_upload_methods import BUCKET, ORIGINALS, padded_jpeg, s3
from tests.proxy import TcpProxy

SIZE = 40_000_000


class ToProxy(httpx.HTTPTransport):
    """Sends storage's requests through the proxy (moto checks no signature, so no Host pin)."""

    def __init__(self, storage_port: int, proxy: TcpProxy):
        super().__init__()
        self._storage_port, self._proxy = storage_port, proxy

    def handle_request(self, request):
        if request.url.port == self._storage_port:
            request.url = request.url.copy_with(port=self._proxy.port)
        return super().handle_request(request)


@pytest.mark.parametrize("size,method", [(5 * 1024 * 1024, "PUT"), (17 * 1024 * 1024, "multipart")])
def test_upload_picks_put_then_multipart_by_size(runner, owner, size, method):
    with Client(runner.api, token_for(owner)) as client:
        job = client.upload(padded_jpeg(size))
        assert job.raw["upload"]["method"] == method
        assert job.wait(120).status == "ready"


def test_a_40_mb_upload_cut_at_90_percent_resumes_with_only_the_missing_parts(runner, owner, capsys):
    data = padded_jpeg(SIZE)
    proxy = TcpProxy(urlsplit(runner.aws).port)
    http = httpx.Client(transport=ToProxy(urlsplit(runner.aws).port, proxy), timeout=60)
    client = Client(runner.api, token_for(owner), http=http, max_attempts=1)
    cut = {"done": False}
    parts_sent = []

    def progress(sent, total):
        if not cut["done"] and sent >= 0.9 * total:
            cut["done"] = True
            proxy.down()

    with pytest.raises(ConnectionFailed) as failed:
        client.upload(data, on_progress=progress)
    sent_before = client.bytes_to_storage
    proxy.up()
    job = failed.value.job
    job_id = job.location.rsplit("/", 1)[-1]
    client.resume(job, data, on_part_progress=lambda n, s, t: parts_sent.append(n) if s == t else None)
    assert job.wait(180).status == "ready"
    resumed = client.bytes_to_storage - sent_before
    part = 8 * 1024 * 1024
    assert resumed < 2 * part  # only what was cut: not the whole file again
    listed = s3(runner).list_objects_v2(Bucket=BUCKET, Prefix=ORIGINALS + job_id)["Contents"]
    assert [o["Key"] for o in listed] == [ORIGINALS + job_id]
    with capsys.disabled():
        print(f"\n40 MB cut at 90 %: {sent_before:,} bytes before the cut, {resumed:,} on resume "
              f"(parts {sorted(set(parts_sent))}), {client.bytes_to_storage:,} in all for {SIZE:,}")
    proxy.down()
    http.close()
