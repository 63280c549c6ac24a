"""`chalice package` makes a zip that loads on its Lambda runtime, wired as the stage says."""
from __future__ import annotations

import ast
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from chalicelib.http.auth import SERVICE_SCOPE

from infra.lambda_package import RUNTIMES, check_tree, shared_objects
from tests.deploy.conftest import CACHE_TAG, FUNCTIONS, RUNTIME, deploy_python

ROOT = Path(__file__).resolve().parents[2]
# Lambda's limits for a function uploaded directly, as `chalice deploy` does.
MAX_ZIPPED = 50 * 1024 * 1024
MAX_UNZIPPED = 250 * 1024 * 1024


# Chalice names a WebSocket handler's function by its route, not by the handler.
WEBSOCKET_FUNCTIONS = {"push_connect": "websocket_connect", "push_disconnect": "websocket_disconnect"}


def functions(sam: dict) -> dict[str, dict]:
    """Chalice's function name (its key in lambda_functions of .chalice/config.json) -> its properties."""
    named = {}
    for resource in sam["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Function":
            properties = resource["Properties"]
            handler = properties["Handler"].split(".", 1)[1]
            named["api_handler" if handler == "app" else WEBSOCKET_FUNCTIONS.get(handler, handler)] = properties
    return named


def test_every_shared_object_loads_on_the_target_runtime(packaged):
    runtimes = {f["Runtime"] for f in functions(packaged.sam).values()}
    architectures = {a for f in functions(packaged.sam).values() for a in f["Architectures"]}
    assert len(runtimes) == 1 and len(architectures) == 1
    (runtime,), (architecture,) = runtimes, architectures
    # Amazon Linux 2023 (glibc 2.34): pyvips-binary's libvips needs glibc 2.28.
    assert runtime == RUNTIME
    assert runtime in RUNTIMES, f"no glibc facts for {runtime}: add it to infra/lambda_package.py"
    objects = shared_objects(packaged.unpacked)
    # Pillow, pillow-heif and libvips are in: the check below looked at real compiled code.
    names = {p.name for p in objects}
    assert any(n.startswith("_imaging.") for n in names)
    assert any(n.startswith("_pillow_heif.") for n in names)
    assert any(n.startswith("libvips") for n in names) and any(n.startswith("_libvips") for n in names)
    assert check_tree(packaged.unpacked, runtime, architecture) == []
    # On python3.11's Amazon Linux 2 the same package would not load.
    assert any("needs GLIBC_2.2" in p and "up to GLIBC_2.26" in p
               for p in check_tree(packaged.unpacked, "python3.11", architecture))


def test_the_package_makes_renditions_with_its_own_libvips(packaged, tmp_path):
    """The deployed imaging stack as the runtime loads it: only the package and the standard
    library on the path, on the runtime's Python; libvips found inside the package."""
    import subprocess

    probe = ("import os, sys, io; sys.path.insert(0, os.getcwd())\n"
             "import pyvips; assert pyvips.__file__.startswith(os.getcwd()), pyvips.__file__\n"
             "from PIL import Image\n"
             "from chalicelib.imaging import render\n"
             "buf = io.BytesIO(); Image.new('RGB', (4000, 3000), (200, 120, 40)).save(buf, 'JPEG')\n"
             "out = render.make_renditions(buf.getvalue(), 50_000_000)\n"
             "print(pyvips.API_mode, [(o.width, o.height) for o in out.values()])")
    result = subprocess.run([deploy_python(), "-S", "-c", probe], cwd=packaged.unpacked,
                            env={"PYTHONDONTWRITEBYTECODE": "1", "HOME": str(tmp_path)},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "[(1280,", "960),", "(256,", "256)]"]


def test_no_dependency_was_built_from_source_on_this_machine(packaged):
    # A wheel Chalice built here says so in its WHEEL file ("Root-Is-Purelib: false" with a
    # linux_x86_64 tag); a downloaded manylinux wheel names its manylinux tag.
    for wheel_file in packaged.unpacked.glob("*.dist-info/WHEEL"):
        tags = [line.split(":", 1)[1].strip() for line in wheel_file.read_text().splitlines()
                if line.startswith("Tag:")]
        assert not any(re.search(r"-linux_(x86_64|aarch64)$", tag) for tag in tags), (
            f"{wheel_file.parent.name} was built locally: {tags}")


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def test_every_requirement_is_in_the_package_at_its_pinned_version(packaged):
    """Chalice only warns ("Could not install dependencies ... Your deployment will
    continue") when it cannot build one, and ships the package without it."""
    pins = {}
    for line in (packaged.project / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[_normalized(name)] = version
    shipped = {}
    for info in packaged.unpacked.glob("*.dist-info"):
        name, version = info.name[: -len(".dist-info")].rsplit("-", 1)
        shipped[_normalized(name)] = version
    assert {name: shipped.get(name) for name in pins} == pins


def test_the_package_finds_a_focus_with_its_own_numpy_and_model(packaged):
    """The focus (chalicelib/imaging/focus.py) needs numpy's wheel and the cascade's XML file
    in the package. Only the package and the standard library are on the path."""
    import subprocess

    probe = ("import os, sys; sys.path.insert(0, os.getcwd()); import numpy; "
             "assert numpy.__file__.startswith(os.getcwd()), numpy.__file__; "
             "from PIL import Image; from chalicelib.imaging import focus; "
             "assert focus.MODEL.is_file() and len(focus.cascade().stages) == 20; "
             "image = Image.new('RGB', (640, 360), 'white'); image.paste((200, 20, 40), (520, 120, 600, 200)); "
             "print(focus.find(image).source, focus.find(image).x > 0.75)")
    result = subprocess.run([deploy_python(), "-S", "-c", probe], cwd=packaged.unpacked,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "saliency True"


def test_the_package_checks_cognitos_rs256_tokens_at_a_websocket_connect(packaged):
    """WebSocket APIs take no Cognito authorizer, so push's connect verifies the token itself
    (chalicelib/http/auth.py): RS256 needs PyJWT's cryptography, in the package, not just here.
    Only the package and the standard library are on the path."""
    import subprocess

    probe = ("import os, sys; sys.path.insert(0, os.getcwd()); import jwt, jwt.algorithms as a; "
             "assert jwt.__file__.startswith(os.getcwd()), jwt.__file__; "
             "print(a.has_crypto and 'RS256' in a.get_default_algorithms())")
    result = subprocess.run([deploy_python(), "-S", "-c", probe], cwd=packaged.unpacked,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_the_package_fits_lambdas_direct_upload_limits(packaged):
    """As `make deploy` uploads it: after infra.bytecode, which adds .pyc files and drops
    what infra.prune names (Chalice's own zip is over 50 MB since numpy came in)."""
    unzipped = sum(p.stat().st_size for p in packaged.unpacked.rglob("*") if p.is_file())
    assert packaged.deployed_zip.stat().st_size < MAX_ZIPPED
    assert unzipped < MAX_UNZIPPED


def _services_the_code_creates_clients_for() -> set[str]:
    """Every string given to botocore's create_client, Clients.lazy, or clients.load/create
    (chalicelib/adapters/botocore_clients.py) in app.py and chalicelib/, as a call's argument
    or a functools.partial's."""
    found = set()
    for path in [ROOT / "app.py", *sorted((ROOT / "chalicelib").rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            callee = node.args[0] if node.args and _name(node.func) == "partial" else node.func
            if _makes_clients(callee):
                found |= {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return found


def _makes_clients(callee) -> bool:
    if not isinstance(callee, ast.Attribute):
        return False
    return callee.attr in ("lazy", "create_client") or (
        callee.attr in ("load", "create") and _name(callee.value) == "clients")


def _name(node) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def test_every_service_the_code_creates_a_client_for_has_its_model_in_the_package(packaged):
    """infra.prune drops botocore's other models: a client of a service whose model is gone
    fails when it is made. Each is made here by the package's own Clients, with only the
    package and the standard library on the path; a dropped one (ec2) fails as it would."""
    import subprocess

    from infra.prune import SERVICES

    services = _services_the_code_creates_clients_for() | {"dynamodb"}  # PynamoDB's
    assert {"s3", "sqs", "cloudwatch", "secretsmanager", "cloudfront", "apigatewaymanagementapi"} <= services
    assert services <= SERVICES
    probe = ("import os, sys, json; sys.path.insert(0, os.getcwd())\n"
             "from botocore.exceptions import UnknownServiceError\n"
             "from chalicelib.adapters.botocore_clients import Clients\n"
             "import pynamodb.connection.base as base\n"
             "clients = Clients('us-east-1'); made = {}\n"
             "for name in json.loads(sys.argv[1]) + ['ec2']:\n"
             "    try: made[name] = clients.create(name, None, None).meta.service_model.service_name\n"
             "    except UnknownServiceError: made[name] = None\n"
             "print(json.dumps([base.SERVICE_NAME, made]))")
    env = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run([deploy_python(), "-S", "-c", probe, json.dumps(sorted(SERVICES))],
                            cwd=packaged.unpacked, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    pynamodb_service, made = json.loads(result.stdout)
    assert pynamodb_service == "dynamodb"
    assert made == {**{name: name for name in SERVICES}, "ec2": None}


def test_the_checker_refuses_a_library_built_on_a_newer_glibc(tmp_path):
    """This machine's Python (glibc 2.36, links libpython) is what a source build makes."""
    local_build = Path(sys.executable).resolve()
    shutil.copy2(local_build, tmp_path / "_native.cpython-311-x86_64-linux-gnu.so")
    problems = check_tree(tmp_path, "python3.11")
    assert any("needs GLIBC_2.3" in p and "up to GLIBC_2.26" in p for p in problems), problems
    assert any("needs libpython3.11" in p for p in problems), problems
    assert any("a cpython-311 extension; the runtime is cpython-312" in p
               for p in check_tree(tmp_path, "python3.12"))


def test_sqs_event_source_is_the_stacks_queue_one_message_at_a_time(packaged, outputs):
    worker = functions(packaged.sam)["handle_object_created"]
    ((_, event),) = worker["Events"].items()
    assert event["Type"] == "SQS"
    properties = event["Properties"]
    queue = properties["Queue"]["Fn::Sub"]
    assert queue == "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:" + outputs["EventsQueueName"]
    assert properties["BatchSize"] == 1
    env = packaged.stage_config["environment_variables"]
    assert properties["ScalingConfig"] == {"MaximumConcurrency": int(env["WORKER_MAX_CONCURRENCY"])}


def test_webhook_deliveries_come_from_the_stacks_webhook_queue(packaged, outputs):
    delivery = functions(packaged.sam)["deliver_webhook"]
    ((_, event),) = delivery["Events"].items()
    assert event["Type"] == "SQS"
    properties = event["Properties"]
    queue = properties["Queue"]["Fn::Sub"]
    assert queue == "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:" + outputs["WebhookQueueName"]
    assert properties["BatchSize"] == 1
    env = packaged.stage_config["environment_variables"]
    assert properties["ScalingConfig"] == {"MaximumConcurrency": int(env["WEBHOOK_MAX_CONCURRENCY"])}


def test_the_sweeper_runs_on_its_schedule(packaged):
    from chalicelib.config import Settings

    sweep = functions(packaged.sam)["sweep"]
    ((_, event),) = sweep["Events"].items()
    assert event["Type"] == "Schedule"
    env = packaged.stage_config["environment_variables"]
    minutes = max(1, Settings.from_environ(env).sweep_interval_seconds // 60)
    assert event["Properties"]["Schedule"] == ("rate(1 minute)" if minutes == 1 else f"rate({minutes} minutes)")


def test_the_orphan_scan_runs_every_minute_each_run_one_hex_digits_share(packaged):
    from chalicelib.config import Settings

    orphans = functions(packaged.sam)["sweep_orphans"]
    ((_, event),) = orphans["Events"].items()
    assert event["Type"] == "Schedule" and event["Properties"]["Schedule"] == "rate(1 minute)"
    # A digit's turn comes round every 16 runs: its last run has ended by then.
    settings = Settings.from_environ(packaged.stage_config["environment_variables"])
    assert orphans["Timeout"] == settings.orphan_scan_timeout_seconds < 16 * settings.orphan_scan_interval_seconds


def test_api_passes_image_bodies_as_binary(packaged):
    import app as application

    swagger = packaged.sam["Resources"]["RestAPI"]["Properties"]["DefinitionBody"]
    binary = set(swagger["x-amazon-apigateway-binary-media-types"])
    assert set(application.app.api.binary_types) <= binary
    # Every upload the contract accepts, and multipart bodies.
    assert {"multipart/form-data", "application/octet-stream", "image/jpeg", "image/png",
            "image/webp", "image/gif", "image/heic", "image/heif", "image/avif", "image/tiff"} <= binary


def test_every_route_is_behind_the_stacks_cognito_user_pool(packaged, outputs):
    swagger = packaged.sam["Resources"]["RestAPI"]["Properties"]["DefinitionBody"]
    ((name, scheme),) = swagger["securityDefinitions"].items()
    assert scheme["x-amazon-apigateway-authtype"] == "cognito_user_pools"
    assert scheme["x-amazon-apigateway-authorizer"]["providerARNs"] == [outputs["UserPoolArn"]]
    assert scheme["name"] == "Authorization"
    spec = yaml.safe_load((ROOT / "openapi.yaml").read_text())
    stage = packaged.sam["Resources"]["RestAPI"]["Properties"]["StageName"]
    operations = [(path, method, op) for path, item in swagger["paths"].items()
                  for method, op in item.items() if method not in ("parameters", "options")]
    served = [(path, method, op) for path, method, op in operations
              if method in spec["paths"][f"/{stage}{path}"]]
    # The five job routes and the list, the two of a direct upload, the five webhook ones (the
    # test event's included), push, and the eight of the service principal.
    assert len(served) == 22
    for path, method, op in served:
        # The service routes take only an access token with the service's scope (API Gateway
        # checks it); every other route an ID token (no scope).
        scopes = [SERVICE_SCOPE] if path.startswith("/v1/service/") else []
        assert op.get("security") == [{name: scopes}], f"{method.upper()} {path} has no authorizer"
    assert sum(1 for path, _, _ in served if path.startswith("/v1/service/")) == 8
    # The methods a path lacks reach the app, which answers 405 with Allow, token or not.
    for path, method, op in operations:
        if (path, method, op) not in served:
            assert "security" not in op, f"{method.upper()} {path} should answer 405 without a token"


def test_every_path_answers_a_browsers_preflight_without_a_token(packaged):
    """CORS (app.py): a preflight carries no Authorization, so API Gateway must answer it
    itself, before any authorizer, naming the headers the web page sends and reads."""
    swagger = packaged.sam["Resources"]["RestAPI"]["Properties"]["DefinitionBody"]
    for path, item in swagger["paths"].items():
        options = item["options"]
        assert "security" not in options, f"OPTIONS {path} asks for a token"
        assert options["x-amazon-apigateway-integration"]["type"] == "mock"
        headers = options["x-amazon-apigateway-integration"]["responses"]["default"]["responseParameters"]
        assert "Idempotency-Key" in headers["method.response.header.Access-Control-Allow-Headers"]
        assert "Authorization" in headers["method.response.header.Access-Control-Allow-Headers"]
        for method in item:
            if method not in ("options", "parameters"):
                assert method.upper() in headers["method.response.header.Access-Control-Allow-Methods"]


def test_clients_see_the_contracts_paths_behind_the_api_gateway_stage(packaged):
    """The execute-api URL is https://<id>.execute-api.<region>.amazonaws.com/<stage>/<route>:
    stage and route together must be the contract's /api/v1/..., so that a Location header
    (/api/v1/image-jobs/<id>) leads back to the API."""
    from datetime import datetime, timezone

    from chalicelib.domain.jobs import Job, JobStatus
    from chalicelib.http.views import job_location

    spec = yaml.safe_load((ROOT / "openapi.yaml").read_text())
    swagger = packaged.sam["Resources"]["RestAPI"]["Properties"]["DefinitionBody"]
    stage = packaged.sam["Resources"]["RestAPI"]["Properties"]["StageName"]
    public = {f"/{stage}{path}" for path in swagger["paths"]}
    assert public == set(spec["paths"])
    now = datetime.now(timezone.utc)
    job = Job(job_id="4b0e", owner="alice", status=JobStatus.QUEUED, created_at=now,
              updated_at=now, expires_at=now, original_key="originals/4b0e")
    assert job_location(job).replace("4b0e", "{job_id}") in public


def test_functions_get_the_stages_memory_timeout_and_environment(packaged):
    stage = packaged.stage_config
    named = functions(packaged.sam)
    assert set(named) == FUNCTIONS
    for name, properties in named.items():
        wanted = stage["lambda_functions"][name]
        assert properties["MemorySize"] == wanted["lambda_memory_size"], name
        assert properties["Timeout"] == wanted["lambda_timeout"], name
        assert properties["Environment"]["Variables"] == stage["environment_variables"], name
        # dev reserves nothing (a new account could not deploy it); prod's is tested in test_capacity.
        assert properties.get("ReservedConcurrentExecutions") == wanted.get("reserved_concurrency"), name


def test_the_websocket_api_routes_connect_and_disconnect_to_the_push_handlers_and_no_message(packaged):
    """No $default route: a client's message matches no route, so API Gateway answers it with
    an error frame itself and no function runs (docs/contract.md "Push")."""
    resources = packaged.sam["Resources"]
    assert resources["WebsocketAPI"]["Properties"]["ProtocolType"] == "WEBSOCKET"
    routes = {r["Properties"]["RouteKey"]: r["Properties"]["Target"]["Fn::Join"][1][1]["Ref"]
              for r in resources.values() if r["Type"] == "AWS::ApiGatewayV2::Route"}
    assert routes == {"$connect": "WebsocketConnectAPIIntegration", "$disconnect": "WebsocketDisconnectAPIIntegration"}
    assert "WebsocketMessage" not in resources
    for kind in ("Connect", "Disconnect"):
        integration = resources[f"Websocket{kind}APIIntegration"]["Properties"]
        assert integration["IntegrationType"] == "AWS_PROXY"
        assert integration["IntegrationUri"]["Fn::Sub"][1] == {"WebsocketHandler": {"Ref": f"Websocket{kind}"}}
        assert resources[f"Websocket{kind}"]["Properties"]["Handler"] == f"app.push_{kind.lower()}"
    # The stage the policy's ManageConnections and PUSH_URL name (infra/stage_config.py).
    assert resources["WebsocketAPIStage"]["Properties"]["StageName"] == packaged.stage_config["api_gateway_stage"]


def test_push_follows_the_stacks_table_stream_one_shard_batch_at_a_time(packaged, outputs):
    changes = functions(packaged.sam)["push_job_changes"]
    ((_, event),) = changes["Events"].items()
    assert event["Type"] == "DynamoDB"
    properties = event["Properties"]
    assert properties["Stream"] == outputs["JobsTableStreamArn"]
    # From now on (an old change is no news), and no waiting for a batch to fill.
    assert properties["StartingPosition"] == "LATEST" and properties["MaximumBatchingWindowInSeconds"] == 0
    assert properties["BatchSize"] == 100


@pytest.fixture(scope="module")
def linted(packaged, tmp_path_factory) -> dict[str, object]:
    """cfn-lint run once on both templates the tests below lint: the one `chalice package`
    wrote, and a copy that infra/stream_source.py has given the stream's retries. Its start
    (loading every resource spec) is most of a run, about 20 CPU-s each on CI's machine.
    Returns each template's path and its findings (`--format parseable`: `path:line:...`)."""
    import subprocess

    raw = packaged.project / "out" / "sam.json"
    template = tmp_path_factory.mktemp("stream-source") / "sam.json"
    shutil.copy2(raw, template)
    subprocess.run([sys.executable, "-m", "infra.stream_source", "dev", "--template", str(template)],
                   cwd=ROOT, check=True, capture_output=True)
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    result = subprocess.run([str(cfn_lint), "--format", "parseable", str(raw), str(template)],
                            capture_output=True, text=True, timeout=180)
    findings = {str(raw): [], str(template): []}
    for line in filter(str.strip, result.stdout.splitlines()):
        path = next((p for p in findings if line.startswith(p + ":")), None)
        assert path, f"a cfn-lint line for neither template: {line}\n{result.stderr[-2000:]}"
        findings[path].append(line[len(path) + 1:])  # line:column:...: rule: message
    return {"raw": raw, "stream_source": template, "findings": findings, "stderr": result.stderr}


def test_the_stream_sources_retries_are_set_in_the_packaged_template_and_cfn_lint_takes_them(linted):
    """Chalice sets no retry behaviour on the stream's event source: infra/stream_source.py
    writes it into the packaged template (and sets it on the deployed mapping after `chalice
    deploy`). Lambda's defaults would retry a failed batch until its records age out (a day)."""
    from infra.stream_source import STREAM_SOURCE

    template = linted["stream_source"]
    sam = json.loads(template.read_text())
    ((_, event),) = functions(sam)["push_job_changes"]["Events"].items()
    assert {k: event["Properties"][k] for k in STREAM_SOURCE} == {
        "MaximumRetryAttempts": 2, "BisectBatchOnFunctionError": True, "MaximumRecordAgeInSeconds": 300}
    assert event["Properties"]["BatchSize"] == 100  # the rest as Chalice made it
    findings = linted["findings"][str(template)]
    assert [line for line in findings if "'ApiHandler'" not in line] == [], findings


def test_every_function_knows_this_websocket_apis_urls_and_only_it_may_post(packaged):
    """The second pass of `make deploy`: the id Chalice recorded becomes PUSH_URL (what
    GET /api/v1/push answers), PUSH_MANAGEMENT_URL (where the fan-out posts) and the policy's
    one ManageConnections resource."""
    deployed = json.loads((packaged.project / ".chalice" / "deployed" / "dev.json").read_text())
    (api,) = [r for r in deployed["resources"] if r["resource_type"] == "websocket_api"]
    env = packaged.stage_config["environment_variables"]
    assert api["websocket_api_url"] == env["PUSH_URL"] + "/"
    assert env["PUSH_MANAGEMENT_URL"] == env["PUSH_URL"].replace("wss://", "https://", 1)
    manage = [st for st in packaged.policy["Statement"] if "execute-api:ManageConnections" in st["Action"]]
    assert manage == [{"Sid": "PushConnections", "Effect": "Allow", "Action": ["execute-api:ManageConnections"],
                       "Resource": [f"arn:aws:execute-api:us-east-1:123456789012:{api['websocket_api_id']}"
                                    "/api/POST/@connections/*"]}]


def test_cfn_lint_finds_nothing_in_the_package_but_chalices_own_log_group_name(packaged, linted):
    """The SAM template as `chalice package` writes it, linted as infra/template.yaml is.
    Chalice 1.34 names the API function's log group after `${ApiHandler}`, a resource it calls
    APIHandler: that one known slip (it would fail a CloudFormation deploy of this template;
    `chalice deploy` does not use it) and nothing else, the WebSocket API's resources included."""
    findings = linted["findings"][str(linted["raw"])]
    assert findings, f"the known slip is gone (drop the exception), or cfn-lint failed: {linted['stderr'][-2000:]}"
    others = [line for line in findings if "'ApiHandler'" not in line]
    assert others == [], others
    assert {line.split(":")[0] for line in findings} == {str(_line_of(packaged, "${ApiHandler}"))}


def _line_of(packaged, text: str) -> int:
    lines = (packaged.project / "out" / "sam.json").read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def test_every_functions_logs_expire_after_the_stages_retention(packaged):
    groups = [r["Properties"] for r in packaged.sam["Resources"].values() if r["Type"] == "AWS::Logs::LogGroup"]
    assert len(groups) == len(functions(packaged.sam))
    assert {g["RetentionInDays"] for g in groups} == {packaged.stage_config["log_retention_in_days"]}


def test_roles_carry_exactly_the_stage_policy(packaged):
    roles = [r["Properties"] for r in packaged.sam["Resources"].values() if r["Type"] == "AWS::IAM::Role"]
    assert len(roles) == len(FUNCTIONS)  # one per function, as autogen_policy false makes them
    for role in roles:
        (policy,) = role["Policies"]
        assert policy["PolicyDocument"] == packaged.policy
    assert "ManagedPolicyArns" not in json.dumps(roles)


def test_make_deploys_bytecode_step_puts_a_current_pyc_beside_every_source_of_the_package(packaged):
    """As `make deploy` runs it: infra.bytecode finds the package Chalice cached for the tree
    and adds checked-hash bytecode; Chalice then reuses that package as it is."""
    import os
    import subprocess

    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "AWS_DEFAULT_REGION": "us-east-1"}
    # The packaged fixture ran the step on the project, as `make deploy` does.
    assert f" .pyc files added ({CACHE_TAG}" in packaged.bytecode_report, packaged.bytecode_report
    chalice = Path(deploy_python()).with_name("chalice")
    again = subprocess.run([str(chalice), "package", "--stage", "dev", str(packaged.project / "out-again")],
                           cwd=packaged.project, env=env, capture_output=True, text=True, timeout=270)
    assert again.returncode == 0, again.stderr
    assert "Reusing existing deployment package" in again.stdout, again.stdout
    # Whether each .pyc is current is the runtime's Python's call (its magic number).
    check = ("import json, sys, zipfile\n"
             "from infra.bytecode import is_current\n"
             "with zipfile.ZipFile(sys.argv[1]) as archive:\n"
             "    names = set(archive.namelist())\n"
             "    sources = [n for n in names if n.endswith('.py')]\n"
             "    stale = []\n"
             "    for source in sources:\n"
             "        head, _, stem = source.rpartition('/')\n"
             "        pyc = f'{head}/__pycache__/{stem[:-3]}.{sys.implementation.cache_tag}.pyc'.lstrip('/')\n"
             "        if pyc not in names or not is_current(archive.read(pyc), archive.read(source)):\n"
             "            stale.append(source)\n"
             "print(json.dumps([sorted(names), sources, stale]))")
    result = subprocess.run([deploy_python(), "-c", check, str(packaged.project / "out-again" / "deployment.zip")],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    names, sources, stale = json.loads(result.stdout)
    tag = CACHE_TAG
    assert len(sources) > 500
    # A few sources never compile on this Python (templates, Python 2 leftovers): no .pyc.
    assert len(stale) < 5, stale
    assert "app.py" not in stale and "chalicelib/usecases/worker.py" not in stale
    assert "botocore/client.py" not in stale
    assert not [n for n in names if "__pycache__/" in n and f".{tag}.pyc" not in n]


@pytest.mark.timeout(600)
def test_the_cold_start_benchmark_runs_on_this_package(packaged):
    """benchmarks/cold_package.py's short run (tests/bench/test_benchmarks_run.py runs the
    others), on the zips built here once (Chalice's and make deploy's) rather than a second
    `chalice package` and bytecode step."""
    from tests.bench.test_benchmarks_run import run_benchmark

    run_benchmark("cold_package.py", ["--cold", "1", "--zip", str(packaged.zip_path),
                                      "--compiled", str(packaged.deployed_zip)], 300)
