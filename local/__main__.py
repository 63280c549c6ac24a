"""`python -m local`: the whole service on this machine, in the foreground until Ctrl-C.

Environment (all optional): the runner's own settings are RunnerSettings in
local/settings.py (API_PORT, AWS_PORT, WEB_PORT, WEB_SUBJECT, EMBEDDED_AWS (0: use the services at
AWS_ENDPOINT_URL, default http://127.0.0.1:$AWS_PORT, where `make localstack` listens),
LOCAL_COMPONENTS of api,web,worker,sweeper,bridge,webhooks,push, PUSH_PORT,
PUSH_MANAGEMENT_PORT, WORKER_CONCURRENCY,
WEBHOOK_CONCURRENCY, AMQP_BRIDGE, LOG_FILE, STORAGE (rgw: Ceph's RADOS Gateway, local/rgw.py),
RGW_PORT), and the service's are chalicelib/config.py's Settings (QUEUE_BACKEND, AUTH_JWT_SECRET,
WEBHOOK_ALLOW_LOOPBACK, ...). A port it wants that is taken: one line on stderr, exit 2
(local/ports.py).
"""
from __future__ import annotations

import datetime
import os
import signal
import sys
import threading
import time
import uuid

from local.ports import PortTaken, binding, ensure_free, refusal, wanted

HOST = "127.0.0.1"
# Longer than `make localstack` waits for its own start (wait_ready), which stops it past that.
LOCALSTACK_INIT_TIMEOUT = 180


def main() -> int:
    from local.settings import RunnerSettings

    try:
        runner = RunnerSettings.from_environ(os.environ)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    refused = _set_environment(runner)
    if refused:
        print(refused, file=sys.stderr)
        return 2
    _keep_run_log(runner)

    # Imported only now: app.py reads its settings from the environment at import.
    from chalicelib.config import DEFAULT_JWT_SECRET, Settings
    from chalicelib.runtime.logs import configure, get_logger

    configure()
    log = get_logger("runner")
    try:
        settings = Settings.from_environ(os.environ)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    components = runner.components
    if settings.jwt_secret == DEFAULT_JWT_SECRET and "api" in components:
        log.warning("default_jwt_secret", hint="set AUTH_JWT_SECRET outside local development")
    bridge_wanted = _bridge_wanted(runner, settings)
    if not bridge_wanted:
        components.discard("bridge")
    concurrency = _concurrency(runner, settings, log)
    ports = wanted(runner, components, _serves_page(components, settings))
    refused = refusal(HOST, ports)
    if refused:
        print(refused, file=sys.stderr)
        return 2

    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    try:
        return _serve(runner, settings, components, bridge_wanted, concurrency, stopping, log)
    except PortTaken as error:  # taken after the check above, while the others started
        print(next(port.taken() for port in ports if port.number == error.port), file=sys.stderr)
        return 2


def _serves_page(components: set[str], settings) -> bool:
    """The page needs the API, and hands out dev tokens (jwt)."""
    return {"web", "api"} <= components and settings.auth_mode == "jwt"


def _set_environment(runner) -> str | None:
    """The service's settings the runner decides, in the environment its children inherit;
    a reason to refuse the combination asked for, or None."""
    # Emulators accept any credentials; never override real ones the user has set.
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
    os.environ.setdefault("AWS_REGION", os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    os.environ.setdefault("AWS_DEFAULT_REGION", os.environ["AWS_REGION"])
    if runner.embedded_aws or not os.environ.get("AWS_ENDPOINT_URL"):
        os.environ["AWS_ENDPOINT_URL"] = f"http://{HOST}:{runner.aws_port}"
    os.environ.setdefault("AUTH_MODE", "jwt")
    if runner.storage == "rgw":
        # The gateway notifies RabbitMQ itself, in its own shape; moto keeps the rest.
        if os.environ.setdefault("QUEUE_BACKEND", "amqp") != "amqp":
            return "STORAGE=rgw notifies through RabbitMQ: QUEUE_BACKEND must be amqp"
        os.environ.setdefault("AMQP_EVENT_SHAPE", "ceph")
        # Its topic drops events while the broker is away: the sweeper asks after a queued
        # job within a minute rather than ten.
        os.environ.setdefault("QUEUE_TIMEOUT_SECONDS", "60")
        os.environ["S3_ENDPOINT_URL"] = f"http://{HOST}:{runner.rgw_port}"
    # The runner says so for itself (and its `chalice local` child): only here may the
    # public default secret serve. Settings refuses the marker inside a Lambda function.
    os.environ["LOCAL_RUNNER"] = "1"
    # Receivers on this machine: the local runner's default (CONTRACT.md "Notifications").
    os.environ.setdefault("WEBHOOK_ALLOW_LOOPBACK", "1")
    # The API's access log: a line for every request, not only for errors as in the cloud.
    os.environ.setdefault("LOG_EVERY_REQUEST", "1")
    if "push" in runner.components:  # the API and the worker alike post to the runner's gateway
        os.environ.setdefault("PUSH_URL", f"ws://{HOST}:{runner.push_port}")
        os.environ.setdefault("PUSH_MANAGEMENT_URL", f"http://{HOST}:{runner.push_management_port}")
    return None


def _keep_run_log(runner) -> None:
    from local.runlog import Tee, open_run_log

    try:
        sys.stdout = Tee(sys.stdout, open_run_log(runner.log_file))
    except OSError as error:
        print(f"not keeping the run's log in {runner.log_file} ({error}); `make stats` needs it",
              file=sys.stderr)


def _bridge_wanted(runner, settings) -> bool:
    """Storage events through SQS forwarded to RabbitMQ: with QUEUE_BACKEND=amqp on a storage
    that notifies SQS, by default only on the embedded stack."""
    if settings.queue_backend != "amqp" or runner.storage == "rgw":
        return False
    return runner.embedded_aws if runner.amqp_bridge is None else runner.amqp_bridge


def _concurrency(runner, settings, log) -> int:
    concurrency = worker_concurrency(runner.worker_concurrency or os.cpu_count() or 1, settings,
                                     _available_memory())
    if runner.worker_concurrency and concurrency < runner.worker_concurrency:
        log.warning("worker_concurrency_lowered", asked=runner.worker_concurrency, running=concurrency,
                    reason="each decode may take DECODE_MEMORY_MB")
    return concurrency


def _serve(runner, settings, components: set[str], bridge_wanted: bool, concurrency: int,
           stopping: threading.Event, log) -> int:
    """Every component started, watched until `stopping` is set, then stopped in reverse."""
    from local import services

    rgw = runner.storage == "rgw"
    moto = api = page = None
    running = []  # things with .stop(), stopped in reverse order
    try:
        if rgw:
            running.append(_start_rgw(runner, settings, log))
        if runner.embedded_aws:
            moto = services.start_moto(HOST, runner.aws_port)
            log.info("embedded_aws_started", endpoint=settings.endpoint_url)
        elif not _wait_for_localstack(settings.endpoint_url, log):
            return 1
        clients = _clients(settings)
        stack = _provision(runner, settings, clients, bridge_wanted)
        log.info("stack_provisioned", bucket=stack.bucket, table=stack.table, queue=stack.queue_url)

        if "api" in components:
            api = services.start_api(HOST, runner.api_port, services.child_env({}), pipe=True)
            services.relay(api, sys.stdout.write)
        import app as application

        running += _start_consumers(runner, settings, application, components, clients["sqs"], stack,
                                    concurrency, log)
        if "sweeper" in components:
            running.append(_start_sweeps(settings, application, stopping, log))
        if api is not None:
            _wait_for_api(runner, api)
            if settings.auth_mode == "jwt":
                services.warm_up(f"http://{HOST}:{runner.api_port}", settings.jwt_secret)
        if _serves_page(components, settings):
            page = _start_page(settings, runner)
            running.append(page)
        _say_ready(runner, settings, components, concurrency, api, page)
        return _watch(stopping, api, moto, running[0] if rgw else None, log)
    finally:
        # The Ceph cluster (first when there) goes last: the consumers may still be using it.
        first = running[:1] if rgw else []
        _stop_together(running[len(first):], runner.stop_seconds, log)
        for part in first:
            part.stop()
        services.stop(api)
        services.stop(moto)


_stuck = threading.Event()  # a part did not stop in time: exit without joining its threads


def _stop_together(parts: list, seconds: float, log) -> None:
    threads = [threading.Thread(target=part.stop, name=f"stop-{type(part).__name__}", daemon=True)
               for part in reversed(parts)]
    for thread in threads:
        thread.start()
    end = time.monotonic() + seconds
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))
    late = [thread.name for thread in threads if thread.is_alive()]
    if late:
        _stuck.set()
        log.warning("stop_timed_out", seconds=seconds, parts=late,
                    threads=sorted(t.name for t in threading.enumerate() if t is not threading.current_thread()))


def _clients(settings) -> dict:
    from local import services

    clients = {name: services.aws_client(name, settings.region, settings.endpoint_url)
               for name in ("sqs", "dynamodb")}
    clients["s3"] = services.aws_client("s3", settings.region, settings.storage_endpoint_url)
    return clients


def _provision(runner, settings, clients: dict, bridge_wanted: bool):
    if runner.storage == "rgw":
        return _provision_rgw(settings, clients)
    from local.provision import provision

    # Behind MinIO, storage notifies RabbitMQ itself (localstack/minio sets that up).
    return provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"],
                     sqs_notifications=settings.queue_backend != "amqp" or bridge_wanted)


def _start_consumers(runner, settings, application, components: set[str], sqs, stack,
                     concurrency: int, log) -> list:
    """The push gateway, the storage consumer, the webhook loop and the bridge, as asked."""
    started = []
    if "push" in components:
        started.append(_start_push(runner, application))
    if "worker" in components:
        started.append(_start_worker(settings, application, sqs, stack, concurrency))
    if "webhooks" in components:
        if stack.webhook_queue_url is None:
            log.warning("webhooks_not_delivered", reason="no SQS here for the webhook queue")
        else:
            started.append(_start_webhooks(settings, application, sqs, stack, runner.webhook_concurrency))
    if "bridge" in components:
        started.append(_start_bridge(settings, sqs, stack))
    return started


class _Sweeps:
    """The scheduled sweeps' threads; stop() waits for a sweep under way, so that none is cut
    off by the services it uses stopping."""

    def __init__(self, threads: list[threading.Thread], stopping: threading.Event):
        self._threads, self._stopping = threads, stopping

    def stop(self) -> None:
        self._stopping.set()  # set by a signal, but not when the run ends on a failure
        for thread in self._threads:
            thread.join()


def _start_sweeps(settings, application, stopping: threading.Event, log) -> _Sweeps:
    threads = [threading.Thread(target=_sweep_forever, name=f"sweeper-{interval}", daemon=True,
                                args=(handler, interval, stopping, log))
               for handler, interval in ((application.sweep, settings.sweep_interval_seconds),
                                         (application.sweep_orphans, settings.orphan_scan_interval_seconds))]
    for thread in threads:
        thread.start()
    return _Sweeps(threads, stopping)


def _wait_for_api(runner, api) -> None:
    from local import services

    try:
        services.wait_for_port(HOST, runner.api_port, timeout=60, process=api)
    except RuntimeError:
        ensure_free(HOST, runner.api_port)  # PortTaken: taken since the check
        raise


def _say_ready(runner, settings, components: set[str], concurrency: int, api, page) -> None:
    """The line tests and users wait for."""
    where = f"API http://{HOST}:{runner.api_port}/api/v1  " if api is not None else ""
    if page is not None:
        where += f"page {page.url}  "
    print(f"image-jobs ready: {where}AWS {settings.endpoint_url}  queue {settings.queue_backend}  "
          f"workers {concurrency if 'worker' in components else 0}  "
          f"components {','.join(sorted(components))}", flush=True)


def _watch(stopping: threading.Event, api, moto, rgw_cluster, log) -> int:
    """Until a signal: 0 then, or 1 as soon as a child the runner needs has exited."""
    while not stopping.wait(0.5):
        if api is not None and api.poll() is not None:
            log.error("api_exited", code=api.returncode)
            return 1
        if moto is not None and moto.poll() is not None:
            log.error("embedded_aws_exited", code=moto.returncode)
            return 1
        if rgw_cluster is not None and rgw_cluster.exited():
            log.error("rgw_exited", reason=rgw_cluster.exited())
            return 1
    log.info("stopping")
    return 0


def _start_rgw(runner, settings, log):
    """Ceph's RADOS Gateway (local/rgw.py), with a user whose keys are the runner's."""
    from local import rgw

    rgw.install()
    cluster = rgw.RgwCluster(runner.rgw_port, os.environ["AWS_ACCESS_KEY_ID"],
                             os.environ["AWS_SECRET_ACCESS_KEY"]).start()
    log.info("rgw_started", endpoint=cluster.endpoint, state=str(cluster.directory))
    return cluster


def _provision_rgw(settings, clients):
    """The exchange first (the gateway publishes only to one that exists), then the bucket,
    topic and notification. The topic is not persistent: see local/rgw.py."""
    from chalicelib.adapters.amqp import AmqpChannel, Topology
    from local import services
    from local.provision import provision_rgw

    topology = Topology.from_settings(settings)
    channel = AmqpChannel(settings.amqp_url, topology)
    channel.call(lambda ch: None)  # opening it declares the topology
    channel.close()
    sns = services.aws_client("sns", settings.region, settings.storage_endpoint_url)
    return provision_rgw(settings, clients["sqs"], clients["s3"], sns, clients["dynamodb"],
                         persistent=False)


def _wait_for_localstack(endpoint: str, log) -> bool:
    """EMBEDDED_AWS=0 beside a `make localstack` still starting: provisioning while its init
    hook provisions is a race, so wait until the hook is done. Not LocalStack: go on at once."""
    from local.localstack import LocalStackError, wait_for_init

    try:
        wait_for_init(endpoint, LOCALSTACK_INIT_TIMEOUT,
                      on_waiting=lambda why: log.info("localstack_init_waiting", reason=why))
    except LocalStackError as error:
        log.error("localstack_not_ready", reason=str(error))
        return False
    return True


def worker_concurrency(wanted: int, settings, available_bytes: int | None) -> int:
    """Jobs at once: each may decode in a child of its own up to the memory ceiling, so
    never more of them than the machine's free memory holds (at least one)."""
    from chalicelib.config import MIB

    if not settings.decode_cpu_seconds or available_bytes is None:  # no child, or no /proc
        return wanted
    return max(1, min(wanted, available_bytes // (settings.decode_memory_mb * MIB)))


def _available_memory() -> int | None:
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _start_worker(settings, application, sqs, stack, concurrency: int):
    prepare_worker(application)
    worker = storage_consumer(settings, application, sqs, stack, concurrency)
    worker.start()
    return worker


def prepare_worker(application) -> None:
    """Build the worker now, as the worker function's init does in Lambda (app.prepare_worker):
    the first job then finds the imaging stack imported, the SDK's models loaded and the
    decoding child started (issue 48: the first job took 3-4x a warm one, upload to ready,
    when all that waited for its event)."""
    application.prepare_worker()


def storage_consumer(settings, application, sqs, stack, concurrency: int):
    """The consumer of storage notifications for QUEUE_BACKEND, not yet started. Either way a
    message ends in the worker's one entry (Worker.process_storage_message): the SQS loop
    runs Lambda's handler, which calls it; the AMQP consumer calls it itself."""
    if settings.queue_backend == "amqp":
        from chalicelib.adapters.amqp import Topology
        from local.amqp_worker import AmqpWorker

        # The use cases are built on the first message, as in Lambda.
        return AmqpWorker(settings.amqp_url, Topology.from_settings(settings),
                          lambda body: application.use_cases().worker.process_storage_message(body),
                          concurrency)
    from local.sqs_worker import SqsWorker

    return SqsWorker(sqs, stack.queue_url, stack.queue_arn, settings.region,
                     application.handle_object_created, concurrency,
                     timeout_ms=settings.worker_timeout_seconds * 1000)


def _start_page(settings, runner):
    from local.web import PageServer

    with binding(runner.web_port):
        page = PageServer(HOST, runner.web_port, f"http://{HOST}:{runner.api_port}/api/v1",
                          settings.presign_endpoint_url, settings.jwt_secret, runner.web_subject,
                          settings.max_upload_bytes, settings.multipart_min_bytes,
                          tuple(fmt.value for fmt in settings.enabled_formats),
                          push_url=settings.push_url or None)
    page.start()
    return page


def _start_webhooks(settings, application, sqs, stack, concurrency: int):
    """Deliveries from their own queue, as Lambda's deliver_webhook gets them; a failed one
    has set its own backoff (up to SQS's 12 hours), which the loop must not shorten."""
    from local.sqs_worker import SqsWorker

    worker = SqsWorker(sqs, stack.webhook_queue_url, stack.webhook_queue_arn, settings.region,
                       application.deliver_webhook, concurrency, max_backoff=43200,
                       name="webhooks")
    worker.start()
    return worker


def _start_push(runner, application):
    """API Gateway's WebSocket API, with the app's own handlers (local/push_gateway.py)."""
    from local.push_gateway import PushGateway

    gateway = PushGateway(HOST, runner.push_port, runner.push_management_port, application.push_connect,
                          application.push_disconnect)
    gateway.start()
    return gateway


def _start_bridge(settings, sqs, stack):
    from chalicelib.adapters.amqp import AmqpChannel, AmqpPublisher, Topology
    from local.bridge import SqsToAmqpBridge

    topology = Topology.from_settings(settings)
    bridge = SqsToAmqpBridge(sqs, stack.queue_url,
                             AmqpPublisher(AmqpChannel(settings.amqp_url, topology), topology))
    bridge.start()
    return bridge


def scheduled_event() -> dict:
    """The EventBridge event a Lambda schedule passes."""
    return {
        "version": "0", "id": str(uuid.uuid4()), "detail-type": "Scheduled Event",
        "source": "aws.events", "account": "000000000000",
        "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": os.environ.get("AWS_REGION", "us-east-1"), "resources": [], "detail": {},
    }


def _sweep_forever(handler, interval: int, stopping: threading.Event, log) -> None:
    """What @app.schedule does in the cloud: the same handler, every `interval` seconds."""
    while not stopping.wait(interval):
        try:
            handler(scheduled_event(), None)
        except Exception:
            log.exception("sweep_failed")


if __name__ == "__main__":
    code = main()
    if _stuck.is_set():
        import logging

        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # a worker pool's thread still in its step would be joined at exit
    sys.exit(code)
