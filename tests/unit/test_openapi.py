"""openapi.yaml says what CONTRACT.md, the code and the settings say.

Schemathesis (tests/api) checks the running server against the spec; these check, without a
server, that the spec's lists and limits are the program's own.
"""
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import pytest
import yaml
from openapi_spec_validator import validate

import app as application
from chalicelib.config import Settings
from chalicelib.domain import objectkeys, sniff
from chalicelib.domain.errors import InvalidRequest
from chalicelib.domain.idempotency import IDEMPOTENCY_KEY
from chalicelib.domain.jobs import Job, JobStatus, Placeholder, Rendition, Variant
from chalicelib.domain.renditions import RenditionFormat, RenditionName
from chalicelib.domain.vocabulary import ErrorCode
from chalicelib.http import methods, problems, request_body, views
from chalicelib.usecases import uploads as upload_use_cases
from chalicelib.usecases.results import Accepted, UploadForm, Urls

SPEC = yaml.safe_load((Path(__file__).resolve().parents[2] / "openapi.yaml").read_text())
METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}
DEFAULTS = Settings()


def operations():
    for path, item in SPEC["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield path, method, operation


def deref(node: dict) -> dict:
    """Follows a local $ref (#/components/...) to what it names."""
    while isinstance(node, dict) and "$ref" in node:
        target = SPEC
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def validator(schema_name: str):
    root = {"$ref": f"#/components/schemas/{schema_name}", "components": SPEC["components"]}
    return jsonschema.Draft202012Validator(root, format_checker=jsonschema.FormatChecker())


def test_the_spec_is_valid_openapi():
    validate(SPEC)


def test_the_spec_lists_exactly_the_error_codes_of_the_program_in_order():
    assert SPEC["components"]["schemas"]["ErrorCode"]["enum"] == [code.value for code in ErrorCode]


def test_the_spec_has_exactly_the_routes_and_methods_the_app_serves():
    served = {(path, method.lower()) for path in application.app.routes
              for method in methods.allowed_methods(application.app, path)}
    assert served == {(path, method) for path, method, _ in operations()}


def test_every_other_method_of_a_path_is_the_405_the_spec_describes():
    for path in application.app.routes:
        allowed = set(methods.allowed_methods(application.app, path))
        others = set(application.app.routes[path]) - allowed
        assert others == set(methods.OTHER_METHODS) - allowed
    response = SPEC["components"]["responses"]["MethodNotAllowed"]
    assert response["headers"]["Allow"]["$ref"].endswith("/Allow")


def test_statuses_are_the_job_statuses():
    assert SPEC["components"]["schemas"]["KnownStatus"]["enum"] == [s.value for s in JobStatus]


def test_every_problem_response_lists_codes_of_its_own_status():
    documented = set()
    for path, method, operation in operations():
        for status, response in operation["responses"].items():
            response = deref(response)
            content = response.get("content", {})
            if "application/problem+json" not in content:
                assert int(status) < 400, (method, path, status)
                continue
            codes = _codes(content["application/problem+json"]["schema"])
            assert codes, (method, path, status)
            for code in codes:
                assert problems.status_of(ErrorCode(code)) == int(status), (method, path, status, code)
            documented |= codes
    documented |= _codes(deref(SPEC["components"]["responses"]["MethodNotAllowed"])["content"]
                         ["application/problem+json"]["schema"])
    # Only ever a job's error, never an HTTP answer (chalicelib/http/problems.py).
    job_only = {ErrorCode.UPLOAD_MISSING, ErrorCode.PROCESSING_FAILED}
    assert documented == {code.value for code in ErrorCode} - job_only


def _codes(schema: dict) -> set[str]:
    for part in schema["allOf"]:
        code = part.get("properties", {}).get("code")
        if code:
            return set(code["enum"]) if "enum" in code else {code["const"]}
    return set()


@pytest.mark.parametrize("status,headers", [
    ("401", {"WWW-Authenticate"}), ("429", {"Retry-After"}), ("503", {"Retry-After"}),
])
def test_the_headers_a_problem_always_has_are_required_in_the_spec(status, headers):
    for path, method, operation in operations():
        response = deref(operation["responses"][status])
        for name in headers:
            assert deref(response["headers"][name])["required"] is True, (method, path, name)


def test_every_202_has_location_and_retry_after_and_may_say_it_replayed():
    for path, method, operation in operations():
        accepted = operation["responses"].get("202")
        if accepted:
            assert {"Location", "Retry-After", "Idempotent-Replayed"} <= set(accepted["headers"])
            assert {"GetJob", "CancelJob", "DeleteJob"} <= set(accepted["links"])


def test_the_limits_in_the_spec_are_the_default_settings():
    uploads = SPEC["paths"]["/api/v1/uploads"]["post"]["requestBody"]["content"]["application/json"]
    assert uploads["schema"]["properties"]["size"]["maximum"] == DEFAULTS.max_direct_upload_bytes
    images = SPEC["paths"]["/api/v1/images"]["post"]["requestBody"]["content"]
    file_part = images["multipart/form-data"]["schema"]["properties"]["file"]
    assert file_part["maxLength"] == DEFAULTS.max_upload_bytes
    assert SPEC["components"]["schemas"]["ImageBytes"]["maxLength"] == DEFAULTS.max_upload_bytes
    assert set(uploads["schema"]["properties"]["content_type"]["enum"]) == sniff.ALLOWED_TYPES
    key = next(p for p in SPEC["components"]["parameters"].values() if p["name"] == "Idempotency-Key")
    assert _same_language(key["schema"], IDEMPOTENCY_KEY)
    assert SPEC["components"]["schemas"]["JobId"]["pattern"] == f"^{objectkeys.JOB_ID.pattern}$"


def _same_language(schema: dict, compiled) -> bool:
    """The spec's string schema and the server's regex take the same keys."""
    check = jsonschema.Draft202012Validator(schema)
    return all(check.is_valid(s) == bool(compiled.fullmatch(s)) for s in KEY_SAMPLES)


KEY_SAMPLES = ["a", "a b", " a", "a ", "~" * 255, "~" * 256, "", "\t", "é", "a\x7f", "a\nb"]


@pytest.mark.parametrize("check", [request_body.idempotency_key, upload_use_cases.check_idempotency_key],
                         ids=["http", "use case"])
def test_the_api_and_the_use_case_take_the_keys_the_spec_takes(check):
    key = next(p for p in SPEC["components"]["parameters"].values() if p["name"] == "Idempotency-Key")
    spec = jsonschema.Draft202012Validator(key["schema"])
    for sample in KEY_SAMPLES:
        try:
            taken = check(sample) == sample
        except InvalidRequest:
            taken = False
        assert taken == spec.is_valid(sample), repr(sample)


def test_the_upload_route_takes_exactly_the_media_types_the_spec_lists():
    content = SPEC["paths"]["/api/v1/images"]["post"]["requestBody"]["content"]
    assert set(content) == set(request_body.BINARY_TYPES)
    part_types = content["multipart/form-data"]["encoding"]["file"]["contentType"]
    assert {t.strip() for t in part_types.split(",")} == sniff.ALLOWED_TYPES


def test_there_is_a_valid_example_body_for_every_job_status():
    examples = SPEC["paths"]["/api/v1/image-jobs/{job_id}"]["get"]["responses"]["200"]["content"][
        "application/json"]["examples"]
    job = validator("Job")
    seen = set()
    for example in examples.values():
        value = deref(example)["value"]
        job.validate(value)
        seen.add(value["status"])
    assert seen == {s.value for s in JobStatus}


NOW = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)
PLACEHOLDER = Placeholder("UQI;0M[VM|xv.m9[NHxbOrXSRjIo#S%2SNWA", "#8e6a60")


def a_job(status: JobStatus, **fields) -> Job:
    return Job(job_id="4b0e1c52-8f0a-4d7e-9a3c-2f6b1d9e8a70", owner="alice", status=status,
               created_at=NOW, updated_at=NOW, expires_at=NOW + timedelta(days=7),
               original_key="originals/4b0e1c52-8f0a-4d7e-9a3c-2f6b1d9e8a70", **fields)


@pytest.mark.parametrize("job,urls", [
    (a_job(JobStatus.AWAITING_UPLOAD), None),
    (a_job(JobStatus.QUEUED), None),
    (a_job(JobStatus.PROCESSING), None),
    (a_job(JobStatus.READY, finished_at=NOW, placeholder=PLACEHOLDER, renditions={
        RenditionName.DISPLAY: Rendition("k/d.jpg", 1280, 960), RenditionName.THUMB: Rendition("k/t.jpg", 256, 256)}),
     Urls({RenditionName.DISPLAY: "https://s3.example/d.jpg?X-Amz-Signature=1",
           RenditionName.THUMB: "https://s3.example/t.jpg?X-Amz-Signature=2"}, NOW)),
    (a_job(JobStatus.READY, finished_at=NOW, placeholder=PLACEHOLDER, formats=(RenditionFormat.AVIF,), renditions={
        RenditionName.DISPLAY: Rendition("k/d.jpg", 1280, 960, variants={RenditionFormat.AVIF: Variant("k/d.avif", 6000)}),
        RenditionName.THUMB: Rendition("k/t.jpg", 256, 256, variants={RenditionFormat.AVIF: Variant("k/t.avif", 900)})}),
     Urls({RenditionName.DISPLAY: "https://s3.example/d.jpg?X-Amz-Signature=1",
           RenditionName.THUMB: "https://s3.example/t.jpg?X-Amz-Signature=2"}, NOW,
          {(RenditionName.DISPLAY, RenditionFormat.AVIF): "https://s3.example/d.avif?X-Amz-Signature=3",
           (RenditionName.THUMB, RenditionFormat.AVIF): "https://s3.example/t.avif?X-Amz-Signature=4"})),
    # Made ready before placeholders existed: still a valid ready job until it expires.
    (a_job(JobStatus.READY, finished_at=NOW, renditions={
        RenditionName.DISPLAY: Rendition("k/d.jpg", 1280, 960), RenditionName.THUMB: Rendition("k/t.jpg", 256, 256)}),
     Urls({RenditionName.DISPLAY: "https://s3.example/d.jpg?X-Amz-Signature=1",
           RenditionName.THUMB: "https://s3.example/t.jpg?X-Amz-Signature=2"}, NOW)),
    (a_job(JobStatus.FAILED, finished_at=NOW, error_code=ErrorCode.IMAGE_TOO_COMPLEX), None),
    (a_job(JobStatus.CANCELLED, finished_at=NOW), None),
])
def test_what_the_server_writes_for_each_status_is_what_the_spec_says(job, urls):
    validator("Job").validate(views.job_body(job, urls))


def test_what_the_server_writes_on_202_is_what_the_spec_says():
    form = UploadForm("http://127.0.0.1:4566/image-jobs", {"key": "originals/x", "policy": "p"}, NOW)
    validator("Accepted").validate(views.accepted_body(Accepted(a_job(JobStatus.QUEUED))))
    awaiting = Accepted(a_job(JobStatus.AWAITING_UPLOAD), upload=form)
    validator("DirectUpload").validate(views.accepted_body(awaiting))
    validator("DirectUpload").validate(views.accepted_body(Accepted(a_job(JobStatus.READY), replayed=True)))


def test_every_job_error_code_is_a_problem_with_a_safe_message():
    for code in SPEC["components"]["schemas"]["JobErrorCode"]["enum"]:
        assert problems.message_of(ErrorCode(code))


def test_problems_validate_against_the_spec_with_and_without_instance():
    problem = validator("Problem")
    for code in ErrorCode:
        problem.validate(problems.problem(code))
    instance = "urn:uuid:5a3e2c1d-0b9f-4e8d-a7c6-b5a4f3e2d1c0"
    problem.validate(problems.problem(ErrorCode.INTERNAL_ERROR, instance=instance))


def uploads_request_validator():
    schema = SPEC["paths"]["/api/v1/uploads"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return jsonschema.Draft202012Validator({**schema, "components": SPEC["components"]})


@pytest.mark.parametrize("body, valid", [
    ({"content_type": "image/jpeg", "size": 1000}, True),
    ({"content_type": "image/jpeg", "size": 1000, "method": "PUT", "sha256": "A" * 43 + "="}, True),
    ({"content_type": "image/jpeg", "size": Settings().multipart_min_bytes, "method": "multipart"}, True),
    ({"content_type": "image/jpeg", "size": Settings().multipart_min_bytes - 1, "method": "multipart"}, False),
    ({"content_type": "image/jpeg", "size": 1000, "sha256": "A" * 43 + "="}, False),
    ({"content_type": "image/jpeg", "size": 1000, "method": "POST", "sha256": "A" * 43 + "="}, False),
    ({"content_type": "image/jpeg", "size": 20 * 2**20, "method": "multipart", "sha256": "A" * 43 + "="}, False),
])
def test_the_uploads_request_schema_states_the_rules_between_its_members(body, valid):
    """What the server refuses with 400 although each member alone is valid (its default
    MULTIPART_MIN_BYTES), the schema refuses too: fuzzers and generated clients know it."""
    assert uploads_request_validator().is_valid(body) is valid


def test_statuses_are_open_and_a_pushed_job_is_the_job():
    later = {"job_id": "9d2f7a31-5c4e-4b8a-8e1f-0a6b3c5d7e92", "status": "quarantined", "novel": 1}
    validator("Job").validate(later)
    validator("Status").validate("quarantined")
    assert SPEC["components"]["schemas"]["PushMessage"]["properties"]["job"]["$ref"] == "#/components/schemas/Job"
    with pytest.raises(jsonschema.ValidationError):
        validator("Job").validate({**later, "status": "ready"})  # a known status keeps its shape
