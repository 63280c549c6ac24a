"""Every place an error code must appear, read from the place itself; a code missing from any
fails here, named with the places it is missing from.

ErrorCode (chalicelib/domain/vocabulary.py) owns the codes, and its docstring lists these same
places; docs/architecture.md's checklist "Add an error code" walks through them. The SDK is
read from its source, not imported: the installed copy may be another checkout's.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Callable

import yaml

from chalicelib.domain.vocabulary import ErrorCode
from chalicelib.http import problems
from tests.markdown import backquoted, section, stable_codes

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "clients" / "python" / "src" / "image_jobs"


def problem_table() -> set[str]:
    return {code.value for code in problems.PROBLEMS}


def _spec() -> dict:
    return yaml.safe_load((ROOT / "openapi.yaml").read_text())


def openapi_enum() -> set[str]:
    return set(_spec()["components"]["schemas"]["ErrorCode"]["enum"])


def openapi_answers() -> set[str]:
    """The codes of the problem responses, and of a failed job's error (JobErrorCode): a code
    that is only ever a job's error has no response of its own."""
    components = _spec()["components"]
    found = set(components["schemas"]["JobErrorCode"]["enum"])
    for response in components["responses"].values():
        schema = response.get("content", {}).get("application/problem+json", {}).get("schema", {})
        for part in schema.get("allOf", []):
            code = part.get("properties", {}).get("code", {})
            found |= set(code.get("enum", [])) | ({code["const"]} if "const" in code else set())
    return found


def _sdk_classes() -> dict[str, str]:
    """code -> the SDK class that carries it (`code = "..."` in errors.py, listed in ERRORS_BY_CODE)."""
    tree = ast.parse((SDK / "errors.py").read_text())
    by_class = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for statement in node.body:
                if (isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant)
                        and [getattr(t, "id", None) for t in statement.targets] == ["code"]):
                    by_class[node.name] = statement.value.value
    registered = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "ERRORS_BY_CODE":
            registered = {name.id for name in ast.walk(node.value) if isinstance(name, ast.Name)}
    return {code: name for name, code in by_class.items() if name in registered}


def sdk_classes() -> set[str]:
    return set(_sdk_classes())


def sdk_exports() -> set[str]:
    tree = ast.parse((SDK / "__init__.py").read_text())
    exported = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
            exported = set(ast.literal_eval(node.value))
    return {code for code, name in _sdk_classes().items() if name in exported}


def api_guide() -> set[str]:
    return backquoted(section((ROOT / "docs" / "api-guide.md").read_text(), "Errors and what to do with them"))


def contract() -> set[str]:
    return stable_codes((ROOT / "docs" / "contract.md").read_text())


# The same places, in the same order, as ErrorCode's docstring.
PLACES: dict[str, Callable[[], set[str]]] = {
    "chalicelib/http/problems.py PROBLEMS": problem_table,
    "openapi.yaml components/schemas/ErrorCode": openapi_enum,
    "openapi.yaml components/responses (or JobErrorCode)": openapi_answers,
    "clients/python errors.py ERRORS_BY_CODE": sdk_classes,
    "clients/python __init__.py __all__": sdk_exports,
    "docs/api-guide.md \"Errors and what to do with them\"": api_guide,
    "docs/contract.md \"Stable error codes\"": contract,
}


def missing_places(codes, places) -> dict[str, list[str]]:
    found = {place: read() for place, read in places.items()}
    missing = {code: [place for place in places if code not in found[place]] for code in codes}
    return {code: where for code, where in missing.items() if where}


def test_every_error_code_is_in_every_place():
    assert missing_places([code.value for code in ErrorCode], PLACES) == {}


def test_a_missing_code_is_named_with_the_places_it_is_missing_from():
    places = {"here": lambda: {"a", "b"}, "there": lambda: {"a"}}
    assert missing_places(["a", "b", "c"], places) == {"b": ["there"], "c": ["here", "there"]}


def test_every_place_is_read():
    """A reader that finds nothing would make the first test pass for any code."""
    assert all(read() for read in PLACES.values())


def test_error_codes_docstring_lists_the_places():
    doc = ErrorCode.__doc__
    for place in PLACES:
        assert place.split(" ", 1)[0] in doc, place
