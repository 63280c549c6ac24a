"""The JavaScript package (clients/js): its type check, its unit tests (node's test runner),
its end-to-end tests against the embedded stack through HTTP and the push port, and the
tarball `npm pack` makes, used alone by a program that uploads 20 MB by multipart, is killed
half-way, resumes, watches over the socket and takes the variant it supports.

`make test` installs the package's node_modules first (`make js-install`); they are missing
only when pytest is run by hand before it: then these fail, loudly."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from chalicelib.http.auth import SERVICE_SCOPE, mint_token
from tests.e2e.test_images_api import SECRET
from tests.e2e.test_upload_methods import padded_jpeg
from tests.images import jpeg, photo
from tests.local_runner import free_port, local_runner

from chalicelib.config import MIB

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "js"
# What a user of the package needs, and nothing else (no sources, tests or maps).
PACKED = {"package.json", "README.md", "LICENSE"}


@pytest.fixture(scope="module", autouse=True)
def toolchain():
    """Node 20+ and npm, or every test here fails saying so: never a skip, in CI least of all."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"{' and '.join(missing)} not found: the JavaScript package needs Node.js 20+ and npm")
    major = int(subprocess.run(["node", "-p", "process.versions.node"], capture_output=True, text=True,
                               check=True).stdout.split(".")[0])
    if major < 20:
        pytest.fail(f"Node.js {major} found; the package needs 20 or later")


def npm(*args: str, cwd: Path = PACKAGE, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    if not (PACKAGE / "node_modules" / ".package-lock.json").exists():
        pytest.fail("clients/js/node_modules is missing: run `make js-install` (make test does)")
    return subprocess.run(["npm", *args], cwd=cwd, env=env, timeout=timeout, capture_output=True, text=True)


def node(*args: str, cwd: Path = PACKAGE, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["node", *args], cwd=cwd, env=env, timeout=timeout, capture_output=True, text=True)


def ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, f"{done.args}: {done.stdout[-6000:]}\n{done.stderr[-6000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def built():
    ok(npm("run", "build"))
    return PACKAGE / "dist"


def test_the_package_and_its_spec_check_type_check():
    ok(npm("run", "typecheck"))


# `npm pack` runs the package's prepack script, a whole build (two tsc runs, about 8 CPU-s).
# Where a test packs what the `built` fixture has just built, it packs without building again:
# the README's command in a fresh clone (below) is the one that checks prepack's build.
NO_PREPACK = {**os.environ, "npm_config_ignore_scripts": "true"}


def test_the_exports_pass_publint_and_are_the_types_wrong(built):
    # `attw --pack` runs `npm pack`, which inherits the setting: it packs the built dist.
    # (npm runs a script named to `npm run` whatever ignore-scripts says: only hooks are skipped.)
    ok(npm("run", "lint:package", env=NO_PREPACK))


def test_it_bundles_for_browsers_and_react_native_with_no_node_built_in(built):
    """esbuild's neutral platform resolves no Node built-in: one imported would fail it."""
    sizes = json.loads(ok(node("test/size.mjs")).strip().splitlines()[-1])
    assert sizes["gzipped"] > 0


def test_unit_tests(built):
    ok(node("--test", "test/unit/"))


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """A runner whose push URL is a port the node tests cut (their own proxy to PUSH_PORT)."""
    push_port, proxy_port = free_port(), free_port()
    with local_runner(PUSH_PORT=str(push_port), PUSH_MANAGEMENT_PORT=str(free_port()),
                      PUSH_URL=f"ws://127.0.0.1:{proxy_port}") as runner:
        yield runner, push_port, proxy_port


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    work = tmp_path_factory.mktemp("js-sdk")
    made = {"PHOTO": photo(), "SMALL_JPEG": jpeg(320, 240), "PUT_FILE": padded_jpeg(5 * MIB),
            "BIG_FILE": padded_jpeg(20 * MIB)}
    paths = {}
    for name, data in made.items():
        path = work / f"{name.lower()}.bin"
        path.write_bytes(data)
        paths[name] = str(path)
    return work, paths


def environment(stack, files) -> dict:
    runner, push_port, proxy_port = stack
    work, paths = files
    token = mint_token(f"js-{time.time_ns()}", SECRET, 3600, int(time.time()))
    service = mint_token("js-backend", SECRET, 3600, int(time.time()), scope=SERVICE_SCOPE)
    return {**os.environ, **paths, "WORK_DIR": str(work), "IMAGE_JOBS_URL": runner.api,
            "IMAGE_JOBS_TOKEN": token, "IMAGE_JOBS_SERVICE_TOKEN": service,
            "PUSH_PORT": str(push_port), "PUSH_PROXY_PORT": str(proxy_port)}


def test_end_to_end_against_the_stack(built, stack, files):
    ok(node("--test", "--test-concurrency=1", "--test-timeout=240000", "test/e2e/", env=environment(stack, files)))


@pytest.fixture(scope="module")
def tarball(built, tmp_path_factory):
    out = tmp_path_factory.mktemp("pack")
    listing = json.loads(ok(npm("pack", "--json", "--pack-destination", str(out), env=NO_PREPACK)))
    return out / listing[0]["filename"]


def test_the_tarball_holds_only_what_a_user_needs(tarball):
    with tarfile.open(tarball) as archive:
        names = {name.removeprefix("package/") for name in archive.getnames()}
    extra = {n for n in names if n not in PACKED and not (n.startswith("dist/") and (n.endswith(".js") or n.endswith(".d.ts")))}
    assert not extra, extra
    assert {"dist/index.js", "dist/index.d.ts", "package.json"} <= names
    assert not any("test" in n or n.startswith("src/") or n.endswith(".map") for n in names)


def pack_commands() -> dict[str, str]:
    """The command each README gives for making the tarball, by README."""
    found = {}
    for readme in (PACKAGE.parents[1] / "README.md", PACKAGE / "README.md"):
        spans = [span for span in re.findall(r"`([^`\n]+)`", readme.read_text()) if "npm pack" in span]
        assert len(spans) == 1, f"{readme}: {spans}"
        found[str(readme)] = spans[0]
    return found


def test_the_readmes_pack_command_makes_the_tarball_in_a_fresh_clone(tmp_path):
    """A fresh clone has no node_modules: the command must install what builds the package
    (tsc) itself. It runs from the repository's root, in a copy of what git tracks."""
    commands = set(pack_commands().values())
    assert len(commands) == 1, commands
    root = PACKAGE.parents[1]
    tracked = subprocess.run(["git", "ls-files", "-z", "clients/js"], cwd=root, capture_output=True,
                             check=True).stdout.decode().split("\0")
    clone = tmp_path / "clone"
    for name in filter(None, tracked):
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, clone / name)
    assert not (clone / "clients" / "js" / "node_modules").exists()
    # The registry's packages come from npm's cache once `make js-install` has run.
    env = {**os.environ, "npm_config_prefer_offline": "true", "npm_config_audit": "false",
           "npm_config_fund": "false"}
    ok(subprocess.run(["sh", "-c", commands.pop()], cwd=clone, env=env, timeout=600, capture_output=True, text=True))
    (tarball,) = (clone / "clients" / "js").glob("*.tgz")
    with tarfile.open(tarball) as archive:
        assert "package/dist/index.js" in archive.getnames()


def test_a_program_using_only_the_tarball_resumes_a_killed_20_mb_multipart_upload(tarball, stack, files, tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    (app / "package.json").write_text(json.dumps({"name": "app", "private": True, "type": "module"}))
    # The registry's packages come from npm's cache once `make js-install` has run.
    ok(npm("install", "--prefer-offline", "--no-audit", "--no-fund", str(tarball), "ws@8", cwd=app))
    shutil.copy(PACKAGE / "test" / "tarball-app.mjs", app / "main.mjs")
    env = environment(stack, files)
    # The stack's push URL is the port the node tests cut: forward it for this program.
    forward = subprocess.Popen(["node", "-e", "import('./test/e2e/helpers.mjs').then((h) => h.cuttableProxy("
                                f"{env['PUSH_PROXY_PORT']}, {env['PUSH_PORT']}))"], cwd=PACKAGE, env=env)
    try:
        run_the_app(app, env)
    finally:
        forward.terminate()
        forward.wait(10)


def run_the_app(app: Path, env: dict) -> None:
    first = node("main.mjs", "kill-half-way", cwd=app, env=env)
    assert first.returncode == -9, (first.stdout, first.stderr)
    second = ok(node("main.mjs", "resume", cwd=app, env=env))
    result = json.loads(second.strip().splitlines()[-1])
    assert result["status"] == "ready" and result["method"] == "multipart"
    assert 0 < result["resent"] < 20 * MIB, result
    assert result["variant"] in ("image/webp", "image/jpeg") and result["fetched"] == 200
    assert result["connects"] >= 1


def test_a_prepared_upload_saved_by_one_sdk_is_finished_by_the_other(built, stack, files, tmp_path):
    """Python prepares (a backend), the JavaScript package renews from Python's saved JSON (an
    app), a plain client sends what it wrote back, and Python completes from that JSON: the two
    SDKs keep one saved shape."""
    from image_jobs import Client, PreparedUpload

    runner = stack[0]
    env = environment(stack, files)
    big = files[1]["BIG_FILE"]
    with Client(runner.api, env["IMAGE_JOBS_TOKEN"]) as backend:
        prepared = backend.prepare_upload(big, metadata={"from": "python"})
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(prepared.to_dict()))
    renewed = json.loads(ok(node("test/e2e/finish-prepared.mjs", "renew", str(saved), env=env)).strip().splitlines()[-1])
    assert renewed["parts"] == [r.part_number for r in prepared.requests]  # nothing stored yet: all
    sender = Path(__file__).resolve().parents[1] / "client" / "plain_sender.py"
    sent = subprocess.run([sys.executable, str(sender), str(saved), big],
                          input="go\n" * len(renewed["parts"]), capture_output=True, text=True, timeout=180)
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.count(" 200") == len(renewed["parts"]), sent.stdout
    with Client(runner.api, env["IMAGE_JOBS_TOKEN"]) as backend:
        job = PreparedUpload.from_dict(json.loads(saved.read_text()), backend).complete()
        assert job.wait(180).status == "ready" and job.metadata == {"from": "python"}
