"""The deployment proofs that need no AWS: a stage written from recorded stack outputs, and
the package `chalice package` builds from it, built once per test session."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
# What `aws cloudformation describe-stacks` returns for a deployed infra/template.yaml
# (stack image-jobs-dev, account 123456789012); test_template checks it names every output.
OUTPUTS_FILE = HERE / "stack-outputs.json"
# What `chalice deploy` records of the stage's first deploy (.chalice/deployed/dev.json): the
# WebSocket API it created, whose id the second pass of `make deploy` writes into the stage.
CHALICE_DEPLOYED_FILE = HERE / "chalice-deployed-dev.json"
STAGE = "dev"
REGION = "us-east-1"
# The functions of a cloud stage: their keys in lambda_functions of .chalice/config.json.
FUNCTIONS = {"api_handler", "handle_object_created", "sweep", "sweep_orphans", "deliver_webhook",
             "push_job_changes", "websocket_connect", "websocket_disconnect"}
# What Chalice deploys: app.py, chalicelib/ and requirements.txt, with .chalice/config.json.
DEPLOYED = ("app.py", "chalicelib", "requirements.txt")
# The Python `make deploy` packages with (the Makefile's DEPLOY_VENV, which `make test`
# builds): Chalice names the Lambda runtime after it, and infra.bytecode compiles for it.
DEPLOY_PYTHON = ROOT / ".venv-deploy" / "bin" / "python"
# The package's runtime and its bytecode's tag, as the deploy Python gives them.
RUNTIME, CACHE_TAG = "python3.13", "cpython-313"


def deploy_python() -> str:
    if not DEPLOY_PYTHON.exists():
        pytest.fail(f"no {DEPLOY_PYTHON}: `make .venv-deploy/.installed` makes it (Python 3.13 and Chalice)")
    return str(DEPLOY_PYTHON)


@dataclass(frozen=True)
class Packaged:
    project: Path  # the copy of the project the stage was written into
    sam: dict  # the SAM template `chalice package` wrote
    zip_path: Path  # as `chalice package` made it
    deployed_zip: Path  # after infra.bytecode, as `make deploy` uploads it
    unpacked: Path  # deployed_zip's files
    seconds: float  # how long `chalice package` took
    bytecode_report: str  # what infra.bytecode printed

    @property
    def stage_config(self) -> dict:
        return json.loads((self.project / ".chalice" / "config.json").read_text())["stages"][STAGE]

    @property
    def policy(self) -> dict:
        name = self.stage_config["iam_policy_file"]
        return json.loads((self.project / ".chalice" / name).read_text())


@pytest.fixture(scope="session")
def outputs() -> dict[str, str]:
    from infra.stage_config import read_outputs_file

    return read_outputs_file(OUTPUTS_FILE)


def copy_project(target: Path) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    for name in DEPLOYED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, target / name)
    (target / ".chalice").mkdir()
    shutil.copy2(ROOT / ".chalice" / "config.json", target / ".chalice" / "config.json")
    return target


@pytest.fixture(scope="session")
def packaged(tmp_path_factory) -> Packaged:
    """`python -m infra.stage_config` then `chalice package`, as docs/deploy.md runs them,
    for the stage as its second pass leaves it (the WebSocket API deployed, its URL known).

    Chalice downloads the Lambda wheels from PyPI: without it this fails, loudly, rather
    than skip, since a package that cannot be built cannot be deployed either."""
    project = copy_project(tmp_path_factory.mktemp("project") / "image-jobs")
    (project / ".chalice" / "deployed").mkdir()
    shutil.copy2(CHALICE_DEPLOYED_FILE, project / ".chalice" / "deployed" / f"{STAGE}.json")
    env = {**os.environ, "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION}
    subprocess.run([sys.executable, "-m", "infra.stage_config", STAGE, "--outputs", str(OUTPUTS_FILE),
                    "--project-dir", str(project)], cwd=ROOT, env=env, check=True)
    out = project / "out"
    command = [str(Path(deploy_python()).with_name("chalice"))]
    started = time.monotonic()
    result = subprocess.run(command + ["package", "--stage", STAGE, str(out)], cwd=project,
                            env=env, capture_output=True, text=True, timeout=270)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        pytest.fail(f"chalice package failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    zip_path = out / "deployment.zip"
    # What `make deploy` uploads: bytecode added, unused botocore models and numpy's tests
    # dropped, by its own step: infra.bytecode on the package Chalice cached for the tree
    # (zip_path stays Chalice's copy from before). Once, here: compiling the package is most
    # of the step's CPU, and test_make_deploys_bytecode_step checks what it left.
    bytecode = subprocess.run([deploy_python(), "-m", "infra.bytecode", str(project)], cwd=ROOT,
                              env={**env, "PYTHONDONTWRITEBYTECODE": "1"}, check=True, capture_output=True,
                              text=True)
    from infra.bytecode import cached_package

    deployed_zip = out / "deployed.zip"
    shutil.copy2(cached_package(project, RUNTIME), deployed_zip)
    unpacked = project / "unpacked"
    with zipfile.ZipFile(deployed_zip) as archive:
        archive.extractall(unpacked)
    sam = json.loads((out / "sam.json").read_text())
    return Packaged(project, sam, zip_path, deployed_zip, unpacked, seconds, bytecode.stdout)
