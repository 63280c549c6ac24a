"""What the local server answers before or around the app (local/gateway.py, local/api_docs.py):
problem+json for every refusal, and bodies it must not read left unread."""
import json
import re
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

import requests
import yaml

from tests.e2e.test_images_api import assert_problem, headers

JOB = "/api/v1/image-jobs/5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0"


def raw_exchange(api: str, request: bytes, timeout: float = 10) -> bytes:
    """Sends `request` as is and reads until the server closes or `timeout` passes."""
    where = urlsplit(api)
    with socket.create_connection((where.hostname, where.port), timeout=timeout) as sock:
        sock.sendall(request)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def split(response: bytes) -> tuple[int, dict, bytes]:
    head, _, body = response.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in fields.items()}, body


def test_methods_no_route_has_are_405_problems_with_allow(runner):
    for method, path, allow in (("TRACE", "/api/v1/uploads", "POST"), ("QUERY", JOB, "DELETE, GET"),
                                ("PUT", "/api/v1/images", "POST")):
        r = requests.request(method, runner.api + path, headers=headers(), timeout=10)
        assert_problem(r, 405, "method_not_allowed")
        assert r.headers["Allow"] == allow


def test_a_path_the_api_does_not_have_is_the_clouds_answer_as_a_problem(runner):
    assert_problem(requests.get(runner.api + "/api/v2/images", timeout=10), 400, "invalid_request")
    assert_problem(requests.request("TRACE", runner.api + "/", timeout=10), 400, "invalid_request")


def test_a_body_over_the_limit_is_refused_from_its_content_length_without_being_read(runner):
    request = (f"POST /api/v1/images HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\n"
               f"Content-Length: {10**10}\r\n\r\n").encode()
    started = time.monotonic()
    status, fields, body = split(raw_exchange(runner.api, request))
    # Answered and closed at once, though not one byte of the 10 GB came.
    assert time.monotonic() - started < 5
    assert status == 413 and fields["connection"] == "close"
    assert json.loads(body)["code"] == "file_too_large"


def test_chunked_and_malformed_lengths_are_400_problems(runner):
    for extra in ("Transfer-Encoding: chunked\r\n", "Content-Length: 12abc\r\n",
                  "Content-Length: 5\r\nContent-Length: 6\r\n"):
        request = f"POST /api/v1/uploads HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode()
        status, fields, body = split(raw_exchange(runner.api, request))
        assert status == 400 and fields["content-type"] == "application/problem+json", extra
        assert json.loads(body)["code"] == "invalid_request"


def test_a_request_http_server_cannot_parse_is_a_problem_not_an_html_page(runner):
    for request in (b"GET /api/v1/images HTTP/1.x\r\n\r\n",
                    b"GET /api/v1/images HTTP/1.1\r\nX-Long: " + b"a" * 70_000 + b"\r\n\r\n"):
        status, fields, body = split(raw_exchange(runner.api, request))
        assert status == 400 and fields["content-type"] == "application/problem+json"
        assert json.loads(body)["code"] == "invalid_request"


def test_a_head_answer_has_no_body_so_the_connection_stays_usable(runner):
    request = (f"HEAD {JOB} HTTP/1.1\r\nHost: x\r\n\r\n"
               f"GET {JOB} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").encode()
    answer = raw_exchange(runner.api, request)
    first, _, rest = answer.partition(b"\r\n\r\n")
    assert first.startswith(b"HTTP/1.1 405") and b"Allow: DELETE, GET" in first
    assert rest.startswith(b"HTTP/1.1 401"), rest[:200]  # the next answer, not a stray body


def test_deep_or_huge_json_is_400_not_a_retryable_503(runner):
    for body in (b"[" * 100_000 + b"]" * 100_000, b'{"size": 1, "x": "' + b"a" * 100_000 + b'"}'):
        r = requests.post(runner.api + "/api/v1/uploads", data=body, timeout=30,
                          headers=headers(**{"Content-Type": "application/json"}))
        assert_problem(r, 400, "invalid_request")


def test_a_subject_longer_than_any_key_allows_is_401_not_a_retryable_503(runner):
    r = requests.get(runner.api + JOB, headers=headers("s" * 3000), timeout=10)
    assert_problem(r, 401, "unauthorized")


def test_the_api_reference_is_served_offline_from_openapi_yaml(runner):
    page = requests.get(runner.api + "/api/v1/docs", timeout=10)
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert any(a.endswith("swagger-ui-bundle.js") for a in assets)
    for asset in assets:
        assert asset.startswith("/api/v1/docs/"), asset  # nothing from another host
        assert requests.get(runner.api + asset, timeout=10).status_code == 200, asset
    spec_url = re.search(r'url: "([^"]+)"', page.text).group(1)
    served = requests.get(runner.api + spec_url, timeout=10).json()
    ours = yaml.safe_load((Path(__file__).resolve().parents[2] / "openapi.yaml").read_text())
    assert served["servers"][0]["url"] == runner.api
    assert {**served, "servers": ours["servers"]} == ours
    assert_problem(requests.get(runner.api + "/api/v1/docs/static/../../app.py", timeout=10),
                   400, "invalid_request")
