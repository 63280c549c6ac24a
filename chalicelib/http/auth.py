"""Who is asking: the owner of the jobs a request may see."""
from __future__ import annotations

import functools
import warnings
from typing import Any, Mapping

from chalicelib.config import Settings
from chalicelib.domain.errors import Unauthorized

# The longest subject (UTF-8 bytes) that may own jobs: Cognito's are UUIDs (36). It keeps
# every key the owner is part of far under DynamoDB's 2,048 bytes, and a job's item within
# one write unit (tests/integration/test_capacity_calls.py leaves it this much room).
MAX_SUBJECT_BYTES = 128


@functools.cache
def _jwt():
    """PyJWT, imported on first use: in the cloud API Gateway checks the token and a cold
    start never pays for it (nor for cryptography, which PyJWT loads when it is installed)."""
    import jwt
    from jwt.warnings import InsecureKeyLengthWarning

    # The contract's dev default secret is short; the local runner warns about it once at
    # start instead of PyJWT warning on every request.
    warnings.filterwarnings("ignore", category=InsecureKeyLengthWarning)
    return jwt


def owner_of(headers: Mapping[str, str], context: Mapping[str, Any], settings: Settings) -> str:
    if settings.auth_mode == "cognito":
        # API Gateway's Cognito authorizer already checked the token; it passes the claims.
        claims = (context or {}).get("authorizer", {}).get("claims", {})
        return _owner(claims.get("sub"))
    return verify_token(_bearer(headers), settings.jwt_secret)


def _owner(subject: Any) -> str:
    if not isinstance(subject, str) or not subject:
        raise Unauthorized("The bearer token has no subject")
    if len(subject.encode("utf-8", "surrogatepass")) > MAX_SUBJECT_BYTES:
        raise Unauthorized("The bearer token's subject is too long")
    return subject


def _bearer(headers: Mapping[str, str]) -> str:
    value = headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("Send Authorization: Bearer <token>")
    return token.strip()


def verify_token(token: str, secret: str) -> str:
    jwt = _jwt()
    try:
        claims = jwt.decode(
            token, secret, algorithms=["HS256"], options={"require": ["sub", "exp"]}
        )
    except jwt.PyJWTError:
        raise Unauthorized("The bearer token is invalid or expired") from None
    return _owner(claims["sub"])


def mint_token(subject: str, secret: str, ttl_seconds: int, now: int) -> str:
    """A dev token, as the README shows; the cloud uses Cognito's tokens instead."""
    return _jwt().encode({"sub": subject, "iat": now, "exp": now + ttl_seconds}, secret, algorithm="HS256")
