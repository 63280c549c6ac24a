"""Facts the docs repeat from the code, read from both sides so that neither can drift alone:
the CORS headers of docs/web.md against app.py, the page's modules against web/js/, the answer
to rotating a webhook secret with none registered, the fields of an `/uploads` fingerprint in
openapi.yaml against the use case, the problem body's members wherever a doc lists them, and
text addressed to the implementer left in docs/contract.md."""
import base64
import hashlib
import re
from pathlib import Path

import pytest
import yaml

import app as application
from chalicelib.domain.errors import IdempotencyKeyReused
from chalicelib.domain.focus import Focus, FocusSource
from chalicelib.domain.vocabulary import ErrorCode
from chalicelib.http.problems import PROBLEMS
from tests.unit.test_sweeper_semantics import make_svc

ROOT = Path(__file__).resolve().parents[2]
WEB = (ROOT / "docs" / "web.md").read_text()
# Every doc a reader meets; docs/scale.md and the like quote no API facts of these kinds.
DOCS = [ROOT / "README.md", ROOT / "openapi.yaml", ROOT / "clients" / "python" / "README.md",
        *sorted((ROOT / "docs").glob("*.md"))]


def listed(text: str, label: str) -> set[str]:
    """The back-quoted names of the bullet that starts with `label`, up to the next bullet."""
    bullet = text.split(f"- {label}", 1)[1].split("\n  - ", 1)[0].split("\n\n", 1)[0]
    return set(re.findall(r"`([A-Za-z-]+)`", bullet))


def test_web_md_lists_the_cors_headers_app_py_allows_and_exposes():
    cors = application.app.api.cors
    assert listed(WEB, "allowed request headers:") == set(cors.allow_headers.split(","))
    assert listed(WEB, "exposed response headers:") == set(cors.get_access_control_headers()[
        "Access-Control-Expose-Headers"].split(","))


def test_web_md_names_every_module_of_the_page():
    modules = {f"web/js/{path.name}" for path in (ROOT / "web" / "js").glob("*.js")}
    table = set(re.findall(r"^\| `(web/js/[a-z_]+\.js)` \|", WEB, re.M))
    assert modules - table == set(), "docs/web.md's table of the page's files lacks these"


def test_the_docs_answer_rotating_with_no_webhook_as_the_code_does():
    code = ErrorCode.WEBHOOK_NOT_FOUND
    status = PROBLEMS[code][0]
    said = []
    for path in DOCS:
        # A sentence (or table cell, or spec line) about rotating with none registered.
        for sentence in re.split(r"(?<=[.;:])\s|\|", path.read_text()):
            flat = " ".join(sentence.split())
            if re.search(r"rotat", flat, re.I) and re.search(
                    r"none registered|without one|no webhook|with none", flat, re.I):
                said.append((path.name, flat))
    assert said, "no doc says what rotating with no webhook answers"
    wrong = [(name, s) for name, s in said if not re.search(rf"\b{status}\b.{{0,12}}{code.value}", s)]
    assert wrong == []
    assert not any(re.search(r"\b400\b", s) for _, s in said), said


def openapi():
    return yaml.safe_load((ROOT / "openapi.yaml").read_text())


def uploads_request_fields() -> set[str]:
    body = openapi()["paths"]["/api/v1/uploads"]["post"]["requestBody"]
    return set(body["content"]["application/json"]["schema"]["properties"])


# For each field of the /uploads body, a first request and one that differs in that field alone.
DIGEST_A = base64.b64encode(hashlib.sha256(b"a").digest()).decode()
DIGEST_B = base64.b64encode(hashlib.sha256(b"b").digest()).decode()
PUT = dict(content_type="image/jpeg", size=1000, method="PUT", sha256=DIGEST_A, formats=("webp",))
DIFFERENT = {
    "content_type": (PUT, dict(PUT, content_type="image/png")),
    "size": (PUT, dict(PUT, size=1001)),
    "method": (dict(content_type="image/jpeg", size=1000, method="PUT"),
               dict(content_type="image/jpeg", size=1000, method="POST")),
    "sha256": (PUT, dict(PUT, sha256=DIGEST_B)),
    "formats": (PUT, dict(PUT, formats=("avif",))),
    "renditions": (PUT, dict(PUT, renditions=("display", "thumb"))),  # the default makes thumb_512 too
    "metadata": (dict(PUT, metadata={"post": "1"}), dict(PUT, metadata={"post": "2"})),
    "focus": (dict(PUT, focus=Focus(0.5, 0.2, FocusSource.CLIENT)), dict(PUT, focus=Focus(0.5, 0.3, FocusSource.CLIENT))),
}


def fingerprinted() -> set[str]:
    """The fields of an /uploads request whose change alone makes a replay a 409."""
    svc = make_svc()
    found = set()
    for number, (field, (first, second)) in enumerate(DIFFERENT.items()):
        key = f"key-{number}"
        svc.direct_uploads.create_direct_upload("alice", idempotency_key=key, **first)
        try:
            svc.direct_uploads.create_direct_upload("alice", idempotency_key=key, **second)
        except IdempotencyKeyReused:
            found.add(field)
    return found


def test_every_field_of_an_uploads_request_is_tried():
    assert set(DIFFERENT) == uploads_request_fields()


def test_openapi_names_the_uploads_fingerprint_the_code_takes():
    fields = fingerprinted()
    assert fields == uploads_request_fields()  # every field counts, today
    spec = openapi()
    key = spec["components"]["parameters"]["IdempotencyKey"]["description"]
    of_uploads = key.split("on `/uploads`", 1)[1].split("Same key", 1)[0]
    assert fields - set(re.findall(r"`([a-z_0-9]+)`", of_uploads)) == set(), key
    replay = spec["paths"]["/api/v1/uploads"]["post"]["responses"]["202"]["description"]
    same = replay.split("same `Idempotency-Key`", 1)[1].split(")", 1)[0]
    assert fields - set(re.findall(r"`([a-z_0-9]+)`", same)) == set(), replay


MEMBERS = re.compile(r'\{"type",\s*"title",\s*"status",\s*"detail",\s*"code"([^}]*)\}')


def test_every_list_of_the_problem_members_has_instance():
    lists = [(path.name, m.group(0)) for path in DOCS for m in MEMBERS.finditer(path.read_text())]
    assert len(lists) >= 3  # the contract, the guide, the README
    assert [(name, found) for name, found in lists if '"instance"' not in found] == []


@pytest.mark.parametrize("phrase", ["say which", "you can justify", "do what a careful"])
def test_the_contract_states_decisions_not_requests_to_the_implementer(phrase):
    assert phrase not in (ROOT / "docs" / "contract.md").read_text().lower()
