"""What the deployment package drops: files the functions never load.

Lambda takes a directly uploaded package up to 50 MB zipped. botocore ships the models of
every AWS service (459 of them, 16.5 MB of the zip), and the functions create clients for a
handful; numpy ships its own test suite (1.5 MB). infra/bytecode.py leaves these out when it
rewrites the package after `chalice package`.

A client of a service whose model is missing fails at its creation (UnknownServiceError), so
SERVICES must name every service any code path creates a client for: tests/deploy/test_package.py
finds them in chalicelib/ and app.py and creates each from the package.
"""
from __future__ import annotations

# The services the code creates clients for (chalicelib/bootstrap.py; PynamoDB's dynamodb),
# and those botocore's own credential providers call (assume-role, SSO): never on Lambda,
# where the role's credentials are in the environment, but a few KB against a failure.
SERVICES = frozenset({
    "s3", "dynamodb", "sqs", "cloudwatch", "secretsmanager", "cloudfront", "apigatewaymanagementapi",
    "sts", "sso", "sso-oidc",
})
_MODELS = "botocore/data/"


def drops(name: str) -> bool:
    """Whether the package entry `name` (a path in the zip) is left out."""
    if name.startswith(_MODELS):
        service, _, rest = name[len(_MODELS):].partition("/")
        # The files at the top (endpoints.json, partitions.json, _retry.json, ...) every client reads.
        return bool(rest) and service not in SERVICES
    return name.startswith("numpy/") and "/tests/" in name
