"""Job ids are matched whole through the API: an id with anything after it (a trailing
newline above all, which `$` in a regex lets through) names no job.

API Gateway hands the view the URL-decoded path parameter; Chalice's local server and test
client pass it still encoded, so these tests build API Gateway's proxy event themselves."""
import json

import pytest
from chalice.local import LambdaContext, LambdaEventConverter, RouteMatcher

import app as application
from tests.images import jpeg
from tests.unit.test_app import assert_problem, auth, client, use_cases  # noqa: F401 (fixtures)


class Response:
    def __init__(self, raw):
        self.status_code = raw["statusCode"]
        self.headers = raw["headers"]
        self.body = raw["body"].encode() if isinstance(raw["body"], str) else raw["body"]


def through_api_gateway(method: str, route: str, job_id: str) -> Response:
    """`job_id` arrives in pathParameters exactly as given, decoded, as API Gateway passes it."""
    app = application.app
    converter = LambdaEventConverter(RouteMatcher(list(app.routes)), app.api.binary_types)
    placeholder = "5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0"
    event = converter.create_lambda_event(method, route.format(job_id=placeholder),
                                          {**auth(), "content-type": "application/json"}, b"")
    event["pathParameters"] = {"job_id": job_id}
    event["path"] = route.format(job_id=job_id)
    return Response(app(event, LambdaContext("api_handler", 512, max_runtime_ms=25_000)))


@pytest.mark.parametrize("suffix", ["\n", "\r\n", " ", "x"])
def test_an_id_with_a_trailing_character_is_not_found_on_every_route(client, use_cases, suffix):  # noqa: F811
    r = client.http.post("/api/v1/images", headers={**auth(), "Content-Type": "image/jpeg"}, body=jpeg())
    job_id = json.loads(r.body)["job_id"]
    one = "/api/v1/image-jobs/{job_id}"
    assert through_api_gateway("GET", one, job_id).status_code == 200  # the harness reaches the job
    asked = []
    get = use_cases.ctx.jobs.get
    use_cases.ctx.jobs.get = lambda job_id: asked.append(job_id) or get(job_id)
    for method, route in (("GET", one), ("POST", one + "/cancel"), ("DELETE", one)):
        assert_problem(through_api_gateway(method, route, job_id + suffix), 404, "job_not_found")
    # Refused as not an id at all: it never reaches the table as a key.
    assert asked == []
    # None of them touched the job.
    assert json.loads(through_api_gateway("GET", one, job_id).body)["status"] == "queued"
