"""`python -m local`: the whole service on this machine, in the foreground until Ctrl-C.

Environment (all optional):
  API_PORT=8000          the API (chalice local)
  AWS_PORT=4566          moto's server holding S3, SQS and DynamoDB
  EMBEDDED_AWS=1         0: use the services at AWS_ENDPOINT_URL instead (a real LocalStack)
  WORKER_CONCURRENCY     jobs processed in parallel (default: the number of cores)
  plus every setting of chalicelib/config.py (AUTH_JWT_SECRET, MAX_UPLOAD_BYTES, ...)
"""
from __future__ import annotations

import os
import signal
import sys
import threading

HOST = "127.0.0.1"


def main() -> int:
    api_port = int(os.environ.get("API_PORT", "8000"))
    aws_port = int(os.environ.get("AWS_PORT", "4566"))
    embedded = os.environ.get("EMBEDDED_AWS", "1") != "0"
    # Emulators accept any credentials; never override real ones the user has set.
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
    os.environ.setdefault("AWS_REGION", os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    os.environ.setdefault("AWS_DEFAULT_REGION", os.environ["AWS_REGION"])
    if embedded or not os.environ.get("AWS_ENDPOINT_URL"):
        os.environ["AWS_ENDPOINT_URL"] = f"http://{HOST}:{aws_port}"
    os.environ.setdefault("AUTH_MODE", "jwt")

    # Imported only now: app.py reads its settings from the environment at import.
    from chalicelib.config import Settings
    from chalicelib.logs import configure, get_logger
    from local import services
    from local.provision import provision
    from local.sqs_worker import SqsWorker

    configure()
    log = get_logger("runner")
    settings = Settings.from_environ(os.environ)
    if settings.jwt_secret == Settings.jwt_secret:
        log.warning("default_jwt_secret", hint="set AUTH_JWT_SECRET outside local development")
    endpoint = settings.endpoint_url
    moto = api = worker = None
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    try:
        if embedded:
            moto = services.start_moto(HOST, aws_port)
            log.info("embedded_aws_started", endpoint=endpoint)
        clients = {name: services.aws_client(name, settings.region, endpoint)
                   for name in ("sqs", "s3", "dynamodb")}
        stack = provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"])
        log.info("stack_provisioned", bucket=stack.bucket, table=stack.table, queue=stack.queue_url)

        api = services.start_api(HOST, api_port, services.child_env({}))
        import app as application

        concurrency = int(os.environ.get("WORKER_CONCURRENCY") or os.cpu_count() or 1)
        worker = SqsWorker(clients["sqs"], stack.queue_url, stack.queue_arn, settings.region,
                           application.handle_object_created, concurrency)
        worker.start()
        sweeper = threading.Thread(target=_sweep_forever, name="sweeper", daemon=True,
                                   args=(application, settings.sweep_interval_seconds, stopping, log))
        sweeper.start()
        services.wait_for_port(HOST, api_port, timeout=60, process=api)
        print(f"image-jobs ready: API http://{HOST}:{api_port}/api/v1  "
              f"AWS {endpoint}  workers {concurrency}", flush=True)
        while not stopping.wait(0.5):
            if api.poll() is not None:
                log.error("api_exited", code=api.returncode)
                return 1
            if moto is not None and moto.poll() is not None:
                log.error("embedded_aws_exited", code=moto.returncode)
                return 1
        return 0
    finally:
        if worker is not None:
            worker.stop()
        services.stop(api)
        services.stop(moto)


def scheduled_event() -> dict:
    """The EventBridge event a Lambda schedule passes."""
    import datetime
    import uuid

    return {
        "version": "0", "id": str(uuid.uuid4()), "detail-type": "Scheduled Event",
        "source": "aws.events", "account": "000000000000",
        "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": os.environ.get("AWS_REGION", "us-east-1"), "resources": [], "detail": {},
    }


def _sweep_forever(application, interval: int, stopping: threading.Event, log) -> None:
    """What @app.schedule does in the cloud: the same handler, every `interval` seconds."""
    while not stopping.wait(interval):
        try:
            application.sweep(scheduled_event(), None)
        except Exception:
            log.exception("sweep_failed")


if __name__ == "__main__":
    sys.exit(main())
