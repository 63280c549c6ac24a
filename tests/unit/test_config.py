import ast
import dataclasses
from pathlib import Path

import pytest

from chalicelib.config import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_follow_the_contract():
    s = Settings.from_environ({"LOCAL_RUNNER": "1"})
    assert s.max_upload_bytes == 4 * 1024 * 1024
    assert s.max_direct_upload_bytes == 50 * 1024 * 1024
    assert s.max_pixels == 50_000_000
    assert s.retention_seconds == 7 * 24 * 3600
    assert s.lease_seconds == 120 and s.max_attempts == 3
    assert s.jwt_secret == "dev-secret-change-me"


def test_environment_overrides_with_aws_names():
    s = Settings.from_environ({
        "AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:4566",
        "IMAGES_BUCKET": "b", "JOBS_TABLE": "t", "EVENTS_QUEUE": "q",
        "AUTH_JWT_SECRET": "x", "MAX_UPLOAD_BYTES": "100", "LEASE_SECONDS": "65",
    })
    assert (s.region, s.endpoint_url, s.bucket, s.table, s.events_queue_name) == (
        "eu-west-1", "http://127.0.0.1:4566", "b", "t", "q")
    assert s.jwt_secret == "x" and s.max_upload_bytes == 100 and s.lease_seconds == 65
    assert s.presign_endpoint_url == "http://127.0.0.1:4566"


# -- fail closed: each refusal names the variable and says why ---------------------------------
SECRET = {"AUTH_JWT_SECRET": "a-secret-of-this-deployment-only-0123456789"}


@pytest.mark.parametrize("mode", ["Cognito", "cognito ", "COGNITO", "none", "jwt\n"])
def test_an_unknown_auth_mode_refuses_to_start(mode):
    with pytest.raises(ValueError, match="AUTH_MODE must be one of jwt, cognito exactly"):
        Settings.from_environ({**SECRET, "AUTH_MODE": mode, "COGNITO_USER_POOL_ARN": "arn:x"})


@pytest.mark.parametrize("shape", ["MinIO", "rgw", "aws", " ceph"])
def test_an_unknown_amqp_event_shape_refuses_to_start(shape):
    with pytest.raises(ValueError, match="AMQP_EVENT_SHAPE must be one of minio, ceph"):
        Settings.from_environ({**SECRET, "AMQP_EVENT_SHAPE": shape})


def test_the_default_secret_refuses_to_start_outside_the_local_runner():
    with pytest.raises(ValueError, match="AUTH_JWT_SECRET is the public default"):
        Settings.from_environ({})
    with pytest.raises(ValueError, match="AUTH_JWT_SECRET is the public default"):
        Settings.from_environ({"AUTH_JWT_SECRET": "dev-secret-change-me", "AUTH_MODE": "jwt"})
    # A stage that lacks AUTH_MODE gets jwt, hence the same refusal (no open API by omission).
    with pytest.raises(ValueError, match="AUTH_JWT_SECRET"):
        Settings.from_environ({"AWS_LAMBDA_FUNCTION_NAME": "image-jobs-dev"})


def test_the_default_secret_serves_the_local_runner_only():
    assert Settings.from_environ({"LOCAL_RUNNER": "1"}).jwt_secret == "dev-secret-change-me"
    assert Settings.from_environ(SECRET).jwt_secret == SECRET["AUTH_JWT_SECRET"]
    # Cognito checks tokens at the gateway: the app's secret is never used there.
    Settings.from_environ({"AUTH_MODE": "cognito", "COGNITO_USER_POOL_ARN": "arn:x", "COGNITO_APP_CLIENT_IDS": "c"})


def test_the_runner_marker_is_refused_inside_lambda():
    with pytest.raises(ValueError, match="LOCAL_RUNNER is set in a Lambda function"):
        Settings.from_environ({"LOCAL_RUNNER": "1", "AWS_LAMBDA_FUNCTION_NAME": "image-jobs-dev"})


@pytest.mark.parametrize("lease, timeout", [(60, 60), (30, 60), (120, 300)])
def test_a_lease_not_longer_than_the_workers_timeout_refuses_to_start(lease, timeout):
    with pytest.raises(ValueError, match="LEASE_SECONDS .* must be longer than WORKER_TIMEOUT_SECONDS"):
        Settings.from_environ({**SECRET, "LEASE_SECONDS": str(lease), "WORKER_TIMEOUT_SECONDS": str(timeout)})
    Settings.from_environ({**SECRET, "LEASE_SECONDS": str(timeout + 1), "WORKER_TIMEOUT_SECONDS": str(timeout)})


@pytest.mark.parametrize("retention_days, lifecycle_days", [(9, 9), (8.5, 9), (30, 9), (7, 7)])
def test_retention_beyond_the_bucket_lifecycle_refuses_to_start(retention_days, lifecycle_days):
    env = {**SECRET, "RETENTION_SECONDS": str(int(retention_days * 86400)),
           "BUCKET_LIFECYCLE_DAYS": str(lifecycle_days)}
    with pytest.raises(ValueError, match="RETENTION_SECONDS .* lifecycle"):
        Settings.from_environ(env)


def test_retention_a_day_inside_the_lifecycle_starts():
    Settings.from_environ({**SECRET, "RETENTION_SECONDS": str(8 * 86400), "BUCKET_LIFECYCLE_DAYS": "9"})


@pytest.mark.parametrize("env, named", [
    ({"ORPHAN_SCAN_BUDGET_SECONDS": "900"}, "ORPHAN_SCAN_BUDGET_SECONDS"),
    # A hex digit's turn would come back while its last run may still be scanning it.
    ({"ORPHAN_SCAN_INTERVAL_SECONDS": "56"}, "ORPHAN_SCAN_INTERVAL_SECONDS"),
])
def test_orphan_scan_runs_that_could_overrun_refuse_to_start(env, named):
    with pytest.raises(ValueError, match=named):
        Settings.from_environ({**SECRET, **env})
    Settings.from_environ({**SECRET, "ORPHAN_SCAN_INTERVAL_SECONDS": "57"})  # 16 x 57 s > 900 s


@pytest.mark.parametrize("value", ["ten", "0", "-3"])
def test_bad_numbers_are_refused_with_the_variables_name(value):
    with pytest.raises(ValueError, match="MAX_PIXELS"):
        Settings.from_environ({"MAX_PIXELS": value})


def test_the_runner_reads_its_own_settings_from_the_same_place():
    from local.settings import RunnerSettings

    r = RunnerSettings.from_environ({"API_PORT": "9000", "EMBEDDED_AWS": "0",
                                     "LOCAL_COMPONENTS": "api,worker", "AMQP_BRIDGE": "1",
                                     "STOP_SECONDS": "90"})
    assert (r.api_port, r.aws_port, r.embedded_aws, r.amqp_bridge) == (9000, 4566, False, True)
    assert (r.stop_seconds, RunnerSettings.from_environ({}).stop_seconds) == (90, 15)
    assert r.components == {"api", "worker"}
    assert RunnerSettings.from_environ({}).amqp_bridge is None


@pytest.mark.parametrize("env", [{"LOCAL_COMPONENTS": "api,bogus"}, {"EMBEDDED_AWS": "yes"},
                                 {"API_PORT": "http"}, {"STORAGE": "minio"}, {"RGW_PORT": "0"},
                                 {"STOP_SECONDS": "0"}, {"STOP_SECONDS": "soon"}])
def test_the_runner_refuses_bad_settings_with_the_variable_named(env):
    from local.settings import RunnerSettings

    with pytest.raises(ValueError, match=next(iter(env))):
        RunnerSettings.from_environ(env)


def test_the_local_runner_refuses_to_start_on_a_bad_setting_before_serving_anything():
    """The issue's case: AUTH_MODE=Cognito used to serve with no check of the token at all."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT, free_port

    env = dict(os.environ, AUTH_MODE="Cognito", API_PORT=str(free_port()), AWS_PORT=str(free_port()))
    done = subprocess.run([sys.executable, "-m", "local"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "AUTH_MODE must be one of jwt, cognito exactly" in done.stderr
    assert "ready" not in done.stdout


def test_the_events_queue_keeps_its_old_names_as_aliases():
    """A stage deployed before the events queue had one name still carries JOBS_QUEUE/JOBS_DLQ."""
    base = {"AUTH_MODE": "cognito", "COGNITO_USER_POOL_ARN": "arn:aws:cognito-idp:us-east-1:1:userpool/p",
            "COGNITO_APP_CLIENT_IDS": "c"}
    old = Settings.from_environ({**base, "JOBS_QUEUE": "q-old", "JOBS_DLQ": "d-old"})
    assert old.events_queue_name == "q-old" and old.events_dead_letter_queue_name == "d-old"
    new = Settings.from_environ({**base, "EVENTS_QUEUE": "q", "JOBS_QUEUE": "q"})
    assert new.events_queue_name == "q" and new.events_dead_letter_queue_name == "q-dlq"
    with pytest.raises(ValueError, match="JOBS_QUEUE"):
        Settings.from_environ({**base, "EVENTS_QUEUE": "q", "JOBS_QUEUE": "other"})



def test_the_orphan_scan_keeps_its_orphan_sweep_names_as_aliases():
    """A stage or a shell set up before the scan had its own word still sets ORPHAN_SWEEP_*."""
    old = Settings.from_environ({**SECRET, "ORPHAN_SWEEP_INTERVAL_SECONDS": "120", "ORPHAN_SWEEP_THREADS": "3",
                                 "ORPHAN_SWEEP_BUDGET_SECONDS": "600", "ORPHAN_SWEEP_TIMEOUT_SECONDS": "700"})
    assert (old.orphan_scan_interval_seconds, old.orphan_scan_threads, old.orphan_scan_budget_seconds,
            old.orphan_scan_timeout_seconds) == (120, 3, 600, 700)
    with pytest.raises(ValueError, match="ORPHAN_SWEEP_THREADS"):
        Settings.from_environ({**SECRET, "ORPHAN_SCAN_THREADS": "2", "ORPHAN_SWEEP_THREADS": "4"})


def test_the_thumbnails_boxes_keep_their_size_names_as_aliases():
    """A stage or a shell set up before every rendition's setting was its box still sets THUMB_SIZE."""
    old = Settings.from_environ({**SECRET, "THUMB_SIZE": "200", "THUMB_512_SIZE": "400"})
    assert (old.thumb_box, old.thumb_512_box) == (200, 400)
    new = Settings.from_environ({**SECRET, "THUMB_BOX": "300", "THUMB_SIZE": "300"})
    assert new.thumb_box == 300
    with pytest.raises(ValueError, match="THUMB_512_SIZE"):
        Settings.from_environ({**SECRET, "THUMB_512_BOX": "512", "THUMB_512_SIZE": "500"})


def test_the_webhook_attempts_limit_keeps_its_timeout_name_as_an_alias():
    """A stage set up before the attempt's limit had its own word (timeout is the function's)
    still sets WEBHOOK_TIMEOUT_SECONDS."""
    assert Settings.from_environ({**SECRET, "WEBHOOK_TIMEOUT_SECONDS": "7"}).webhook_attempt_seconds == 7
    assert Settings.from_environ({**SECRET, "WEBHOOK_ATTEMPT_SECONDS": "8"}).webhook_attempt_seconds == 8
    with pytest.raises(ValueError, match="WEBHOOK_TIMEOUT_SECONDS"):
        Settings.from_environ({**SECRET, "WEBHOOK_ATTEMPT_SECONDS": "8", "WEBHOOK_TIMEOUT_SECONDS": "5"})


def test_every_setting_is_declared_once():
    """A second declaration silently wins over the first, with its own default and comment."""
    import ast
    from collections import Counter
    from pathlib import Path

    import chalicelib.config

    tree = ast.parse(Path(chalicelib.config.__file__).read_text())
    twice = {node.name: [name for name, n in Counter(
                 field.target.id for field in node.body if isinstance(field, ast.AnnAssign)).items() if n > 1]
             for node in tree.body if isinstance(node, ast.ClassDef)}
    assert {name: fields for name, fields in twice.items() if fields} == {}


def test_a_decode_ceiling_that_does_not_fit_the_worker_function_refuses_to_start():
    from chalicelib.config import WORKER_OWN_MB

    tight = Settings.from_environ({**SECRET, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"})
    with pytest.raises(ValueError, match="DECODE_MEMORY_MB .* do not fit the function's memory"):
        tight.check_decode_memory()
    fits = str(512 + WORKER_OWN_MB)
    Settings.from_environ({**SECRET, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": fits}).check_decode_memory()
    Settings.from_environ({**SECRET, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512",
                           "DECODE_MEMORY_MB": "200"}).check_decode_memory()
    Settings.from_environ(SECRET).check_decode_memory()  # not in Lambda: nothing to fit


def test_the_worker_refuses_to_start_with_a_ceiling_over_its_function():
    from chalicelib.usecases.worker import Worker
    from tests.fakes import FakeJobStore, FakeObjectStore, fake_context

    settings = Settings.from_environ({**SECRET, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"})
    with pytest.raises(ValueError, match="DECODE_MEMORY_MB"):
        Worker(fake_context(settings=settings, jobs=FakeJobStore(), objects=FakeObjectStore()))


def test_the_local_runner_decodes_no_more_images_at_once_than_its_memory_holds():
    from local.__main__ import worker_concurrency

    settings = Settings.from_environ(SECRET)  # DECODE_MEMORY_MB 512
    mib = 1024 * 1024
    assert worker_concurrency(8, settings, 2048 * mib) == 4
    assert worker_concurrency(2, settings, 2048 * mib) == 2
    assert worker_concurrency(8, settings, 100 * mib) == 1
    assert worker_concurrency(8, settings, None) == 8


def test_the_lease_and_the_sweep_budgets_follow_their_timeouts_unless_set():
    s = Settings.from_environ({**SECRET, "WORKER_TIMEOUT_SECONDS": "100", "SWEEP_TIMEOUT_SECONDS": "80",
                               "ORPHAN_SCAN_TIMEOUT_SECONDS": "600"})
    assert (s.lease_seconds, s.sweep_budget_seconds, s.orphan_scan_budget_seconds) == (160, 70, 540)
    s = Settings.from_environ({**SECRET, "LEASE_SECONDS": "300", "SWEEP_BUDGET_SECONDS": "20",
                               "ORPHAN_SCAN_BUDGET_SECONDS": "500"})
    assert (s.lease_seconds, s.sweep_budget_seconds, s.orphan_scan_budget_seconds) == (300, 20, 500)


def test_a_timeout_that_leaves_no_budget_refuses_to_start():
    with pytest.raises(ValueError, match="SWEEP_BUDGET_SECONDS"):
        Settings.from_environ({**SECRET, "SWEEP_TIMEOUT_SECONDS": "10"})


def test_every_setting_of_the_service_is_read_by_the_service_or_its_deploy():
    """Settings holds what the deployed code (chalicelib/, app.py) or the deploy (infra/) reads;
    a setting only the local runner reads belongs to local/settings.py's RunnerSettings."""
    sources = [*(ROOT / "chalicelib").rglob("*.py"), ROOT / "app.py", *(ROOT / "infra").rglob("*.py")]
    read = {node.attr for path in sources for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute)}
    unread = [f.name for f in dataclasses.fields(Settings) if f.name not in read]
    assert unread == [], f"{unread}: read by no deployed code; if only local/ reads it, move it to RunnerSettings"


def test_only_the_worker_function_prepares_its_worker_at_init():
    """app.py builds the worker (and starts its decoding child) in the init of the worker's
    Lambda function, named <app>-<stage>-handle_object_created by Chalice; no other."""
    assert Settings(lambda_function_name="image-jobs-prod-handle_object_created").runs_worker_function
    for name in (None, "image-jobs-prod", "image-jobs-prod-sweep", "image-jobs-dev-deliver_webhook"):
        assert not Settings(lambda_function_name=name).runs_worker_function
