"""Put compiled bytecode in the deployment package, for the Lambda cold start, and drop
what the functions never load (infra/prune.py: botocore's models of services never called,
numpy's tests), to keep it under Lambda's 50 MB for a direct upload.

    python -m infra.bytecode PROJECT_DIR     # after `chalice package`, before `chalice deploy`
    python -m infra.bytecode --zip FILE.zip  # one package, in place

Lambda unpacks a function's package read-only, so Python can't cache the bytecode it
compiles. Chalice's package holds sources only, so every cold start compiles every module it
imports: botocore, PynamoDB, urllib3 and ours. That is 537-576 ms to the first answer,
against 229-245 ms with the bytecode in the package (benchmarks/cold_package.py).

Every `.py` in the package gets its `__pycache__/<name>.<tag>.pyc`. The `.pyc` files are
checked-hash (PEP 552): Python uses one only if the source beside it still hashes the same,
and otherwise compiles the source as before. A `.pyc` can therefore never run code other
than its source, whatever the files' times in the zip. Any `__pycache__` the tree brought
along (the developer's own, for whatever Python) is dropped. The compiling Python must be
the runtime's version, or the runtime would ignore the files; this is checked.

`PROJECT_DIR` mode finds the package that Chalice caches for this tree under
`.chalice/deployments/`, named by a hash of requirements.txt, the app's files and vendor/.
`chalice deploy` reuses that package as it is, so run both Chalice commands with
PYTHONDONTWRITEBYTECODE=1: a `.pyc` written into chalicelib/ between them would change the
hash (`make deploy` does all of this).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import py_compile
import sys
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

from infra.prune import drops

RUNTIME = f"python{sys.version_info.major}.{sys.version_info.minor}"


def add_bytecode(package: Path, runtime: str = RUNTIME) -> int:
    """Rewrite the zip with a checked-hash .pyc beside every .py, without what infra.prune
    drops; returns how many .pyc were added. Sources that don't compile on this Python are left as they are (importing them
    would fail on the runtime anyway)."""
    if runtime != RUNTIME:
        raise SystemExit(f"{package.name} is for {runtime}; this is {RUNTIME}: run this with "
                         f"the runtime's Python, or its .pyc files would be ignored")
    added = 0
    with tempfile.TemporaryDirectory() as work:
        rewritten = Path(work) / "package.zip"
        with zipfile.ZipFile(package) as old, zipfile.ZipFile(rewritten, "w", zipfile.ZIP_DEFLATED) as new:
            for info in old.infolist():
                if "__pycache__/" in info.filename or drops(info.filename):
                    continue
                data = old.read(info)
                new.writestr(info, data)
                if info.filename.endswith(".py"):
                    compiled = _compile(info.filename, data, Path(work))
                    if compiled is not None:
                        entry = zipfile.ZipInfo(_cache_path(info.filename), date_time=info.date_time)
                        entry.external_attr = 0o644 << 16
                        entry.compress_type = zipfile.ZIP_DEFLATED
                        new.writestr(entry, compiled)
                        added += 1
        os.replace(rewritten, package)
    return added


def _cache_path(source: str) -> str:
    """Where the runtime looks: dir/__pycache__/name.cpython-311.pyc."""
    path = PurePosixPath(source)
    return str(path.parent / "__pycache__" / f"{path.stem}.{sys.implementation.cache_tag}.pyc")


def _compile(name: str, source: bytes, work: Path) -> bytes | None:
    src, out = work / "source.py", work / "compiled.pyc"
    src.write_bytes(source)
    try:
        py_compile.compile(str(src), cfile=str(out), dfile=name, doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    except py_compile.PyCompileError:
        return None
    return out.read_bytes()


def cached_package(project: Path, runtime: str = RUNTIME) -> Path:
    """The package Chalice has cached for this tree, as `chalice deploy` will look it up."""
    from chalice.deploy.packager import LambdaDeploymentPackager
    from chalice.utils import UI, OSUtils

    packager = LambdaDeploymentPackager(osutils=OSUtils(), dependency_builder=None, ui=UI())
    path = Path(packager.deployment_package_filename(str(project), runtime))
    if not path.exists():
        raise SystemExit(f"no package at {path}: run `chalice package` first (with "
                         "PYTHONDONTWRITEBYTECODE=1, as `make deploy` does)")
    return path


def is_current(pyc: bytes, source: bytes) -> bool:
    """Whether a checked-hash .pyc was made from exactly this source (PEP 552's header)."""
    flags = int.from_bytes(pyc[4:8], "little")
    return (pyc[:4] == importlib.util.MAGIC_NUMBER and flags == 0b11
            and pyc[8:16] == importlib.util.source_hash(source))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("project", nargs="?", type=Path, help="the project: its cached Chalice package")
    where.add_argument("--zip", type=Path, help="a deployment package, rewritten in place")
    parser.add_argument("--runtime", default=RUNTIME, help="the package's runtime (--zip; default %(default)s)")
    args = parser.parse_args()
    package = args.zip or cached_package(args.project.resolve())
    before = package.stat().st_size
    added = add_bytecode(package, args.runtime)
    print(f"{package}: {added} .pyc files added ({sys.implementation.cache_tag}, checked-hash); "
          f"{before / 1e6:.1f} MB -> {package.stat().st_size / 1e6:.1f} MB zipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
