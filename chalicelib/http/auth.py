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
        # API Gateway's Cognito authorizer already checked the signature, issuer, expiry and
        # token_use "id" (no OAuth scopes on the routes); it passes the claims.
        claims = (context or {}).get("authorizer", {}).get("claims", {})
        return cognito_owner(claims, settings)
    return verify_token(_bearer(headers), settings.jwt_secret)


def cognito_owner(claims: Mapping[str, Any], settings: Settings) -> str:
    """The one rule of which Cognito tokens name an owner, on every route and at push connect
    (docs/contract.md "Who is asking"): an ID token (`token_use` "id", as API Gateway's
    authorizer takes when a route names no OAuth scope) of one of this app's clients
    (`aud` in COGNITO_APP_CLIENT_IDS; the authorizer takes any client of the pool), with a
    subject. Its signature, issuer and times are checked before (the authorizer, or
    verify_cognito_token). A rule for service routes (an access token with their scope)
    belongs here, beside this one."""
    audience = claims.get("aud")  # Cognito's is one string; a list is no ID token of ours
    ours = isinstance(audience, str) and audience in settings.cognito_app_clients
    if claims.get("token_use") != "id" or not ours:
        raise Unauthorized("The bearer token is not an ID token of this app")
    return _owner(claims.get("sub"))


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


# Push (docs/contract.md "Push"): a browser cannot set headers on a WebSocket, so the token
# travels as a subprotocol, `bearer.<token>`, offered beside PUSH_PROTOCOL, which the server
# selects (never echoing the token back).
PUSH_PROTOCOL = "image-jobs.v1"
BEARER_PROTOCOL = "bearer."


def push_owner(subprotocols: Any, settings: Settings) -> str:
    """The owner of a WebSocket connect from its Sec-WebSocket-Protocol header; Unauthorized
    unless it offers PUSH_PROTOCOL and exactly one good bearer token."""
    offered = [p.strip() for p in str(subprotocols or "").split(",")]
    tokens = [p[len(BEARER_PROTOCOL):] for p in offered if p.startswith(BEARER_PROTOCOL)]
    if PUSH_PROTOCOL not in offered or len(tokens) != 1 or not tokens[0]:
        raise Unauthorized(f"Offer the subprotocols {PUSH_PROTOCOL} and {BEARER_PROTOCOL}<token>")
    if settings.auth_mode == "cognito":
        return verify_cognito_token(tokens[0], settings)
    return verify_token(tokens[0], settings.jwt_secret)


@functools.cache
def _signing_keys(jwks_url: str):
    return _jwt().PyJWKClient(jwks_url, cache_keys=True)


def cognito_issuer(user_pool_arn: str) -> str:
    region, pool_id = user_pool_arn.split(":")[3], user_pool_arn.rsplit("/", 1)[-1]
    return f"https://cognito-idp.{region}.amazonaws.com/{pool_id}"


def verify_cognito_token(token: str, settings: Settings) -> str:
    """What API Gateway's Cognito authorizer checks on the REST API (the pool's RS256
    signature, its issuer, expiry and not-before), done by hand since WebSocket APIs take no
    Cognito authorizer, then the same `cognito_owner` rule as every route. The pool's signing
    keys are fetched once per instance."""
    jwt = _jwt()
    issuer = cognito_issuer(settings.cognito_user_pool_arn)
    try:
        key = _signing_keys(issuer + "/.well-known/jwks.json").get_signing_key_from_jwt(token).key
        # The audience is cognito_owner's to check, with the token's use.
        claims = jwt.decode(token, key, algorithms=["RS256"], issuer=issuer,
                            options={"require": ["sub", "exp", "iss", "token_use"], "verify_aud": False})
    except jwt.PyJWTError:
        raise Unauthorized("The bearer token is invalid or expired") from None
    return cognito_owner(claims, settings)


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
