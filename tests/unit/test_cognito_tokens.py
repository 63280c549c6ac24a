"""One table of Cognito tokens, and both doors take the same ones: a REST route (API
Gateway's Cognito authorizer, then chalicelib/http/auth.py's owner_of on the claims it passes)
and a push connect (auth.push_owner, which checks the token itself: WebSocket APIs take no
Cognito authorizer). The pool's signing keys are served from 127.0.0.1 as its JWKS."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from chalicelib.config import Settings
from chalicelib.domain.errors import Unauthorized
from chalicelib.http import auth

POOL_ARN = "arn:aws:cognito-idp:us-east-1:123456789012:userpool/us-east-1_Example1"
ISSUER = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Example1"  # the pool's, as Cognito writes it
APP = "4example5client6id7abcdefgh"  # the stack's UserPoolClientId
OTHER_APP = "9another8client7of6the5pool"
SERVICE = "3service2client1credentials0"  # a client-credentials client, for service routes later
SETTINGS = Settings(auth_mode="cognito", cognito_user_pool_arn=POOL_ARN, cognito_app_client_ids=APP)
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
STRANGER = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # a key the pool does not have
KID = "pool-key-1"
SUB = str(uuid.UUID(int=7))


def jwks() -> dict:
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key()))
    return {"keys": [{**public, "kid": KID, "alg": "RS256", "use": "sig"}]}


@pytest.fixture(scope="module")
def pool_keys():
    """The pool's /.well-known/jwks.json, on loopback."""
    body = json.dumps(jwks()).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield jwt.PyJWKClient(f"http://127.0.0.1:{server.server_port}/jwks.json", cache_keys=True)
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def signed_by_the_pool(monkeypatch, pool_keys):
    monkeypatch.setattr(auth, "_signing_keys", lambda url: pool_keys)


def id_token(**changes) -> dict:
    """The claims of an ID token Cognito issues to this app's client at sign-in."""
    now = int(time.time())
    claims = {"sub": SUB, "aud": APP, "iss": ISSUER, "token_use": "id", "auth_time": now, "iat": now,
              "exp": now + 3600, "cognito:username": SUB, "email": "alice@example.com", "email_verified": True}
    return {k: v for k, v in {**claims, **changes}.items() if v is not None}


def access_token(client: str = APP, scope: str = "aws.cognito.signin.user.admin", **changes) -> dict:
    """An access token's claims: `client_id`, never `aud`."""
    now = int(time.time())
    claims = {"sub": SUB, "client_id": client, "iss": ISSUER, "token_use": "access", "scope": scope,
              "auth_time": now, "iat": now, "exp": now + 3600, "username": SUB}
    return {**claims, **changes}


def signed(claims: dict, key=KEY, kid: Optional[str] = KID, algorithm="RS256") -> str:
    return jwt.encode(claims, key, algorithm=algorithm, headers={"kid": kid} if kid else None)


PUBLIC_PEM = KEY.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def hs256_with_the_public_key(claims: dict) -> str:
    """The algorithm-confusion attack, by hand (PyJWT refuses to make one)."""
    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    head = part(json.dumps({"alg": "HS256", "typ": "JWT", "kid": KID}).encode())
    body = part(json.dumps(claims).encode())
    mac = hmac.new(PUBLIC_PEM, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{part(mac)}"


NOW = int(time.time())

# (what the token is, the token, whether it names SUB as the owner)
TOKENS = [
    ("this app's ID token", signed(id_token()), True),
    ("another app client's ID token of the same pool", signed(id_token(aud=OTHER_APP)), False),
    ("this app's access token", signed(access_token()), False),
    ("a service's client-credentials access token",
     signed(access_token(SERVICE, "image-jobs/service", sub=SERVICE)), False),
    ("an ID token claiming no use", signed(id_token(token_use=None)), False),
    ("an ID token with no audience", signed(id_token(aud=None)), False),
    ("an ID token for this app and another", signed(id_token(aud=[APP, OTHER_APP])), False),
    ("an expired ID token", signed(id_token(exp=NOW - 60, iat=NOW - 3660)), False),
    # A day ahead: the table is made at collection, and under xdist a row may run many
    # minutes later (a nbf 10 minutes ahead had passed by then on a loaded machine).
    ("an ID token not valid yet", signed(id_token(nbf=NOW + 86400)), False),
    ("another pool's ID token", signed(id_token(iss=ISSUER.replace("Example1", "Example2"))), False),
    ("an ID token signed by a key the pool does not have", signed(id_token(), key=STRANGER), False),
    ("an ID token naming an unknown key", signed(id_token(), kid="pool-key-9"), False),
    ("alg none", jwt.encode(id_token(), None, algorithm="none", headers={"kid": KID}), False),
    ("HS256 keyed with the pool's public key", hs256_with_the_public_key(id_token()), False),
    ("an ID token with no subject", signed(id_token(sub=None)), False),
    ("an ID token whose subject is too long", signed(id_token(sub="x" * (auth.MAX_SUBJECT_BYTES + 1))), False),
    ("not a JWT", "not-a-jwt", False),
]


def cognito_authorizer(token: str) -> Optional[dict]:
    """What API Gateway's COGNITO_USER_POOLS authorizer does on a route with no OAuth scopes,
    as AWS documents it: it takes an ID token of the pool (any of its app clients) whose RS256
    signature is the pool's, not expired; it answers 401 itself to anything else, and passes
    an accepted token's claims to the function as strings (requestContext.authorizer.claims)."""
    try:
        header = jwt.get_unverified_header(token)
        (key,) = [k for k in jwks()["keys"] if k["kid"] == header.get("kid")]
        claims = jwt.decode(token, jwt.PyJWK(key).key, algorithms=["RS256"], issuer=ISSUER,
                            options={"verify_aud": False})
    except (jwt.PyJWTError, ValueError):
        return None
    if claims.get("token_use") != "id":  # an access token needs the route's scopes
        return None
    return {name: str(value) for name, value in claims.items()}


def rest_owner(token: str) -> Optional[str]:
    claims = cognito_authorizer(token)
    if claims is None:
        return None  # the gateway's 401
    try:
        return auth.owner_of({"authorization": f"Bearer {token}"}, {"authorizer": {"claims": claims}}, SETTINGS)
    except Unauthorized:
        return None


def push_owner(token: str) -> Optional[str]:
    try:
        return auth.push_owner(f"{auth.PUSH_PROTOCOL}, {auth.BEARER_PROTOCOL}{token}", SETTINGS)
    except Unauthorized:
        return None


@pytest.mark.parametrize("what, token, accepted", TOKENS, ids=[row[0] for row in TOKENS])
def test_a_rest_route_and_a_push_connect_take_the_same_tokens(what, token, accepted):
    expected = SUB if accepted else None
    assert rest_owner(token) == expected, what
    assert push_owner(token) == expected, what


def test_a_cognito_stage_needs_this_apps_client_ids():
    with pytest.raises(ValueError, match="COGNITO_APP_CLIENT_IDS"):
        Settings.from_environ({"AUTH_MODE": "cognito", "COGNITO_USER_POOL_ARN": POOL_ARN})
    two = Settings.from_environ({"AUTH_MODE": "cognito", "COGNITO_USER_POOL_ARN": POOL_ARN,
                                 "COGNITO_APP_CLIENT_IDS": f"{APP}, {OTHER_APP}"})
    assert two.cognito_app_clients == {APP, OTHER_APP}


def scoped_authorizer(token: str, scopes: list[str]) -> Optional[dict]:
    """API Gateway's COGNITO_USER_POOLS authorizer on a route with OAuth scopes (app.py's
    service routes, `with_scopes`): it takes an access token of the pool carrying one of
    them, and refuses an ID token (401)."""
    try:
        header = jwt.get_unverified_header(token)
        (key,) = [k for k in jwks()["keys"] if k["kid"] == header.get("kid")]
        claims = jwt.decode(token, jwt.PyJWK(key).key, algorithms=["RS256"], issuer=ISSUER,
                            options={"verify_aud": False})
    except (jwt.PyJWTError, ValueError):
        return None
    if claims.get("token_use") != "access" or not set(str(claims.get("scope", "")).split()) & set(scopes):
        return None
    return {name: str(value) for name, value in claims.items()}


def test_the_service_routes_take_the_service_principals_access_token_only():
    from chalicelib.domain.errors import Forbidden

    service = signed(access_token(SERVICE, auth.SERVICE_SCOPE, sub=SERVICE))
    claims = scoped_authorizer(service, [auth.SERVICE_SCOPE])
    caller = auth.service_of({}, {"authorizer": {"claims": claims}}, SETTINGS)
    assert caller == auth.Caller(SERVICE, service=True)
    # The gateway refuses a user's ID token and an access token without the scope itself.
    assert scoped_authorizer(signed(id_token()), [auth.SERVICE_SCOPE]) is None
    assert scoped_authorizer(signed(access_token()), [auth.SERVICE_SCOPE]) is None
    # Past the gateway, the app's own rule: a user's claims are forbidden on a service route,
    # and the service's claims on an owner's route.
    user = cognito_authorizer(signed(id_token()))
    with pytest.raises(Forbidden):
        auth.service_of({}, {"authorizer": {"claims": user}}, SETTINGS)
    with pytest.raises(Forbidden):
        auth.owner_of({}, {"authorizer": {"claims": claims}}, SETTINGS)
    # An access token without the scope names nobody (cognito_owner's rule).
    bare = {"sub": SERVICE, "token_use": "access", "scope": "aws.cognito.signin.user.admin"}
    with pytest.raises(Unauthorized):
        auth.caller_of({}, {"authorizer": {"claims": bare}}, SETTINGS)
