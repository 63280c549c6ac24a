"""An upload whose answer is lost after the server committed it: the SDK retries with the same
Idempotency-Key, gets the same job back (replayed), and the table holds exactly one job."""
from __future__ import annotations

import httpx
import pytest

from image_jobs import Client
from tests.client.conftest import jobs_of, noisy_png, token_for
from tests.images import jpeg
from tests.proxy import TcpProxy


@pytest.fixture
def proxy(runner):
    """A cuttable port in front of the API (storage is reached directly, as the form says)."""
    cut = TcpProxy(int(runner.api.rsplit(":", 1)[1]))
    yield cut
    cut.down()


def client_through(proxy, owner):
    sent, answers = [], []
    http = httpx.Client(timeout=30, event_hooks={"request": [sent.append], "response": [answers.append]})
    return Client(f"http://127.0.0.1:{proxy.port}", token_for(owner), http=http), sent, answers


@pytest.mark.parametrize("cuts", [1, 2])
def test_an_upload_cut_after_the_commit_is_retried_with_its_key_and_makes_one_job(runner, proxy, owner, cuts):
    client, sent, answers = client_through(proxy, owner)
    proxy.drop_answers(cuts)
    job = client.upload(jpeg(800, 600))

    assert proxy.dropped == cuts  # the answers really were lost
    posts = [r for r in sent if r.url.path == "/api/v1/images"]
    assert len(posts) == cuts + 1 and len({r.headers["Idempotency-Key"] for r in posts}) == 1
    (answer,) = [a for a in answers if a.request.url.path == "/api/v1/images"]
    assert answer.status_code == 202
    assert answer.headers["Idempotent-Replayed"] == "true"  # so the first request had committed
    assert len(jobs_of(runner, owner)) == 1
    assert job.wait(deadline=60).ready
    assert len(jobs_of(runner, owner)) == 1  # and still one once it is done


def test_a_direct_upload_cut_after_the_commit_is_retried_and_makes_one_job(runner, proxy, owner):
    client, sent, answers = client_through(proxy, owner)
    proxy.drop_answers(1)
    job = client.upload(noisy_png())

    assert proxy.dropped == 1
    creates = [r for r in sent if r.url.path == "/api/v1/uploads"]
    assert len(creates) == 2 and len({r.headers["Idempotency-Key"] for r in creates}) == 1
    (answer,) = [a for a in answers if a.request.url.path == "/api/v1/uploads"]
    assert answer.headers["Idempotent-Replayed"] == "true"
    to_storage = [r for r in sent if r.url.path != "/api/v1/uploads"][0]
    assert to_storage.url.port == int(runner.aws.rsplit(":", 1)[1])  # the form's URL, not the proxy
    assert job.wait(deadline=90).ready
    assert len(jobs_of(runner, owner)) == 1
