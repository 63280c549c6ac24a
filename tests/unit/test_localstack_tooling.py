"""local/localstack.py without starting LocalStack: its root, its environment, its failures."""
from __future__ import annotations

import json
import os

import pytest

from local import localstack as tooling
from tests.scripted_http import ScriptedServer


@pytest.fixture
def installation(tmp_path):
    (tmp_path / "cache" / "lib").mkdir(parents=True)
    return tooling.Installation(tmp_path / "cache")


def test_a_root_links_the_shared_lib_and_the_projects_hook(tmp_path, installation):
    root = tmp_path / "root"
    tooling.prepare_root(root, installation)
    assert (root / "var/lib/localstack/lib").resolve() == installation.lib.resolve()
    ready = root / "etc/localstack/init/ready.d"
    assert ready.resolve() == tooling.READY_D and (ready / "image-jobs.py").exists()

    (root / "var/lib/localstack/state.json").write_text("{}")  # a previous run's state
    tooling.prepare_root(root, installation)
    assert not (root / "var/lib/localstack/state.json").exists()
    assert installation.lib.exists()  # emptying the root never follows the link


def test_a_folder_that_is_not_one_of_its_roots_is_never_emptied(tmp_path, installation):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("...")
    with pytest.raises(tooling.LocalStackError, match="not a LocalStack root of ours"):
        tooling.prepare_root(precious, installation)
    assert (precious / "thesis.tex").exists()


def test_the_environment_is_loopback_offline_and_keeps_the_callers_aws_settings_out(
        tmp_path, installation, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://elsewhere:1")
    monkeypatch.setenv("LOCALSTACK_AUTH_TOKEN", "secret")
    monkeypatch.setenv("JOBS_TABLE", "my-table")
    monkeypatch.delenv("DYNAMODB_REMOVE_EXPIRED_ITEMS", raising=False)
    env = tooling.environment(4599, tmp_path / "root", installation)
    assert env["GATEWAY_LISTEN"] == "127.0.0.1:4599" == env["LOCALSTACK_HOST"]
    assert env["IMAGE_JOBS_INIT_ENDPOINT"] == "http://127.0.0.1:4599"
    # CloudWatch: the sweeper's lost-event check reads the events queue's oldest message there.
    assert env["SERVICES"] == "s3,sqs,dynamodb,cloudwatch"
    assert env["SQS_CLOUDWATCH_METRICS_REPORT_INTERVAL"] == "60"
    assert (env["OVERRIDE_IN_DOCKER"], env["SKIP_SSL_CERT_DOWNLOAD"], env["LOCALSTACK_TELEMETRY_DISABLED"]) == ("0", "1", "1")
    assert env["FILESYSTEM_ROOT"] == str(tmp_path / "root")
    assert env["DYNAMODB_REMOVE_EXPIRED_ITEMS"] == "1" and env["S3_SKIP_SIGNATURE_VALIDATION"] == "0"
    assert "AWS_ENDPOINT_URL" not in env and "LOCALSTACK_AUTH_TOKEN" not in env
    assert env["JOBS_TABLE"] == "my-table"  # the hook provisions the names the app will use


def test_a_missing_python_313_fails_loudly(monkeypatch):
    monkeypatch.setenv("LOCALSTACK_PYTHON", "/nonexistent/python3.13")
    with pytest.raises(tooling.LocalStackError, match="no Python 3.13"):
        tooling.find_python()


def test_an_installed_cache_is_not_installed_again(tmp_path, monkeypatch):
    """The stamps decide: inputs unchanged, nothing is rebuilt (and nothing is downloaded)."""
    home = tmp_path / "cache"
    home.mkdir()
    java_home = tooling._ensure_jdk(print)
    stamps = {
        "venv": {"python": tooling.PYTHON_VERSION, "requirements": tooling._digest([tooling.REQUIREMENTS])},
        "lib": {"dynamodb_local": tooling.DYNAMODB_LOCAL_NPM, "java_home": str(java_home),
                "java_sources": tooling._digest(sorted(tooling.JAVA_SOURCES.glob("*.java")))},
    }
    for name, stamp in stamps.items():
        (home / f"{name}.installed.json").write_text(json.dumps(stamp))

    def refuse(*_args, **_kwargs):
        raise AssertionError("reinstalled")

    monkeypatch.setattr(tooling, "_install_venv", refuse)
    monkeypatch.setattr(tooling, "_install_lib", refuse)
    said = []
    assert tooling.install(home, say=said.append).home == home
    assert said == []

    stale = dict(stamps["lib"], java_sources="changed")
    (home / "lib.installed.json").write_text(json.dumps(stale))
    built = []
    monkeypatch.setattr(tooling, "_install_lib", lambda *args: built.append(args))
    tooling.install(home, say=said.append)
    assert len(built) == 1 and json.loads((home / "lib.installed.json").read_text()) == stamps["lib"]


def test_the_cache_follows_xdg_or_its_own_variable(monkeypatch, tmp_path):
    monkeypatch.delenv("LOCALSTACK_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert tooling.cache_home() == tmp_path / "image-jobs" / f"localstack-{tooling.VERSION}"
    monkeypatch.setenv("LOCALSTACK_CACHE", str(tmp_path / "mine"))
    assert tooling.cache_home() == tmp_path / "mine"
    assert os.path.isabs(tooling.cache_home())


def scripted_stages(*stages):
    """LocalStack's /_localstack/init/ready answering each stage in turn, then the last."""
    left = list(stages)

    def answer(path, _headers):
        assert path == "/_localstack/init/ready"
        return 200, left.pop(0) if len(left) > 1 else left[0]

    return answer


def script(state):
    return {"stage": "READY", "name": "image-jobs.py", "state": state}


def test_the_wait_on_init_lasts_until_the_ready_scripts_have_run():
    running = {"completed": False, "scripts": [script("RUNNING")]}
    done = {"completed": True, "scripts": [script("SUCCESSFUL")]}
    told = []
    with ScriptedServer(scripted_stages(running, running, done)) as localstack:
        stage = tooling.wait_for_init(localstack.url, timeout=10, on_waiting=told.append, interval=0.01)
    assert stage == done
    assert len(localstack.requests) == 3
    assert told == [f"LocalStack at {localstack.url} is still running its init scripts"]


def test_a_failed_init_script_is_reported_by_name():
    failed = {"completed": True, "scripts": [script("ERROR")]}
    with ScriptedServer(scripted_stages(failed)) as localstack:
        with pytest.raises(tooling.LocalStackError, match=r"init scripts failed: \['image-jobs.py'\]"):
            tooling.wait_for_init(localstack.url, timeout=10, interval=0.01)


def test_an_init_that_never_ends_times_out_saying_so():
    running = {"completed": False, "scripts": [script("RUNNING")]}
    with ScriptedServer(scripted_stages(running)) as localstack:
        with pytest.raises(tooling.LocalStackError, match="still running its init scripts after 0 s"):
            tooling.wait_for_init(localstack.url, timeout=0.2, interval=0.01)


def test_something_other_than_localstack_is_not_waited_for():
    """moto's server, DynamoDB Local, MinIO: a 4xx or a body that is not the init state."""
    for status, body in ((404, b"<Error/>"), (400, {"__type": "MissingAuthenticationToken"}),
                         (200, b"not json")):
        with ScriptedServer(lambda *_: (status, body)) as other:
            assert tooling.wait_for_init(other.url, timeout=10, interval=0.01) is None
            assert len(other.requests) == 1


def test_nothing_listening_yet_is_waited_for_until_the_timeout():
    told = []
    with pytest.raises(tooling.LocalStackError, match="nothing answers at http://127.0.0.1:9 "):
        tooling.wait_for_init("http://127.0.0.1:9", timeout=0.2, on_waiting=told.append, interval=0.01)
    assert len(told) == 1
