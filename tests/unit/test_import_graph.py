"""No import circles among the project's modules: a reader can read each module knowing only
those below it. Every import counts, a function's and a TYPE_CHECKING block's too: a circle
through them still makes the reader hold several files at once."""
import ast
import graphlib
from pathlib import Path
from typing import Dict, List, Optional, Set


ROOT = Path(__file__).resolve().parents[2]
# Sources (a folder or a file) -> the folder their import names start from.
SOURCES = {"app.py": ROOT, "chalicelib": ROOT, "infra": ROOT, "local": ROOT,
           "clients/python/src/image_jobs": ROOT / "clients/python/src"}


def _modules() -> Dict[str, Path]:
    found = {}
    for source, base in SOURCES.items():
        top = ROOT / source
        for path in sorted(top.rglob("*.py")) if top.is_dir() else [top]:
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _resolve(name: str, known: Set[str]) -> Optional[str]:
    """The project module `name` is, or is inside (a class imported from a module)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path, known: Set[str]) -> Set[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: List[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from a import b`: module a.b if there is one, else a name inside a.
            names = [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            target = _resolve(name, known)
            if target is not None and target != module:
                out.add(target)
    return out


def import_graph() -> Dict[str, Set[str]]:
    """Each project module and the project modules it imports."""
    modules = _modules()
    return {module: _imports(module, path, set(modules)) for module, path in modules.items()}


def circle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One import circle (its modules in order, the first repeated last), or None."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(reversed(exc.args[1]))
    return None


def test_the_graph_sees_the_imports_it_must():
    graph = import_graph()
    assert "image_jobs.job" in graph["image_jobs.client"]  # from .job import Job
    assert "image_jobs.errors" in graph["image_jobs.job"]  # from . import errors
    assert "chalicelib.config" in graph["infra.capacity"]  # from chalicelib.config import Settings
    assert "infra.capacity" in graph["infra.prices"]
    assert {"app", "local", "infra.capacity", "image_jobs", "chalicelib.usecases.waits"} <= set(graph)


def test_no_module_imports_itself_through_others():
    found = circle(import_graph())
    assert found is None, "an import circle: " + " -> ".join(found or [])


def test_a_circle_is_caught(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from b import x\n")
    b.write_text("def f():\n    from a import y\n")
    graph = {name: _imports(name, path, {"a", "b"}) for name, path in (("a", a), ("b", b))}
    assert graph == {"a": {"b"}, "b": {"a"}}
    assert set(circle(graph)) == {"a", "b"}
    assert circle({"a": {"b"}, "b": set()}) is None
