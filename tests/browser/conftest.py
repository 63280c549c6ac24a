"""A real browser (Debian's chromium, driven by Playwright) on the page the local runner serves.

Nothing is downloaded: Playwright drives the system's /usr/bin/chromium (`make test` installs
it when it is missing). Every request the page makes must stay on 127.0.0.1; anything else
is aborted and fails the test.
"""
from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from chalicelib.config import Settings
from chalicelib.http.auth import mint_token
from tests.conftest import ROOT

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run", "--disable-sync", "--disable-quic"]
# Screenshots and traces of the browser tests; gitignored.
ARTIFACTS = ROOT / "test-artifacts" / "browser"
LOOPBACK = {"127.0.0.1", "localhost"}
# The page loads the package (clients/js) as this bundle, which `make web` builds.
BUNDLE = ROOT / "web" / "vendor" / "image-jobs-client.js"
SOURCES = ROOT / "clients" / "js" / "src"


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no {CHROMIUM}: `apt-get install -y chromium` (make test does it when missing)")
    if not BUNDLE.exists():
        pytest.fail(f"no {BUNDLE.relative_to(ROOT)}: `make web` builds it (make test does)")
    newest = max(path.stat().st_mtime for path in SOURCES.glob("*.ts"))
    if BUNDLE.stat().st_mtime < newest:
        pytest.fail(f"{BUNDLE.relative_to(ROOT)} is older than clients/js/src: `make web`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def page(browser, runner):
    yield from _page(browser, runner)


@pytest.fixture
def page_without_csp(browser, runner):
    """For a page whose host would allow more than the local runner's policy does (the
    cloud stage's Cognito domain, say)."""
    yield from _page(browser, runner, bypass_csp=True)


def _page(browser, runner, **options):
    assert any(f"page {runner.web}" in line for line in runner.output), "the runner serves no page"
    context = browser.new_context(viewport={"width": 960, "height": 720}, **options)
    context.set_default_timeout(30_000)
    strays, errors = [], []

    def guard(route):
        if urlsplit(route.request.url).hostname in LOOPBACK:
            route.fallback()
        else:
            strays.append(route.request.url)
            route.abort()

    context.route("**/*", guard)
    # An owner per test: the page lists its owner's jobs (GET /image-jobs), so that another
    # test's photos (the same names, often) are never on this one's page.
    owner = f"web-{uuid.uuid4().hex[:12]}"

    def config(route):
        response = route.fetch()
        body = response.json()
        if body.get("token"):
            body["token"] = mint_token(owner, Settings().jwt_secret, 3600, int(time.time()))
        route.fulfill(response=response, json=body)

    context.route(f"{runner.web}config.json", config)
    page = context.new_page()
    page.owner = owner
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert not strays, f"the page tried to leave 127.0.0.1: {strays}"
    assert not errors, f"uncaught errors in the page: {errors}"
