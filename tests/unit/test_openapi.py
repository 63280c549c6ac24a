"""openapi.yaml says what CONTRACT.md and the app say."""
from pathlib import Path

import yaml
from openapi_spec_validator import validate

import app as application
from chalicelib.vocabulary import ErrorCode

SPEC = yaml.safe_load((Path(__file__).resolve().parents[2] / "openapi.yaml").read_text())


def test_the_spec_is_valid_openapi():
    validate(SPEC)


def test_the_spec_lists_exactly_the_error_codes_of_the_program_in_order():
    assert SPEC["components"]["schemas"]["ErrorCode"]["enum"] == [code.value for code in ErrorCode]


def test_every_route_the_app_serves_is_in_the_spec():
    for path, methods in application.app.routes.items():
        assert path in SPEC["paths"], path
        for method in methods:
            assert method.lower() in SPEC["paths"][path], (method, path)


def test_statuses_are_the_job_statuses():
    from chalicelib.jobs import JobStatus

    assert SPEC["components"]["schemas"]["Status"]["enum"] == [s.value for s in JobStatus]
