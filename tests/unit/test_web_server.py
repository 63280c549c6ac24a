"""local/web.py: the page's files, and a dev token only for pages of its own origin."""
import time

import pytest
import requests

from chalicelib.http.auth import verify_token
from local.web import PageServer

SECRET = "test-secret"


@pytest.fixture
def server():
    page = PageServer("127.0.0.1", 0, "http://127.0.0.1:8000/api/v1", "http://127.0.0.1:4566",
                      SECRET, "web", 4 * 1024 * 1024, 16 * 1024 * 1024)
    page.start()
    yield page
    page.stop()


def test_config_gives_the_api_and_a_fresh_dev_token(server):
    r = requests.get(server.url + "config.json", timeout=5)
    assert r.status_code == 200 and r.headers["Cache-Control"] == "no-store"
    config = r.json()
    assert config["api"] == "http://127.0.0.1:8000/api/v1"
    assert config["max_upload_bytes"] == 4 * 1024 * 1024
    assert config["multipart_min_bytes"] == 16 * 1024 * 1024
    assert verify_token(config["token"], SECRET) == "web"
    # No CORS header: a page of another origin cannot read the token.
    assert not any(h.lower().startswith("access-control") for h in r.headers)


def test_another_host_name_gets_no_token(server):
    """A DNS-rebinding page reaches 127.0.0.1 under its own name; it gets nothing."""
    r = requests.get(server.url + "config.json", headers={"Host": "evil.example:80"}, timeout=5)
    assert r.status_code == 421 and "token" not in r.text


def test_the_page_is_served_with_a_strict_content_security_policy(server):
    r = requests.get(server.url, timeout=5)
    assert r.status_code == 200 and '<script type="module" src="js/main.js">' in r.text
    csp = r.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp
    assert "connect-src 'self' http://127.0.0.1:8000 http://127.0.0.1:4566" in csp
    js = requests.get(server.url + "js/main.js", timeout=5)
    assert js.status_code == 200 and "javascript" in js.headers["Content-Type"]


def test_no_directory_listing_and_nothing_outside_web(server):
    assert requests.get(server.url + "js/", timeout=5).status_code == 404
    assert requests.get(server.url + "../app.py", timeout=5).status_code == 404
    assert requests.get(server.url + "%2e%2e/app.py", timeout=5).status_code == 404


def test_tokens_are_fresh_on_each_load(server):
    first = requests.get(server.url + "config.json", timeout=5).json()["token"]
    time.sleep(1.1)
    assert requests.get(server.url + "config.json", timeout=5).json()["token"] != first


def test_the_policy_lets_the_page_reach_the_push_socket_and_nothing_more():
    page = PageServer("127.0.0.1", 0, "http://127.0.0.1:8000/api/v1", "http://127.0.0.1:4566",
                      SECRET, "web", 4 * 1024 * 1024, 16 * 1024 * 1024, push_url="ws://127.0.0.1:8001")
    page.start()
    try:
        csp = requests.get(page.url, timeout=5).headers["Content-Security-Policy"]
    finally:
        page.stop()
    assert "connect-src 'self' http://127.0.0.1:8000 http://127.0.0.1:4566 ws://127.0.0.1:8001;" in csp
