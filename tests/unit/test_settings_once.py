"""Each setting's default is stated once, in chalicelib/config.py: what is built from the
settings takes its defaults from Settings, and the capacity model reads Settings' defaults."""
import ast
from pathlib import Path

import pytest

from chalicelib.config import Settings
from chalicelib.imaging.limits import DecodeLimits
from chalicelib.imaging.render import Coding

ROOT = Path(__file__).resolve().parents[2]
# The capacity model's figures that are settings, by the setting.
CAPACITY_SETTINGS = {
    "SWEEP_TIMEOUT_S": "sweep_timeout_seconds",
    "SWEEP_THREADS": "sweep_threads",
    "SWEEP_BUDGET_S": "sweep_budget_seconds",
    "ORPHAN_SCAN_TIMEOUT_S": "orphan_scan_timeout_seconds",
    "ORPHAN_RUN_EVERY_S": "orphan_scan_interval_seconds",
    "ORPHAN_BUDGET_S": "orphan_scan_budget_seconds",
    "ORPHAN_PASS_S": "orphan_pass_seconds",
}


def is_literal(node: ast.AST) -> bool:
    """A number or string written out (4 * 1024 too), rather than read from somewhere."""
    return all(isinstance(n, (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop))
               for n in ast.walk(node))


def class_defaults(path: str, name: str) -> dict[str, ast.AST]:
    tree = ast.parse((ROOT / path).read_text())
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name).body
    return {n.target.id: n.value for n in body if isinstance(n, ast.AnnAssign) and n.value is not None}


def test_what_is_built_from_settings_defaults_to_the_default_settings():
    assert DecodeLimits() == DecodeLimits.of(Settings())
    assert Coding() == Coding.of(Settings())


@pytest.mark.parametrize("path, name", [("chalicelib/imaging/limits.py", "DecodeLimits"),
                                        ("chalicelib/imaging/render.py", "Coding"),
                                        ("chalicelib/adapters/amqp.py", "Topology")])
def test_no_class_restates_a_settings_default(path, name):
    restated = [field for field, value in class_defaults(path, name).items() if is_literal(value)]
    assert restated == [], f"{name} restates Settings' defaults of {restated}: read them from Settings"


def test_the_capacity_model_reads_the_settings_defaults():
    from infra import capacity

    tree = ast.parse((ROOT / "infra" / "capacity.py").read_text())
    assigned = {n.targets[0].id: n.value for n in tree.body
                if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)}
    assert [name for name in CAPACITY_SETTINGS if is_literal(assigned[name])] == []
    defaults = Settings()
    assert {name: getattr(capacity, name) for name in CAPACITY_SETTINGS} == {
        name: getattr(defaults, field) for name, field in CAPACITY_SETTINGS.items()}
