"""Who is asking: the owner of the jobs a request may see."""
from __future__ import annotations

import functools
import warnings
from typing import Any, Mapping

from chalicelib.config import Settings
from chalicelib.domain.errors import Unauthorized


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
        subject = claims.get("sub")
        if not subject:
            raise Unauthorized()
        return subject
    return verify_token(_bearer(headers), settings.jwt_secret)


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
    subject = claims["sub"]
    if not isinstance(subject, str) or not subject:
        raise Unauthorized("The bearer token has no subject")
    return subject


def mint_token(subject: str, secret: str, ttl_seconds: int, now: int) -> str:
    """A dev token, as the README shows; the cloud uses Cognito's tokens instead."""
    return _jwt().encode({"sub": subject, "iat": now, "exp": now + ttl_seconds}, secret, algorithm="HS256")
