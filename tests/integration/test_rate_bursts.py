"""An owner inside its rate and burst is never refused, on the real table (moto's server and
LocalStack): concurrent requests of one API process, and several API processes
(benchmarks/rate_limit.py runs them), with the service's composition root."""
import json
import subprocess
import sys
import threading
import uuid

import pytest

from tests.conftest import ROOT


@pytest.fixture(params=["moto", "localstack"])
def endpoint(request):
    if request.param == "moto":
        return request.getfixturevalue("moto_endpoint")
    return request.getfixturevalue("localstack").endpoint


@pytest.fixture
def admission(endpoint, settings_for):
    """One API process's admission on a provisioned table (10 a second, bursts of 40)."""
    from chalicelib.bootstrap import build_use_cases
    from local.provision import provision
    from local.services import aws_client

    settings = settings_for(endpoint_url=endpoint, owner_requests_per_second=10, owner_burst=40)
    clients = {n: aws_client(n, settings.region, endpoint) for n in ("sqs", "s3", "dynamodb")}
    provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"])
    return build_use_cases(settings).admission


def refused_at_once(admission, owner, count):
    """`count` requests of the owner at once, in threads as a threaded server runs them."""
    from chalicelib.domain.errors import RateLimited

    start, refused = threading.Barrier(count), []

    def ask():
        start.wait()
        try:
            admission.check_rate(owner)
        except RateLimited as error:
            refused.append(error)

    threads = [threading.Thread(target=ask) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return refused


def test_a_gallery_retried_at_once_after_a_few_uploads_is_inside_the_burst(admission):
    """3 requests, then 12 at once: 15 of a burst of 40. Each request used to lease for itself,
    and those that lost the race for the owner's item were refused while it held plenty."""
    for round_ in range(3):
        owner = f"phone-{round_}-{uuid.uuid4().hex[:6]}"
        for _ in range(3):
            admission.check_rate(owner)
        assert refused_at_once(admission, owner, 12) == []


def test_several_api_processes_never_refuse_an_owner_inside_its_rate(endpoint):
    """Four API processes: the owner at half its rate, then a spike of its burst spread over
    them (each process's share at once), then 3 and 12 at once on one: none refused. Past
    its rate and at 3 x its rate no more than burst + rate x seconds is accepted, and another
    owner is served meanwhile; each process's own bucket alone would let 4 x that through."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "rate_limit.py"), "--json", "--endpoint", endpoint,
         "--processes", "4", "--seconds", "3"],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {r["row"]: r for r in json.loads(result.stdout)}
    inside = rows["inside the rate"]
    assert inside["refused"] == 0, inside
    assert inside["sent"] >= inside["spike"] + 15
    for row in ("past the rate", "at 3 x the rate"):
        assert rows[row]["limit"] * 0.8 <= rows[row]["accepted"] <= rows[row]["limit"], rows[row]
    past = rows["past the rate"]
    assert past["other_accepted"] == past["other_sent"] > 0
    assert rows["past the rate, each process's own bucket"]["accepted"] > 2 * past["limit"]
