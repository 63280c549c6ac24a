"""The package rules of chalicelib/ (docs/architecture.md): which group may import which.

Read from the source (every import statement, at module level or inside a function), so a
rule broken by a lazy import fails here too; and once from a fresh interpreter, for what the
worker's function really loads.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "chalicelib"

# group -> the chalicelib groups it may not import ("chalicelib.x" prefixes).
FORBIDDEN = {
    "domain": ("config", "bootstrap", "ports", "imaging", "http", "runtime", "usecases", "adapters"),
    "runtime": ("imaging", "http", "usecases", "adapters", "bootstrap"),
    "http": ("imaging", "adapters", "bootstrap"),
    "imaging": ("http", "usecases", "adapters", "bootstrap"),
    "usecases": ("http", "adapters", "bootstrap"),
    "adapters": ("http", "imaging", "usecases", "bootstrap"),
}


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("chalicelib")}


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def test_every_group_imports_only_what_it_may():
    broken = []
    for group, forbidden in FORBIDDEN.items():
        for path in sorted((LIB / group).rglob("*.py")):
            name = module_name(path)
            for imported in sorted(imports_of(path)):
                for other in forbidden:
                    prefix = f"chalicelib.{other}"
                    if within(imported, prefix):
                        broken.append(f"{name} imports {imported}")
    assert broken == []


def test_the_rule_reads_lazy_imports_too(tmp_path):
    """The reader must see an import inside a function: that is how a rule gets broken."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from chalicelib.imaging import render\n")
    assert "chalicelib.imaging.render" in imports_of(module)


def test_only_imaging_imports_pillow_or_libvips():
    importers = []
    for path in sorted(LIB.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if any(n == "PIL" or n.startswith(("PIL.", "pillow_heif", "pyvips")) for n in names):
                importers.append(module_name(path))
    assert importers and all(name.startswith("chalicelib.imaging.") for name in importers), importers


def test_the_worker_and_the_sweeper_load_nothing_of_the_http_edge():
    code = (
        "import json, sys\n"
        "import chalicelib.bootstrap, chalicelib.usecases.worker, chalicelib.usecases.sweeper\n"
        "import chalicelib.usecases.orphans, chalicelib.usecases.announce\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('chalicelib.http'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, check=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert json.loads(done.stdout) == []
