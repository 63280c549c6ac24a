"""The same page as a cloud stage would host it: no token in config.json, so the person signs
in through the Cognito hosted UI (authorization code + PKCE) or pastes a token. The hosted UI
is played by routes inside the browser: nothing leaves 127.0.0.1. The local API takes the
resulting token because it is one of its own dev tokens. The local runner's CSP allows no
Cognito domain (a cloud host's would), hence page_without_csp."""
from __future__ import annotations

import base64
import hashlib
import time
from urllib.parse import parse_qs, urlencode, urlsplit

from playwright.sync_api import expect

from chalicelib.config import Settings
from chalicelib.http.auth import mint_token
from tests.browser.photos import landscape

COGNITO = "https://image-jobs-dev.auth.us-east-1.amazoncognito.test"
CLIENT_ID = "4example5client6id7abcdefgh"


def serve_as_a_static_site(page, runner, config):
    """config.json as the deployer writes it (None: none at all)."""
    if config is None:
        page.route(f"{runner.web}config.json", lambda route: route.fulfill(status=404, body="not found"))
    else:
        page.route(f"{runner.web}config.json", lambda route: route.fulfill(json=config))


REAL_SIZE = ("img => new Promise(done => { const copy = new Image(); copy.onload = () => done([copy.naturalWidth, copy.naturalHeight]); copy.src = img.currentSrc; })")


def upload_one_and_see_it_ready(page):
    page.wait_for_selector("body[data-ready=true]")
    page.set_input_files("#files", files=[
        {"name": "cloud.jpg", "mimeType": "image/jpeg", "buffer": landscape(800, 600, seed=5)}])
    job = page.locator("li.job")
    expect(job).to_have_attribute("data-status", "ready", timeout=60_000)
    # The srcset's choice, at its own size (naturalWidth is the slot's width with w descriptors).
    width, height = job.locator(".thumb img").evaluate(REAL_SIZE)
    assert width == height and width in (256, 512)


def test_sign_in_through_the_hosted_ui_with_pkce(page_without_csp, runner):
    page = page_without_csp
    serve_as_a_static_site(page, runner, {
        "api": f"{runner.api}/api/v1", "cognito": {"domain": COGNITO, "client_id": CLIENT_ID}})
    seen = {}

    def authorize(route):
        query = {k: v[0] for k, v in parse_qs(urlsplit(route.request.url).query).items()}
        seen["authorize"] = query
        back = query["redirect_uri"] + "?" + urlencode({"code": "one-time-code", "state": query["state"]})
        route.fulfill(status=302, headers={"Location": back})

    def token(route):
        form = {k: v[0] for k, v in parse_qs(route.request.post_data).items()}
        seen["token"] = form
        ok = (form["code"] == "one-time-code" and form["client_id"] == CLIENT_ID
              and pkce_challenge(form["code_verifier"]) == seen["authorize"]["code_challenge"])
        id_token = mint_token("cognito-user", Settings().jwt_secret, 600, int(time.time()))
        route.fulfill(status=200 if ok else 400, json={"id_token": id_token, "token_type": "Bearer"} if ok else {},
                      headers={"Access-Control-Allow-Origin": runner.web.rstrip("/")})

    page.route(f"{COGNITO}/oauth2/authorize?*", authorize)
    page.route(f"{COGNITO}/oauth2/token", token)
    page.goto(runner.web)
    expect(page.locator("#signin")).to_be_visible()
    expect(page.locator("#drop")).to_be_hidden()
    page.click("#signin-cognito")

    expect(page.locator("#who")).to_contain_text("Signed in")
    assert seen["authorize"]["response_type"] == "code"
    assert seen["authorize"]["code_challenge_method"] == "S256"
    assert seen["authorize"]["redirect_uri"] == runner.web
    assert seen["token"]["grant_type"] == "authorization_code"
    assert "code=" not in page.url  # the one-time code is dropped from the address bar
    upload_one_and_see_it_ready(page)


def test_a_pasted_token_works_when_there_is_no_config(page_without_csp, runner):
    page = page_without_csp
    serve_as_a_static_site(page, runner, None)
    page.goto(runner.web)
    page.fill("#api-url", f"{runner.api}/api/v1")
    page.fill("#token", mint_token("pasting-user", Settings().jwt_secret, 600, int(time.time())))
    page.click("#token-form button[type=submit]")
    expect(page.locator("#who")).to_contain_text("Pasted token")
    upload_one_and_see_it_ready(page)


def pkce_challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
