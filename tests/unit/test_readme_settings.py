"""The README's configuration table against chalicelib/config.py: every setting a reader may set
is named there, and a row with a number as its default shows the code's default."""
import dataclasses
import re
from pathlib import Path

from chalicelib.config import RunnerSettings, Settings, env_name

README = Path(__file__).resolve().parents[2] / "README.md"
# Not in the table (yet): set by Lambda or by the stack, or still to be documented. A name
# leaves this set when its row is written; a new setting never joins it.
UNDOCUMENTED = {
    "LOCAL_RUNNER", "AWS_LAMBDA_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "COGNITO_USER_POOL_ARN",
    "ROUTE_PREFIX", "SWEEP_THREADS", "SWEEP_BUDGET_SECONDS", "WORKER_MAX_CONCURRENCY",
    "PUSH_URL", "PUSH_MANAGEMENT_URL", "PUSH_STREAM_ARN", "PUSH_CONNECTION_SECONDS", "PUSH_PORT",
    "PUSH_MANAGEMENT_PORT",
}


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
