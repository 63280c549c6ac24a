"""The README's configuration table against chalicelib/config.py: every setting a reader may set
is named there, and a row with a number as its default shows the code's default."""
import dataclasses
import re
from pathlib import Path

from chalicelib.config import RunnerSettings, Settings, env_name

README = Path(__file__).resolve().parents[2] / "README.md"
# Not in the table: set by Lambda or by the runner for itself, never by a reader. A new
# setting never joins this set.
UNDOCUMENTED = {"LOCAL_RUNNER", "AWS_LAMBDA_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"}


def table() -> str:
    text = README.read_text()
    return text.split("## Configuration", 1)[1].split("\n## ", 1)[0]


def fields():
    return {env_name(f.name): f for cls in (Settings, RunnerSettings) for f in dataclasses.fields(cls)}


def test_every_setting_is_in_the_readme_table():
    named = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", table()))
    missing = sorted(set(fields()) - named - UNDOCUMENTED)
    assert missing == [], f"add a row to the README's configuration table for {missing}"


def test_a_row_with_a_number_shows_the_code_default():
    rows = re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \| (\d+) \|", table(), re.M)
    by_name = fields()
    assert {"MULTIPART_MIN_BYTES", "MULTIPART_PART_BYTES", "MULTIPART_UPLOAD_TTL_SECONDS"} <= {n for n, _ in rows}
    wrong = [(name, shown, by_name[name].default) for name, shown in rows if int(shown) != by_name[name].default]
    assert wrong == []
