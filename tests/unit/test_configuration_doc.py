"""docs/configuration.md's settings table against chalicelib/config.py: every setting a reader may
set is named there, and a row with a number as its default shows the code's default. The
README's table of limits and lifetimes shows the code's defaults too."""
import dataclasses
import re
from pathlib import Path

from chalicelib.config import Settings, env_name
from local.settings import RunnerSettings
from tests.markdown import section

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = ROOT / "docs" / "configuration.md"
# Not in the table: set by Lambda or by the runner for itself, never by a reader. A new
# setting never joins this set.
UNDOCUMENTED = {"LOCAL_RUNNER", "AWS_LAMBDA_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"}


def table() -> str:
    return section(CONFIGURATION.read_text(), "Settings")


def fields():
    return {env_name(f.name): f for cls in (Settings, RunnerSettings) for f in dataclasses.fields(cls)}


def test_every_setting_is_in_the_configuration_table():
    named = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", table()))
    missing = sorted(set(fields()) - named - UNDOCUMENTED)
    assert missing == [], f"add a row to docs/configuration.md's settings table for {missing}"


def test_a_row_with_a_number_shows_the_code_default():
    rows = re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \| (\d+) \|", table(), re.M)
    by_name = fields()
    assert {"MULTIPART_MIN_BYTES", "MULTIPART_PART_BYTES", "MULTIPART_UPLOAD_TTL_SECONDS"} <= {n for n, _ in rows}
    wrong = [(name, shown, by_name[name].default) for name, shown in rows if int(shown) != by_name[name].default]
    assert wrong == []


def test_the_readme_has_no_settings_table_of_its_own():
    """One place for the settings: a README row would drift from this one."""
    readme = (ROOT / "README.md").read_text()
    assert "| variable | default |" not in readme


UNITS = {"MiB": 1024 * 1024, "MP": 1_000_000, "days": 86400, "h": 3600, "min": 60, "": 1}


def readme_limits() -> list[tuple[str, int]]:
    """(setting, value in the code's unit) for each row of the README's limits table:
    `| what | 4 MiB | `MAX_UPLOAD_BYTES` | ...`."""
    rows = re.findall(r"^\| [^|]+ \| ([\d.]+) ?(MiB|MP|days|h|min|) \| `([A-Z][A-Z0-9_]+)` \|",
                      section((ROOT / "README.md").read_text(), "Limits and lifetimes"), re.M)
    return [(name, round(float(number) * UNITS[unit])) for number, unit, name in rows]


def test_the_readme_limits_show_the_code_defaults():
    shown = readme_limits()
    assert {"MAX_UPLOAD_BYTES", "MAX_DIRECT_UPLOAD_BYTES", "MAX_PIXELS", "MAX_ACTIVE_JOBS",
            "RETENTION_SECONDS", "URL_TTL_SECONDS", "UPLOAD_URL_TTL_SECONDS"} <= {n for n, _ in shown}
    by_name = fields()
    assert [(n, v, by_name[n].default) for n, v in shown if v != by_name[n].default] == []
