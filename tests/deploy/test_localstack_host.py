"""local/localstack.py: LocalStack on the host as `make localstack` starts it (the session's
LocalStack, which tests/e2e also runs the service against)."""
from __future__ import annotations

import getpass
import ipaddress
import json
import tempfile
import urllib.request
import zipfile
from pathlib import Path

from chalicelib.adapters.dynamo_jobs import OWNER_CREATED_INDEX, DUE_INDEX
from chalicelib.config import Settings
from local import localstack as tooling
from local.services import aws_client


def listening_addresses(port: int) -> set:
    """The addresses that sockets LISTEN on at `port`, from /proc/net/tcp and tcp6."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as handle:
            for line in handle.readlines()[1:]:
                fields = line.split()
                address, hex_port = fields[1].split(":")
                if fields[3] == "0A" and int(hex_port, 16) == port:
                    found.add(_address(address))
    return found


def _address(hex_address: str):
    """The kernel prints each 32-bit word in host (little-endian) order."""
    raw = b"".join(bytes.fromhex(hex_address[i:i + 8])[::-1] for i in range(0, len(hex_address), 8))
    address = ipaddress.ip_address(raw)
    return getattr(address, "ipv4_mapped", None) or address


LOOPBACK = {ipaddress.ip_address("127.0.0.1")}


def test_it_and_dynamodb_local_listen_on_loopback_only(localstack):
    """local/localstack_boot.py: GATEWAY_LISTEN's host honoured, DynamoDB Local bound to it."""
    port = int(localstack.endpoint.rsplit(":", 1)[1])
    assert listening_addresses(port) == LOOPBACK  # and nothing else
    (java,) = java_children(localstack)
    command = Path(f"/proc/{java}/cmdline").read_text().split("\0")
    assert "LoopbackDynamoDBLocal" in command and "-jar" not in command
    dynamodb_port = int(command[command.index("-port") + 1])
    assert listening_addresses(dynamodb_port) == LOOPBACK  # a tcp6 socket, ::ffff:127.0.0.1


def java_children(localstack) -> list[int]:
    return [pid for pid in children(localstack.process.pid)
            if Path(f"/proc/{pid}/comm").read_text() == "java\n"]


def test_the_init_hook_provisioned_the_apps_stack(localstack):
    with urllib.request.urlopen(f"{localstack.endpoint}/_localstack/init/ready", timeout=10) as answer:
        state = json.load(answer)
    assert state["completed"]
    assert [(s["name"], s["state"]) for s in state["scripts"]] == [("image-jobs.py", "SUCCESSFUL")]
    settings = Settings(endpoint_url=localstack.endpoint)
    sqs, s3, dynamodb = (aws_client(n, settings.region, localstack.endpoint) for n in ("sqs", "s3", "dynamodb"))
    queue_url = sqs.get_queue_url(QueueName=settings.events_queue_name)["QueueUrl"]
    # Path-style queue URLs on the endpoint itself: nothing to resolve under *.localstack.cloud.
    assert queue_url.startswith(f"{localstack.endpoint}/queue/")
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    (config,) = s3.get_bucket_notification_configuration(Bucket=settings.bucket)["QueueConfigurations"]
    assert config["QueueArn"] == arn
    table = dynamodb.describe_table(TableName=settings.table)["Table"]
    assert sorted(i["IndexName"] for i in table["GlobalSecondaryIndexes"]) == sorted([OWNER_CREATED_INDEX, DUE_INDEX])
    ttl = dynamodb.describe_time_to_live(TableName=settings.table)["TimeToLiveDescription"]
    assert (ttl["AttributeName"], ttl["TimeToLiveStatus"]) == ("expires_at", "ENABLED")


def test_dynamodb_local_is_the_npm_jar_on_the_machines_java_with_the_noop_agent(localstack):
    """DynamoDB Local was started from the cache (it served the table above) with no download."""
    installation = tooling.Installation(tooling.cache_home())
    lib = localstack.root / "var" / "lib" / "localstack" / "lib"
    assert lib.resolve() == installation.lib.resolve()
    assert (lib / "java" / "21" / "bin" / "java").exists()
    agent = installation.dynamodb_local / "ddb-local-loader-0.1.jar"
    with zipfile.ZipFile(agent) as jar:
        assert "Premain-Class: NoopAgent" in jar.read("META-INF/MANIFEST.MF").decode()
        assert set(jar.namelist()) == {"META-INF/MANIFEST.MF", "NoopAgent.class"}
    assert (installation.dynamodb_local / "DynamoDBLocal.jar").exists()


def test_its_files_stay_in_its_root_and_the_cache(localstack):
    """Nothing where LocalStack, plux and the JVM write by default (/var/lib/localstack,
    /etc/localstack, /tmp/localstack, ~/.localstack, ~/.cache/plux, /tmp/hsperfdata_*)."""
    cache = tooling.cache_home()
    for default in ("/var/lib/localstack", "/etc/localstack", f"{tempfile.gettempdir()}/localstack",
                    Path.home() / ".localstack"):
        assert not Path(default).exists(), default
    assert any((cache / "xdg-cache" / "plux").iterdir())
    (java,) = java_children(localstack)
    assert not Path(tempfile.gettempdir(), f"hsperfdata_{getpass.getuser()}", str(java)).exists()
    assert any(localstack.root.glob("tmp/*libsqlite4java*"))  # DynamoDB Local's native library
    assert (localstack.root / "var" / "lib" / "localstack" / "cache").is_dir()


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_the_runners_wait_on_init_knows_localstack_from_moto(localstack, moto_endpoint):
    """EMBEDDED_AWS=0 waits for LocalStack's init hook (local/__main__.py); against moto's
    server, or anything else, it goes on at once."""
    stage = tooling.wait_for_init(localstack.endpoint, timeout=10)
    assert stage["completed"]
    assert [(s["name"], s["state"]) for s in stage["scripts"]] == [("image-jobs.py", "SUCCESSFUL")]
    assert tooling.wait_for_init(moto_endpoint, timeout=10) is None
