"""Who is asking: the owner of the jobs a request may see."""
from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from chalicelib.config import Settings
from chalicelib.domain.errors import Forbidden, Unauthorized
from chalicelib.domain.webhooks import SERVICE_RECEIVER

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


# The app's backend (docs/contract.md "The service principal"): a token with this scope
# reads and deletes every owner's jobs and has the service webhook, and owns no jobs itself.
# In the cloud, Cognito's client-credentials grant on the template's resource server.
SERVICE_SCOPE = "image-jobs/service"


@dataclass(frozen=True)
class Caller:
    subject: str   # an owner's; for the service principal its client's
    service: bool  # the token carries SERVICE_SCOPE


def caller_of(headers: Mapping[str, str], context: Mapping[str, Any], settings: Settings) -> Caller:
    """Who asks; Unauthorized for no token, or a bad or expired one."""
    if settings.auth_mode == "cognito":
        # API Gateway's Cognito authorizer already checked the signature, issuer and expiry
        # (and, on the service routes, the scope); it passes the claims.
        claims = (context or {}).get("authorizer", {}).get("claims", {})
        return cognito_caller(claims, settings)
    claims = verify_claims(_bearer(headers), settings.jwt_secret)
    return Caller(_owner(claims["sub"]), _has_service_scope(claims.get("scope")))


def owner_of(headers: Mapping[str, str], context: Mapping[str, Any], settings: Settings) -> str:
    """The owner a user's token names; Forbidden for the service principal's token, which
    owns no jobs (it cannot upload: uploads belong to end users)."""
    caller = caller_of(headers, context, settings)
    if caller.service:
        raise Forbidden("A service token acts on the /service/ routes; owners' routes take an end user's token")
    return caller.subject


def service_of(headers: Mapping[str, str], context: Mapping[str, Any], settings: Settings) -> Caller:
    """The service principal; Forbidden for a user's token."""
    caller = caller_of(headers, context, settings)
    if not caller.service:
        raise Forbidden(f"The /service/ routes take a token with the scope {SERVICE_SCOPE}")
    return caller


def _has_service_scope(scope: Any) -> bool:
    """OAuth's `scope`: names separated by spaces."""
    return isinstance(scope, str) and SERVICE_SCOPE in scope.split()


def cognito_caller(claims: Mapping[str, Any], settings: Settings) -> Caller:
    """The service principal: an access token (`token_use` "access") with SERVICE_SCOPE, which
    the pool grants only to the template's client-credentials client (its subject is that
    client's id). Any other token is an owner's, by cognito_owner's rule."""
    if claims.get("token_use") == "access" and _has_service_scope(claims.get("scope")):
        return Caller(_owner(claims.get("sub")), service=True)
    return Caller(cognito_owner(claims, settings), service=False)


def cognito_owner(claims: Mapping[str, Any], settings: Settings) -> str:
    """The one rule of which Cognito tokens name an owner, on every route and at push connect
    (docs/contract.md "Who is asking"): an ID token (`token_use` "id", as API Gateway's
    authorizer takes when a route names no OAuth scope) of one of this app's clients
    (`aud` in COGNITO_APP_CLIENT_IDS; the authorizer takes any client of the pool), with a
    subject. Its signature, issuer and times are checked before (the authorizer, or
    verify_cognito_token). The service principal's rule is cognito_caller's, beside it."""
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
    if subject == SERVICE_RECEIVER:
        raise Unauthorized("The bearer token's subject is reserved")
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
        return verify_cognito_token(tokens[0], settings)  # an owner's ID token only
    claims = verify_claims(tokens[0], settings.jwt_secret)
    if _has_service_scope(claims.get("scope")):
        # It owns no jobs, so its socket would carry nothing: its webhook tells it.
        raise Unauthorized("The service principal has no push; its webhook tells it of every job")
    return _owner(claims["sub"])


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


def verify_claims(token: str, secret: str) -> dict:
    jwt = _jwt()
    try:
        return jwt.decode(token, secret, algorithms=["HS256"], options={"require": ["sub", "exp"]})
    except jwt.PyJWTError:
        raise Unauthorized("The bearer token is invalid or expired") from None


def verify_token(token: str, secret: str) -> str:
    return _owner(verify_claims(token, secret)["sub"])


def mint_token(subject: str, secret: str, ttl_seconds: int, now: int, scope: Optional[str] = None) -> str:
    """A dev token, as the README shows; the cloud uses Cognito's tokens instead. `scope`:
    SERVICE_SCOPE for the service principal's."""
    claims = {"sub": subject, "iat": now, "exp": now + ttl_seconds}
    if scope:
        claims["scope"] = scope
    return _jwt().encode(claims, secret, algorithm="HS256")
