"""RunnerSettings.from_environ: the local runner's own settings (`python -m local`), beside
the runner and never deployed; the service's are chalicelib/config.py's Settings."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Mapping, Optional

from chalicelib.config import parse_value

STORAGES = ("", "rgw")
LOCAL_COMPONENTS = ("api", "web", "worker", "sweeper", "bridge", "webhooks", "push")


@dataclass(frozen=True)
class RunnerSettings:
    """The local runner's own settings (`python -m local`); never read in the cloud."""

    api_port: int = 8000
    # The web page (web/), and the subject of the dev token it is given.
    web_port: int = 8080
    web_subject: str = "web"
    # Push (local/push_gateway.py): the WebSocket port, and its management API's.
    push_port: int = 8001
    push_management_port: int = 8002
    # moto's server, or where a LocalStack listens (LocalStack's own default port).
    aws_port: int = 4566
    # False: use the services at AWS_ENDPOINT_URL (a real LocalStack) instead of moto's.
    embedded_aws: bool = True
    # Which parts to run, comma-separated, of LOCAL_COMPONENTS.
    local_components: str = ",".join(LOCAL_COMPONENTS)
    # Jobs processed in parallel; 0: one per core.
    worker_concurrency: int = 0
    # Webhook deliveries in parallel: mostly waiting on receivers, so more than the cores.
    webhook_concurrency: int = 4
    # Every line the runner and its API print also goes here, for `make stats` (local/stats.py).
    log_file: str = ".local/runner.log"
    # Forward storage's SQS events to RabbitMQ in MinIO's shape; None: only on the embedded
    # stack with QUEUE_BACKEND=amqp (which has no MinIO to notify RabbitMQ itself).
    amqp_bridge: Optional[bool] = None
    # "rgw": storage is Ceph's RADOS Gateway, started by the runner (local/rgw.py), which
    # notifies RabbitMQ itself; moto still holds the table and the webhook queue. "": moto's S3.
    storage: str = ""
    # The gateway's S3 port.
    rgw_port: int = 7480
    # After SIGTERM or Ctrl-C: how long the consumers have, together, to finish the steps in
    # hand. One stuck step (a call to an emulator that never answers) must not hold the exit:
    # what it held is leased, and the lease's end gives it to the next worker.
    stop_seconds: int = 15

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "RunnerSettings":
        values = {}
        for field in fields(cls):
            raw = environ.get(field.name.upper())
            if raw is not None and raw != "":
                values[field.name] = parse_value(field.name, field.type, raw)
        runner = cls(**values)
        if runner.storage not in STORAGES:
            raise ValueError(f"STORAGE must be rgw or unset, got {runner.storage!r}")
        unknown = set(runner.components) - set(LOCAL_COMPONENTS)
        if unknown:
            raise ValueError(f"LOCAL_COMPONENTS: unknown {sorted(unknown)}; choose from {LOCAL_COMPONENTS}")
        return runner

    @property
    def components(self) -> set[str]:
        return set(filter(None, self.local_components.split(",")))
