"""docs/configuration.md's settings table against chalicelib/config.py: every setting a reader may
set is named there, a row with a number as its default shows the code's default, and every row
says why an operator sets it. The README's table of limits and lifetimes shows the code's
defaults too."""
import dataclasses
import json
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
# How a row's last column says that no operator has a reason to set its variables.
NOT_FOR_OPERATORS = ("tests and benchmarks only:", "no operator need:")


def table() -> str:
    return section(CONFIGURATION.read_text(), "Settings")


def fields():
    return {env_name(f.name): f for cls in (Settings, RunnerSettings) for f in dataclasses.fields(cls)}


def rows() -> list[tuple[set[str], list[str]]]:
    """Each row of the table: the variables its first cell names, and its cells."""
    found = []
    for line in table().splitlines():
        if line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            found.append((set(re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0])), cells))
    return found


def set_by_the_cloud_stages() -> set[str]:
    """The variables a deployed stage carries: .chalice/config.json's own, and those
    infra/stage_config.py writes from the stack's outputs and the functions' timeouts."""
    from infra import stage_config

    config = json.loads((ROOT / ".chalice" / "config.json").read_text())
    names = {name for stage in config["stages"].values() for name in stage.get("environment_variables", {})}
    outputs = {key: "x" for key in (*stage_config.OUTPUT_SETTINGS, *stage_config.POLICY_OUTPUTS,
                                    "RenditionsDomain", "RenditionsKeyPairId", "RenditionsSigningKeyArn")}
    names |= set(stage_config.environment_for(outputs, {"lambda_timeout": 60}))
    return names | set(stage_config.push_endpoints("id", "us-east-1", "aws", "api"))


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


def test_every_row_says_why_an_operator_sets_it():
    assert "| variable | default | meaning | why an operator sets it |" in table()
    unexplained = [sorted(names) for names, cells in rows() if len(cells) != 4 or len(cells[3].split()) < 3]
    assert unexplained == [], ("say in docs/configuration.md's last column why an operator sets "
                               f"{unexplained}, or 'tests and benchmarks only: ...' and what for")


def test_no_variable_the_cloud_stages_set_is_marked_as_no_operators():
    marked = {name for names, cells in rows() if cells[-1].lower().startswith(NOT_FOR_OPERATORS) for name in names}
    cloud = set_by_the_cloud_stages()
    assert {"AUTH_MODE", "JOBS_TABLE", "WORKER_TIMEOUT_SECONDS", "PUSH_URL", "DELIVERY"} <= cloud
    assert marked and marked & cloud == set()


def test_the_runners_rows_and_only_they_say_runner_only():
    runner = {f.name.upper() for f in dataclasses.fields(RunnerSettings)}
    wrong = sorted(name for names, cells in rows() for name in names
                   if (name in runner) != ("runner only" in cells[2]))
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
