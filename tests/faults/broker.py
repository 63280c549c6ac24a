"""A RabbitMQ node of a test's own, for the test that stops and starts its broker: the
machine's (127.0.0.1:5672) stays up for every test running beside it under pytest-xdist, and
for whoever else uses it. The same Debian server, on free ports, with its data, logs and
Erlang cookie in a temporary directory, on loopback only."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.conftest import free_port, wait_for_broker

# The server itself, not Debian's wrapper in /usr/sbin, which runs it as the rabbitmq user
# (who cannot read a test's temporary directory) and logs to /var/log/rabbitmq.
SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")


class Broker:
    def __init__(self, root: Path):
        self.root = root
        self.port, self.dist_port = free_port(), free_port()
        self.node = f"tests-{uuid.uuid4().hex[:8]}@localhost"
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"
        (root / "rabbitmq.conf").write_text(f"listeners.tcp.local = 127.0.0.1:{self.port}\n")
        (root / "enabled_plugins").write_text("[].\n")  # no management listener on 15672
        self.env = {
            **os.environ, "HOME": str(root), "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_PORT": str(self.port), "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_CONFIG_FILE": str(root / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(root / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(root / "mnesia"), "RABBITMQ_LOG_BASE": str(root / "log"),
            "RABBITMQ_CONF_ENV_FILE": str(root / "rabbitmq-env.conf"),
            # Erlang's distribution port and epmd on loopback too (the machine's rabbitmq-env.conf
            # says the same, which this node does not read).
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        }
        (root / "rabbitmq-env.conf").write_text("")
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 120) -> "Broker":
        """Starts the node, or starts it again on the same port and data (durable queues and
        persistent messages kept), and waits until it takes AMQP connections."""
        self.log = open(self.root / "server.log", "a+")
        self.process = subprocess.Popen([str(SERVER)], cwd=self.root, env=self.env, stdout=self.log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for_broker(timeout, self.url)
        except Exception as error:
            self.stop()
            pytest.fail(f"RabbitMQ node {self.node} did not start: {error}\n"
                        f"{(self.root / 'server.log').read_text()[-4000:]}")
        return self

    def stop(self) -> None:
        """SIGTERM to the node's process group (RabbitMQ shuts down cleanly on it, as on
        `rabbitmqctl stop`, whose CLI takes a minute of CPU to start here), then SIGKILL."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()


@pytest.fixture
def own_broker(tmp_path_factory):
    if not SERVER.exists():
        pytest.fail(f"no {SERVER}: `apt-get install -y rabbitmq-server`")
    # Short: Erlang's node and socket names have length limits.
    root = tmp_path_factory.mktemp("rmq")
    broker = Broker(root).start()
    yield broker
    broker.stop()
    shutil.rmtree(root, ignore_errors=True)
