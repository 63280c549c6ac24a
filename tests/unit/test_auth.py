import time

import jwt
import pytest

from chalicelib.config import Settings
from chalicelib.domain.errors import Unauthorized
from chalicelib.http.auth import mint_token, owner_of, verify_token

SECRET = "a-test-secret-of-at-least-32-bytes!"
SETTINGS = Settings(jwt_secret=SECRET)


def bearer(token):
    return {"authorization": f"Bearer {token}"}


def test_a_minted_token_names_its_owner():
    token = mint_token("alice", SECRET, 60, int(time.time()))
    assert owner_of(bearer(token), {}, SETTINGS) == "alice"


@pytest.mark.parametrize("headers", [
    {}, {"authorization": ""}, {"authorization": "Basic abc"}, {"authorization": "Bearer "},
    {"authorization": "Bearer not.a.jwt"},
])
def test_missing_or_malformed_tokens_are_unauthorized(headers):
    with pytest.raises(Unauthorized):
        owner_of(headers, {}, SETTINGS)


def test_wrong_secret_expired_no_sub_and_alg_none_are_refused():
    now = int(time.time())
    cases = [
        mint_token("alice", "another-secret-of-at-least-32-bytes", 60, now),
        mint_token("alice", SECRET, 60, now - 3600),
        jwt.encode({"exp": now + 60}, SECRET, algorithm="HS256"),
        jwt.encode({"sub": "alice"}, SECRET, algorithm="HS256"),  # no expiry
        jwt.encode({"sub": "alice", "exp": now + 60}, None, algorithm="none"),
        jwt.encode({"sub": "", "exp": now + 60}, SECRET, algorithm="HS256"),
    ]
    for token in cases:
        with pytest.raises(Unauthorized):
            verify_token(token, SECRET)


def test_cognito_mode_reads_the_authorizers_claims():
    settings = Settings(auth_mode="cognito", cognito_app_client_ids="app")
    context = {"authorizer": {"claims": {"sub": "c0ffee", "token_use": "id", "aud": "app"}}}
    assert owner_of({}, context, settings) == "c0ffee"
    with pytest.raises(Unauthorized):
        owner_of(bearer("anything"), {}, settings)


def test_a_subject_past_the_bound_is_unauthorized_in_both_modes():
    from chalicelib.http.auth import MAX_SUBJECT_BYTES

    now = int(time.time())
    longest, over = "a" * MAX_SUBJECT_BYTES, "é" * (MAX_SUBJECT_BYTES // 2 + 1)  # 2 bytes each
    assert owner_of(bearer(mint_token(longest, SECRET, 60, now)), {}, SETTINGS) == longest
    with pytest.raises(Unauthorized):
        owner_of(bearer(mint_token(over, SECRET, 60, now)), {}, SETTINGS)
    cognito = Settings(auth_mode="cognito", cognito_app_client_ids="app")
    claims = {"sub": "x" * (MAX_SUBJECT_BYTES + 1), "token_use": "id", "aud": "app"}
    with pytest.raises(Unauthorized):
        owner_of({}, {"authorizer": {"claims": claims}}, cognito)


def test_the_service_principals_token_is_refused_at_push_connect():
    from chalicelib.http.auth import BEARER_PROTOCOL, PUSH_PROTOCOL, SERVICE_SCOPE, push_owner

    now = int(time.time())
    service = mint_token("app-backend", SECRET, 60, now, scope=SERVICE_SCOPE)
    with pytest.raises(Unauthorized):
        push_owner(f"{PUSH_PROTOCOL}, {BEARER_PROTOCOL}{service}", SETTINGS)
    user = mint_token("alice", SECRET, 60, now, scope="image-jobs/other")
    assert push_owner(f"{PUSH_PROTOCOL}, {BEARER_PROTOCOL}{user}", SETTINGS) == "alice"
