"""Make API Gateway's own errors problem+json, as the contract wants of every error.

    python -m infra.gateway_responses dev        # after every `chalice deploy --stage dev`

In the cloud some errors never reach the app: the Cognito authorizer answers 401 itself,
API Gateway answers 413 for a body over its limit, 429 when throttled, 5xx when the function
fails or times out. By default their body is `{"message": "Unauthorized"}`. This sets the
REST API's gateway responses to the contract's problem details (chalicelib/http/problems.py), sets
the stage's throttling (API_RATE_LIMIT, API_BURST_LIMIT), and redeploys the stage. Chalice replaces the whole API definition on each deploy, so run this
after each one (`make deploy` does both).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from chalicelib.config import Settings
from chalicelib.http import problems

ROOT = Path(__file__).resolve().parent.parent

# API Gateway response type -> the contract's code (whose status the response takes).
RESPONSES = {
    "UNAUTHORIZED": "unauthorized",
    "ACCESS_DENIED": "unauthorized",
    "EXPIRED_TOKEN": "unauthorized",
    "INVALID_SIGNATURE": "unauthorized",
    "MISSING_AUTHENTICATION_TOKEN": "invalid_request",  # what API Gateway says to an unknown path
    "BAD_REQUEST_BODY": "invalid_request",
    "BAD_REQUEST_PARAMETERS": "invalid_request",
    "REQUEST_TOO_LARGE": "file_too_large",
    "UNSUPPORTED_MEDIA_TYPE": "unsupported_format",
    "THROTTLED": "rate_limited",
    "QUOTA_EXCEEDED": "rate_limited",
    "INTEGRATION_TIMEOUT": "overloaded",
    "DEFAULT_4XX": "invalid_request",
    "DEFAULT_5XX": "overloaded",
}
_RETRY = {"rate_limited", "overloaded"}


def gateway_response(code: str, retry_after: int, allow_origin: str = "*") -> dict:
    """put_gateway_response's arguments (less the API) for one contract code."""
    # Without the CORS header a browser page sees a network error, not the problem's title.
    headers = {"Content-Type": problems.CONTENT_TYPE, "Cache-Control": "no-store",
               "Access-Control-Allow-Origin": allow_origin}
    if code == "unauthorized":
        headers["WWW-Authenticate"] = 'Bearer realm="image-jobs"'
    if code in _RETRY:
        headers["Retry-After"] = str(retry_after)
    # The template is plain JSON: no '$' or '#', which API Gateway's VTL would interpret.
    body = json.dumps(problems.problem(code))
    assert "$" not in body and "#" not in body
    return {
        "statusCode": str(problems.status_of(code)),
        "responseParameters": {f"gatewayresponse.header.{name}": f"'{value}'"
                               for name, value in headers.items()},
        "responseTemplates": {"application/json": body},
    }


def throttling(rate: int, burst: int) -> list[dict]:
    """update_stage's patch for every method of the stage. API Gateway throttles the whole
    stage (per owner it would need an API key per user); the app's per-owner token bucket
    (chalicelib/usecases/admission.py) then keeps one owner from using all of it."""
    return [{"op": "replace", "path": "/*/*/throttling/rateLimit", "value": str(rate)},
            {"op": "replace", "path": "/*/*/throttling/burstLimit", "value": str(burst)}]


def apply(apigateway, rest_api_id: str, stage: str, retry_after: int, allow_origin: str = "*",
          rate: int = 1000, burst: int = 2000) -> None:
    for response_type, code in RESPONSES.items():
        apigateway.put_gateway_response(restApiId=rest_api_id, responseType=response_type,
                                        **gateway_response(code, retry_after, allow_origin))
    # Gateway responses take effect with the next deployment of the stage.
    apigateway.create_deployment(restApiId=rest_api_id, stageName=stage,
                                 description="image-jobs gateway responses")
    apigateway.update_stage(restApiId=rest_api_id, stageName=stage,
                            patchOperations=throttling(rate, burst))


def deployed_rest_api(project_dir: Path, stage: str) -> tuple[str, str]:
    """(rest_api_id, region) from Chalice's record of the stage's last deploy."""
    path = project_dir / ".chalice" / "deployed" / f"{stage}.json"
    if not path.exists():
        raise SystemExit(f"no {path}: run `chalice deploy --stage {stage}` first")
    deployed = json.loads(path.read_text())
    for resource in deployed.get("resources", []):
        if resource.get("resource_type") == "rest_api":
            url = resource["rest_api_url"]  # https://<id>.execute-api.<region>.amazonaws.com/api/
            return resource["rest_api_id"], url.split(".")[2]
    raise SystemExit(f"{path} has no rest_api: was the stage deployed with its routes?")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage")
    parser.add_argument("--project-dir", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    import boto3

    config = json.loads((args.project_dir / ".chalice" / "config.json").read_text())
    stage_config = config["stages"][args.stage]
    api_stage = stage_config.get("api_gateway_stage", config.get("api_gateway_stage", "api"))
    settings = Settings.from_environ(stage_config.get("environment_variables", {}))
    rest_api_id, region = deployed_rest_api(args.project_dir, args.stage)
    apply(boto3.session.Session(region_name=region).client("apigateway"), rest_api_id,
          api_stage, settings.retry_after_seconds, settings.cors_allow_origin,
          settings.api_rate_limit, settings.api_burst_limit)
    print(f"gateway responses of {rest_api_id} ({args.stage}) now answer problem+json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
