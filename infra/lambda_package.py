"""Will this deployment package load on the Lambda runtime it targets?

    python -m infra.lambda_package out/deployment.zip --runtime python3.13

Chalice picks a wheel per dependency for the runtime's glibc, but when none fits it builds
the package from source on this machine without a word, and the result needs this
machine's glibc. This check opens every shared object in the package (ELF) and reports:
  - a symbol version (GLIBC_2.28, GLIBCXX_3.4.26, ...) newer than the runtime's libraries;
  - a needed library that is neither in the package (where its RPATH/RUNPATH, or Lambda's
    LD_LIBRARY_PATH, finds it) nor one of the runtime's own base libraries;
  - a Python extension built for another Python version, or another machine.
Exit status 1 and one line per problem, or 0.
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

GLIBC_LIBS = frozenset({
    "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libutil.so.1",
    "libresolv.so.2", "libcrypt.so.1", "libnsl.so.1", "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
})


@dataclass(frozen=True)
class Runtime:
    """What a Lambda runtime's image offers a package: base libraries and their versions.

    Only the libraries every manylinux wheel may assume (glibc, libgcc_s, libstdc++) and
    zlib, which Pillow's wheels take from the system; a package that needs anything else
    must carry it. Versions: glibc, GCC's runtime libraries and zlib of the image's OS."""

    os: str
    python: str  # the extension-module tag, as in _imaging.cpython-311-x86_64-linux-gnu.so
    # symbol-version prefix -> the newest version the runtime's libraries define
    newest: dict

    @property
    def libraries(self) -> frozenset[str]:
        return GLIBC_LIBS | {"libgcc_s.so.1", "libstdc++.so.6", "libz.so.1"}


# Amazon Linux 2: glibc 2.26, GCC 7.3 (libstdc++ GLIBCXX_3.4.24, CXXABI_1.3.11), zlib 1.2.7.
_AL2 = {"GLIBC": (2, 26), "GLIBCXX": (3, 4, 24), "CXXABI": (1, 3, 11), "GCC": (7, 0, 0),
        "ZLIB": (1, 2, 7)}
# Amazon Linux 2023: glibc 2.34, GCC 11 (GLIBCXX_3.4.29, CXXABI_1.3.13), zlib 1.2.11.
_AL2023 = {"GLIBC": (2, 34), "GLIBCXX": (3, 4, 29), "CXXABI": (1, 3, 13), "GCC": (11, 0, 0),
           "ZLIB": (1, 2, 11)}
RUNTIMES = {
    "python3.10": Runtime("Amazon Linux 2", "cpython-310", _AL2),
    "python3.11": Runtime("Amazon Linux 2", "cpython-311", _AL2),
    "python3.12": Runtime("Amazon Linux 2023", "cpython-312", _AL2023),
    "python3.13": Runtime("Amazon Linux 2023", "cpython-313", _AL2023),
    "python3.14": Runtime("Amazon Linux 2023", "cpython-314", _AL2023),
}
MACHINES = {"x86_64": "EM_X86_64", "arm64": "EM_AARCH64"}
# Lambda's LD_LIBRARY_PATH inside the package (/var/task and /var/task/lib).
TASK_LIBRARY_DIRS = (".", "lib")
_VERSION = re.compile(r"^([A-Z]+)_([0-9][0-9.]*)$")
_EXTENSION = re.compile(r"\.(cpython-\d+)-([a-z0-9_]+)-linux-gnu\.so$")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part)


def is_elf(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(4) == b"\x7fELF"


def shared_objects(root: Path) -> list[Path]:
    """Every ELF file that looks like a library or extension (name contains .so)."""
    return sorted(p for p in root.rglob("*") if p.is_file() and ".so" in p.name and is_elf(p))


@dataclass
class _Object:
    machine: str
    needed: list[str]
    rpath: list[Path]
    runpath: list[Path]
    versions: list[tuple[str, str]]


def check_tree(root: Path, runtime: str, architecture: str = "x86_64") -> list[str]:
    """Problems of every shared object under root (an unpacked package), one line each."""
    target = RUNTIMES[runtime]
    objects, problems = {}, []
    for path in shared_objects(root):
        try:
            objects[path] = _read(path)
        except ELFError as error:
            problems.append(f"{path.relative_to(root)}: unreadable ELF ({error})")
    for path, obj in objects.items():
        problems += [f"{path.relative_to(root)}: {p}"
                     for p in _file_problems(path, obj, target, architecture)]
    # Python dlopens the extension modules; the loader then finds what they need.
    seen: set[Path] = set()
    for path in objects:
        if _is_extension(path):
            problems += _load(path, (), objects, root, target, seen)
    return problems


def _is_extension(path: Path) -> bool:
    return path.name.endswith(".so") and not path.parent.name.endswith(".libs")


def _file_problems(path: Path, obj: _Object, runtime: Runtime, architecture: str) -> list[str]:
    problems = []
    match = _EXTENSION.search(path.name)
    if match and match.group(1) != runtime.python:
        problems.append(f"a {match.group(1)} extension; the runtime is {runtime.python}")
    if obj.machine != MACHINES[architecture]:
        problems.append(f"built for {obj.machine}, not {architecture}")
    for library, version in obj.versions:
        match = _VERSION.match(version)
        if not match or match.group(1) not in runtime.newest:
            continue  # a version of a library in the package (LIBTIFF_4.0, XZ_5.2, ...)
        newest = runtime.newest[match.group(1)]
        if _version(match.group(2)) > newest:
            problems.append(f"needs {version} from {library}; {runtime.os} has up to "
                            f"{match.group(1)}_{'.'.join(map(str, newest))}")
    return problems


def _load(path: Path, loaders_rpath: tuple[Path, ...], objects: dict, root: Path,
          runtime: Runtime, seen: set) -> list[str]:
    """Resolve what `path` needs as glibc's loader does: its DT_RPATH and then its loaders'
    (only when it has no DT_RUNPATH), LD_LIBRARY_PATH, its DT_RUNPATH, the system."""
    if path in seen:
        return []
    seen.add(path)
    obj = objects[path]
    inherited = () if obj.runpath else (*obj.rpath, *loaders_rpath)
    search = [*inherited, *((root / d).resolve() for d in TASK_LIBRARY_DIRS), *obj.runpath]
    problems = []
    for library in obj.needed:
        if library in runtime.libraries:
            continue
        found = next((d / library for d in search if (d / library).is_file()), None)
        if found is None:
            problems.append(f"{path.relative_to(root)}: needs {library}, which is neither in "
                            f"the package nor in {runtime.os}'s base libraries")
        elif found.resolve() in objects:
            problems += _load(found.resolve(), inherited, objects, root, runtime, seen)
    return problems


def _read(path: Path) -> _Object:
    with open(path, "rb") as handle:
        elf = ELFFile(handle)
        obj = _Object(elf["e_machine"], [], [], [], [])
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        obj.needed.append(tag.needed)
                    elif tag.entry.d_tag == "DT_RPATH":
                        obj.rpath += _origin_paths(tag.rpath, path)
                    elif tag.entry.d_tag == "DT_RUNPATH":
                        obj.runpath += _origin_paths(tag.runpath, path)
            elif isinstance(section, GNUVerNeedSection):
                # .gnu.version_r: the versions this object needs (not those it defines).
                for verneed, auxiliaries in section.iter_versions():
                    obj.versions += [(verneed.name, aux.name) for aux in auxiliaries]
    return obj


def _origin_paths(value: str, path: Path) -> list[Path]:
    """Only $ORIGIN-relative entries can point into the package."""
    paths = []
    for entry in value.split(":"):
        for origin in ("${ORIGIN}", "$ORIGIN"):
            if entry.startswith(origin):
                paths.append(Path(str(path.parent) + entry[len(origin):]).resolve())
                break
    return paths


def check_zip(package: Path, runtime: str, architecture: str = "x86_64") -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(package) as archive:
            archive.extractall(tmp)
        return check_tree(Path(tmp), runtime, architecture)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("package", type=Path, help="deployment.zip from `chalice package`")
    parser.add_argument("--runtime", default="python3.13", choices=sorted(RUNTIMES))
    parser.add_argument("--architecture", default="x86_64", choices=sorted(MACHINES))
    args = parser.parse_args(argv)
    problems = check_zip(args.package, args.runtime, args.architecture)
    for line in problems:
        print(line)
    if not problems:
        print(f"every shared object in {args.package} loads on {args.runtime} ({args.architecture})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
