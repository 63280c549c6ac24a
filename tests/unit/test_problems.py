from chalicelib.domain.vocabulary import ErrorCode
from chalicelib.http import problems


def test_every_error_code_has_a_problem_with_an_error_status():
    assert set(problems.PROBLEMS) == set(ErrorCode)
    assert all(400 <= status < 600 for status, _ in problems.PROBLEMS.values())


def test_problem_body_has_exactly_the_rfc9457_fields_and_the_code():
    body = problems.problem(ErrorCode.FILE_TOO_LARGE, "The file is larger than 10 bytes")
    assert set(body) == {"type", "title", "status", "detail", "code"}
    assert body["status"] == 413 and body["code"] == "file_too_large"
    assert body["detail"] == "The file is larger than 10 bytes"


def test_detail_defaults_to_the_title():
    body = problems.problem(ErrorCode.JOB_NOT_FOUND)
    assert body["detail"] == body["title"] and body["status"] == 404
