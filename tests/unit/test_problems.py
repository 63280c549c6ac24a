import re
from pathlib import Path

import pytest

from chalicelib.domain.vocabulary import ErrorCode
from chalicelib.http import problems

# The shared contract sits beside a checkout in this project's workspace, not in a clone.
CONTRACT = Path(__file__).resolve().parents[3] / "shared" / "CONTRACT.md"


def test_every_error_code_has_a_problem_with_an_error_status():
    assert set(problems.PROBLEMS) == set(ErrorCode)
    assert all(400 <= status < 600 for status, _ in problems.PROBLEMS.values())


@pytest.mark.skipif(not CONTRACT.exists(), reason="no shared CONTRACT.md beside this checkout")
def test_the_codes_are_the_stable_codes_of_the_shared_contract():
    section = CONTRACT.read_text().split("## Stable error codes", 1)[-1].split("\n## ", 1)[0]
    first_paragraph = section.strip().split("\n- ", 1)[0]
    codes = set(re.findall(r"`([a-z_]+)`", first_paragraph))
    assert codes, "CONTRACT.md's stable codes could not be read"
    assert codes == {code.value for code in ErrorCode}


def test_problem_body_has_exactly_the_rfc9457_fields_and_the_code():
    body = problems.problem(ErrorCode.FILE_TOO_LARGE, "The file is larger than 10 bytes")
    assert set(body) == {"type", "title", "status", "detail", "code"}
    assert body["status"] == 413 and body["code"] == "file_too_large"
    assert body["detail"] == "The file is larger than 10 bytes"


def test_detail_defaults_to_the_title():
    body = problems.problem(ErrorCode.JOB_NOT_FOUND)
    assert body["detail"] == body["title"] and body["status"] == 404
