import re
from pathlib import Path

from chalicelib import problems

CONTRACT = Path(__file__).resolve().parents[3] / "shared" / "CONTRACT.md"


def test_every_stable_code_of_the_contract_has_a_problem():
    text = CONTRACT.read_text() if CONTRACT.exists() else ""
    section = text.split("## Stable error codes", 1)[-1].split("##", 1)[0]
    codes = set(re.findall(r"`([a-z_]+)`", section))
    assert codes, "CONTRACT.md's stable codes could not be read"
    assert codes == set(problems.PROBLEMS)


def test_problem_body_has_exactly_the_rfc9457_fields_and_the_code():
    body = problems.problem("file_too_large", "The file is larger than 10 bytes")
    assert set(body) == {"type", "title", "status", "detail", "code"}
    assert body["status"] == 413 and body["code"] == "file_too_large"
    assert body["detail"] == "The file is larger than 10 bytes"


def test_detail_defaults_to_the_title():
    body = problems.problem("job_not_found")
    assert body["detail"] == body["title"] and body["status"] == 404
