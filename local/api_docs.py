"""The API reference, rendered from openapi.yaml by Swagger UI, served by the local runner.

    http://127.0.0.1:8000/api/v1/docs

Swagger UI comes from the swagger-ui-py package (its files and page template, no CDN: the
page works offline). Not deployed: the reference is the repository's openapi.yaml, and the
cloud serves only the API.
"""
from __future__ import annotations

import json
import mimetypes
from pathlib import Path
from typing import Optional
from urllib.parse import urlsplit

import yaml
from swagger_ui.core import ApplicationDocument

from chalicelib.domain.vocabulary import PUBLIC_PREFIX

SPEC_PATH = Path(__file__).resolve().parent.parent / "openapi.yaml"
PREFIX = f"{PUBLIC_PREFIX}/docs"
SPEC_URL = "/openapi.json"


def _document() -> ApplicationDocument:
    # The app is only used to pick a web framework's handlers, which we do not use.
    return ApplicationDocument(None, config_rel_url=SPEC_URL, url_prefix=PREFIX,
                               title="image-jobs API reference")


def serves(method: str, path: str) -> bool:
    target = urlsplit(path).path
    return method in ("GET", "HEAD") and (target == PREFIX or target.startswith(PREFIX + "/"))


def respond(path: str, host: str) -> Optional[tuple[int, dict, bytes]]:
    """(status, headers, body) for a GET under PREFIX; None when there is no such page."""
    target = urlsplit(path).path[len(PREFIX):]
    if target in ("", "/"):
        return _ok("text/html; charset=utf-8", _document().doc_html.encode())
    if target == SPEC_URL:
        return _ok("application/json", json.dumps(served_spec(host)).encode())
    static = Path(_document().static_dir)
    name = target.removeprefix("/static/")
    if target.startswith("/static/") and name in {p.name for p in static.iterdir() if p.is_file()}:
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        return _ok(kind, (static / name).read_bytes())
    return None


def served_spec(host: str) -> dict:
    """openapi.yaml, with this server first, so that "Try it out" calls the server at hand."""
    spec = yaml.safe_load(SPEC_PATH.read_text())
    spec["servers"] = [{"url": f"http://{host}", "description": "this server"},
                       *spec.get("servers", [])]
    return spec


def _ok(kind: str, body: bytes) -> tuple[int, dict, bytes]:
    return 200, {"Content-Type": kind, "Cache-Control": "no-cache"}, body
