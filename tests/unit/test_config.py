import pytest

from chalicelib.config import Settings


def test_defaults_follow_the_contract():
    s = Settings.from_environ({})
    assert s.max_upload_bytes == 4 * 1024 * 1024
    assert s.max_direct_upload_bytes == 50 * 1024 * 1024
    assert s.max_pixels == 50_000_000
    assert s.retention_seconds == 7 * 24 * 3600
    assert s.lease_seconds == 120 and s.max_attempts == 3
    assert s.jwt_secret == "dev-secret-change-me"


def test_environment_overrides_with_aws_names():
    s = Settings.from_environ({
        "AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:4566",
        "IMAGES_BUCKET": "b", "JOBS_TABLE": "t", "JOBS_QUEUE": "q",
        "AUTH_JWT_SECRET": "x", "MAX_UPLOAD_BYTES": "100", "LEASE_SECONDS": "5",
    })
    assert (s.region, s.endpoint_url, s.bucket, s.table, s.queue_name) == (
        "eu-west-1", "http://127.0.0.1:4566", "b", "t", "q")
    assert s.jwt_secret == "x" and s.max_upload_bytes == 100 and s.lease_seconds == 5
    assert s.presign_endpoint_url == "http://127.0.0.1:4566"


@pytest.mark.parametrize("value", ["ten", "0", "-3"])
def test_bad_numbers_are_refused_with_the_variables_name(value):
    with pytest.raises(ValueError, match="MAX_PIXELS"):
        Settings.from_environ({"MAX_PIXELS": value})


def test_the_runner_reads_its_own_settings_from_the_same_place():
    from chalicelib.config import RunnerSettings

    r = RunnerSettings.from_environ({"API_PORT": "9000", "EMBEDDED_AWS": "0",
                                     "LOCAL_COMPONENTS": "api,worker", "AMQP_BRIDGE": "1"})
    assert (r.api_port, r.aws_port, r.embedded_aws, r.amqp_bridge) == (9000, 4566, False, True)
    assert r.components == {"api", "worker"}
    assert RunnerSettings.from_environ({}).amqp_bridge is None


@pytest.mark.parametrize("env", [{"LOCAL_COMPONENTS": "api,bogus"}, {"EMBEDDED_AWS": "yes"},
                                 {"API_PORT": "http"}])
def test_the_runner_refuses_bad_settings_with_the_variable_named(env):
    from chalicelib.config import RunnerSettings

    with pytest.raises(ValueError, match=next(iter(env))):
        RunnerSettings.from_environ(env)
