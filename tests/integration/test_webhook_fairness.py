"""A slow receiver's share, across instances: several delivery instances (each with the
service's own composition root and clients) read the webhook queue on moto's server and
deliver to a real HTTP receiver on loopback, whose endpoint for alice answers 200 only after
some seconds. However many of alice's events are ahead of it, bob's event is delivered
within the first round of alice's slow answers, and her endpoint never has more than its
slots in flight."""
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from chalicelib.adapters.dynamo_webhooks import DynamoDeliverySlots
from chalicelib.adapters.dynamo_table import DynamoTable
from chalicelib.bootstrap import build_use_cases
from chalicelib.domain.errors import RetryLater
from chalicelib.domain.events import ObjectCreated
from tests.fakes import FakeDeliverySlots
from tests.images import jpeg

INSTANCES = 4        # delivery functions at once
SLOTS = 2            # WEBHOOK_RECEIVER_SLOTS
SLOW_SECONDS = 3.0   # alice's endpoint answers 200 after this
BACKLOG = 8          # alice's events queued before bob's


class Receiver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.lock = threading.Lock()
        self.in_flight = {"alice": 0, "bob": 0}
        self.most_in_flight = {"alice": 0, "bob": 0}
        self.answered: dict[str, list[float]] = {"alice": [], "bob": []}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        server: Receiver = self.server
        owner = self.path.strip("/")
        self.rfile.read(int(self.headers["Content-Length"]))
        with server.lock:
            server.in_flight[owner] += 1
            server.most_in_flight[owner] = max(server.most_in_flight[owner], server.in_flight[owner])
        try:
            if owner == "alice":
                time.sleep(SLOW_SECONDS)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
        finally:
            with server.lock:
                server.in_flight[owner] -= 1
                server.answered[owner].append(time.monotonic())

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_slow_receiver_holds_only_its_slots_and_another_owners_event_goes_out_at_once(
        settings_for, receiver):
    from local.provision import provision
    from local.services import aws_client

    settings = settings_for(webhook_queue_name=f"hooks-{uuid.uuid4().hex[:10]}", webhook_allow_loopback=True,
                            webhook_receiver_slots=SLOTS, webhook_max_concurrency=INSTANCES + 1)
    sqs = aws_client("sqs", settings.region, settings.endpoint_url)
    provision(settings, sqs, aws_client("s3", settings.region, settings.endpoint_url),
              aws_client("dynamodb", settings.region, settings.endpoint_url))
    queue_url = sqs.get_queue_url(QueueName=settings.webhook_queue_name)["QueueUrl"]
    port = receiver.server_address[1]

    # Alice's backlog is queued first, then bob's one event: each as its job became ready.
    uc = build_use_cases(settings)
    for owner in ("alice", "bob"):
        uc.webhooks.register(owner, f"http://127.0.0.1:{port}/{owner}")
    for owner in ["alice"] * BACKLOG + ["bob"]:
        accepted = uc.uploads.accept_upload(owner, jpeg())
        uc.worker.handle_object_created(ObjectCreated(settings.bucket, accepted.job.original_key, 1))

    # The delivery instances: each its own composition root (clients, stores), as Lambdas are.
    instances = [build_use_cases(settings) for _ in range(INSTANCES)]
    done = threading.Event()
    errors: list[BaseException] = []

    def deliver_from_the_queue(use_cases):
        queue = aws_client("sqs", settings.region, settings.endpoint_url)
        while not done.is_set():
            messages = queue.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=1,
                                             WaitTimeSeconds=1).get("Messages", [])
            for message in messages:
                try:
                    use_cases.webhooks.deliver(message["Body"], message["ReceiptHandle"])
                except RetryLater:
                    continue  # it set its own visibility
                except BaseException as error:  # noqa: BLE001 - reported by the test
                    errors.append(error)
                    continue
                queue.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])

    started = time.monotonic()
    threads = [threading.Thread(target=deliver_from_the_queue, args=(i,), daemon=True) for i in instances]
    for thread in threads:
        thread.start()
    deadline = started + 90
    while time.monotonic() < deadline and (len(receiver.answered["alice"]) < BACKLOG
                                            or not receiver.answered["bob"]):
        time.sleep(0.2)
    done.set()
    for thread in threads:
        thread.join(timeout=10)

    assert not errors, errors
    assert receiver.answered["bob"], "bob's event never arrived"
    bob = receiver.answered["bob"][0]
    alice = sorted(receiver.answered["alice"])
    # Before the slots every instance sat in alice's slow answers, and bob's event waited
    # behind BACKLOG / INSTANCES rounds of them; now it goes out within the first round
    # (the time the free instances take to set alice's queued events aside).
    assert bob < alice[SLOTS], (f"bob's event waited {bob - started:.1f} s, after "
                                f"{sum(1 for a in alice if a < bob)} of alice's slow answers")
    assert receiver.most_in_flight["alice"] <= SLOTS
    assert len(alice) == BACKLOG, "alice's backlog was not all delivered"


NOW = datetime(2026, 12, 1, 10, 0, 0, 417230, tzinfo=timezone.utc)
LATER = NOW + timedelta(seconds=10)


@pytest.fixture(params=["fake", "dynamo"])
def delivery_slots(request):
    if request.param == "fake":
        return FakeDeliverySlots()
    settings, _, _ = request.getfixturevalue("stack")
    return DynamoDeliverySlots(DynamoTable(settings.table, settings.region, settings.endpoint_url))


def test_delivery_slots_count_per_receiver_and_remember_their_last_holds(delivery_slots):
    slots = delivery_slots
    assert slots.recent_hold("owner/alice", 2) is None
    first, second = (slots.take("owner/alice", f"h{i}", LATER, NOW, 2) for i in range(2))
    assert {first, second} == {0, 1}
    assert slots.take("owner/alice", "h2", LATER, NOW, 2) is None
    assert slots.take("owner/bob", "b", LATER, NOW, 2) is not None  # another receiver's own
    slots.give_back("owner/alice", first, "someone-else", 9.0)  # not its holder: nothing
    assert slots.take("owner/alice", "h2", LATER, NOW, 2) is None
    slots.give_back("owner/alice", first, "h0" if first == 0 else "h1", 4.5)
    slots.give_back("owner/alice", first, "h0" if first == 0 else "h1", 4.5)  # idempotent
    assert slots.recent_hold("owner/alice", 2) == pytest.approx(4.5)
    assert slots.take("owner/alice", "h3", LATER, NOW, 2) == first  # free again
    # A holder that never gave back loses its slot once its time is over.
    assert slots.take("owner/alice", "h4", LATER + timedelta(seconds=10),
                      LATER + timedelta(seconds=1), 2) is not None
