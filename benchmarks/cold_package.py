"""The cold start of the deployment package itself, as Lambda runs it: with and without the
bytecode that infra/bytecode.py adds.

    python benchmarks/cold_package.py [--cold 7]

It builds the package with `chalice package` (stage dev) from a copy of this checkout, then
unpacks it twice: as Chalice built it (sources only), and after `infra.bytecode`. Each run is
a fresh `python -s -B` of the runtime's base interpreter (3.13, under the deploy venv) (its standard library compiled, as on the
Lambda runtime) with only the unpacked package on its path and bytecode writes off (Lambda's
/var/task is read-only). The run imports `app`, builds the use cases and serves one GET of a
ready job through app.app() against moto's server, as benchmarks/api.py's cold start does
(AUTH_MODE=cognito, as on Lambda). Runs alternate between the two packages.

Target (issue 11): cold start <= 250 ms. It is a report: the exit status is 0 either way.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Optional

import api
import stack

ROOT = stack.THIS_ROOT
sys.path.insert(0, str(ROOT))
from tests.deploy.conftest import DEPLOY_PYTHON, OUTPUTS_FILE, copy_project  # noqa: E402  (as the deploy tests package it)


def build(work: Path, built: Optional[Path] = None, compiled_zip: Optional[Path] = None) -> tuple[Path, Path]:
    """The package unpacked twice: as Chalice makes it (or `built`, a deployment.zip it made
    already), and with bytecode (or `compiled_zip`, that package after infra.bytecode)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "AWS_DEFAULT_REGION": "us-east-1"}
    if built is None:
        project = copy_project(work / "project")
        subprocess.run([sys.executable, "-m", "infra.stage_config", "dev", "--outputs", str(OUTPUTS_FILE),
                        "--project-dir", str(project)], cwd=ROOT, env=env, check=True, capture_output=True)
        chalice = DEPLOY_PYTHON.with_name("chalice")  # the runtime's Python packages (Makefile)
        subprocess.run([str(chalice), "package", "--stage", "dev", str(work / "out")], cwd=project, env=env,
                       check=True, capture_output=True)
        built = work / "out" / "deployment.zip"
    plain, compiled = work / "plain", work / "compiled"
    with zipfile.ZipFile(built) as archive:
        archive.extractall(plain)
    if compiled_zip is None:
        compiled_zip = work / "compiled.zip"
        shutil.copy2(built, compiled_zip)
        subprocess.run([str(DEPLOY_PYTHON), "-m", "infra.bytecode", "--zip", str(compiled_zip)],
                       cwd=ROOT, env=env, check=True, capture_output=True)
    with zipfile.ZipFile(compiled_zip) as archive:
        archive.extractall(compiled)
    return plain, compiled


def cold(base: str, package: Path, runner: stack.Runner, token: str, job_id: str) -> list:
    env = {**os.environ, **stack.AWS_ENV, "AUTH_MODE": "cognito", "COGNITO_USER_POOL_ARN": api.COGNITO_POOL,
           "COGNITO_APP_CLIENT_IDS": api.COGNITO_CLIENT,
           "LOCAL_RUNNER": "", "PYTHONPATH": str(package), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([base, "-s", "-B", str(api.SCRIPT), "--child", str(package), "cold",
                           runner.aws_url, token, job_id, "bench"],
                          cwd=package, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])["marks"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cold", type=int, default=7, help="fresh processes per package")
    parser.add_argument("--zip", type=Path, help="a deployment.zip `chalice package` made (default: make one)")
    parser.add_argument("--compiled", type=Path,
                        help="that zip after infra.bytecode (with --zip; default: compile it here)")
    args = parser.parse_args()
    # The runtime's interpreter (python3.13): the one under the deploy venv that packaged it.
    base = subprocess.run([str(DEPLOY_PYTHON), "-c", "import os, sys; print(os.path.realpath(sys._base_executable))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="cold-package-") as tmp:
        work = Path(tmp)
        plain, compiled = build(work, args.zip, args.compiled)
        image = work / "12mp.jpg"
        api.make_image(image)
        with stack.Runner(ROOT, "api", {"AUTH_MODE": "jwt", **api.UNLIMITED}) as runner:
            token = api.mint(ROOT)
            ready = stack.run_child(api.SCRIPT, ROOT, [
                "driver", runner.api_url, runner.aws_url, token, str(image), "2",
                str(runner.pid_of("chalice_local")), str(runner.pid_of("moto_server"))],
                {"LOCAL_RUNNER": "1", **api.UNLIMITED})
            cases = {"as Chalice builds it (sources only)": plain, "with infra.bytecode's .pyc": compiled}
            runs = {label: [] for label in cases}
            for i in range(args.cold):
                for label, package in (list(cases.items()) if i % 2 == 0 else list(cases.items())[::-1]):
                    runs[label].append(cold(base, package, runner, token, ready["job_id"]))
    print(f"cold start of the deployment package (AUTH_MODE=cognito), {args.cold} fresh processes each, "
          f"alternating; median wall ms, cumulative; {Path(base).name} -s -B")
    head = f"{'package':<38} {'import app':>10} {'build':>7} {'first GET':>10}"
    print(head)
    print("-" * len(head))
    totals = {}
    for label, marks in runs.items():
        steps = [stack.median([m[i][1] for m in marks]) for i in range(3)]
        totals[label] = steps[-1]
        print(f"{label:<38} {steps[0]:>10.0f} {steps[1]:>7.0f} {steps[2]:>10.0f}")
    plain_ms, compiled_ms = totals.values()
    print(f"\nbytecode in the package: {plain_ms / compiled_ms:.2f}x faster to the first answer")
    print(("target met" if compiled_ms <= 250 else "TARGET MISSED") +
          f": cold start of the package with bytecode {compiled_ms:.0f} ms (<= 250 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
