"""API Gateway's own errors (the Cognito authorizer's 401, throttling, timeouts) are
problem+json too, set on a REST API of the embedded stack (moto's server)."""
from __future__ import annotations

import json

from chalicelib.http import problems
from infra.gateway_responses import RESPONSES, apply
from local.services import aws_client


def test_every_gateway_response_is_a_contract_problem(moto_endpoint):
    apigateway = aws_client("apigateway", "us-east-1", moto_endpoint)
    api_id = apigateway.create_rest_api(name="image-jobs")["id"]
    root = apigateway.get_resources(restApiId=api_id)["items"][0]["id"]
    apigateway.put_method(restApiId=api_id, resourceId=root, httpMethod="GET", authorizationType="NONE")
    apigateway.put_integration(restApiId=api_id, resourceId=root, httpMethod="GET", type="MOCK")
    apigateway.create_deployment(restApiId=api_id, stageName="api")

    apply(apigateway, api_id, "api", retry_after=2, allow_origin="https://photos.example.com",
          rate=50, burst=100)
    settings = apigateway.get_stage(restApiId=api_id, stageName="api")["methodSettings"]["*/*"]
    assert (settings["throttlingRateLimit"], settings["throttlingBurstLimit"]) == (50.0, 100)

    for response_type, code in RESPONSES.items():
        response = apigateway.get_gateway_response(restApiId=api_id, responseType=response_type)
        assert response["statusCode"] == str(problems.status_of(code))
        body = json.loads(response["responseTemplates"]["application/json"])
        assert body == problems.problem(code)
        headers = response["responseParameters"]
        assert headers["gatewayresponse.header.Content-Type"] == "'application/problem+json'"
        # A browser page on another origin reads the problem only with this header.
        assert headers["gatewayresponse.header.Access-Control-Allow-Origin"] == "'https://photos.example.com'"
        if code == "unauthorized":
            assert "gatewayresponse.header.WWW-Authenticate" in headers
        if code in ("rate_limited", "overloaded"):
            assert headers["gatewayresponse.header.Retry-After"] == "'2'"
    # A new deployment carries them to the stage.
    assert len(apigateway.get_deployments(restApiId=api_id)["items"]) == 2


def test_the_authorizers_refusal_is_the_contracts_401():
    assert RESPONSES["UNAUTHORIZED"] == "unauthorized"
    assert {"DEFAULT_4XX", "DEFAULT_5XX", "THROTTLED", "REQUEST_TOO_LARGE"} <= set(RESPONSES)
