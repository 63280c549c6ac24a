"""One rejected webhook event among good ones: when does each good one arrive?

Issue 23's simulation, around the real `Webhooks.deliver` over the in-memory fakes with a
fake clock, and a queue that behaves as SQS does for it: a received message is hidden for
the queue's visibility timeout unless the handler sets another, a handler that returns
deletes it, DelaySeconds stops at 15 minutes, and a message received more than the redrive
policy's maxReceiveCount times is dead-lettered without reaching the handler.

One owner; their receiver refuses one job's body (HTTP 500, its own bug on that body) and
takes every other. The rejected event is queued first, then the good ones a second apart;
one delivery runs at a time. Run it on any checkout (it adapts to `deliver`'s signature):

    .venv/bin/python benchmarks/webhook_fairness.py [--good 20] [--status 500]
"""
from __future__ import annotations

import argparse
import heapq
import inspect
import itertools
import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import logging  # noqa: E402

from chalicelib.config import Settings  # noqa: E402
from chalicelib.domain.errors import PoisonMessage, RetryLater  # noqa: E402
from chalicelib.domain.events import ObjectCreated  # noqa: E402
from chalicelib.usecases import UseCases  # noqa: E402
from chalicelib.usecases.context import Context  # noqa: E402
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, FakeWebhookStore, ListMetrics  # noqa: E402
from tests.images import jpeg  # noqa: E402
from chalicelib.runtime import logs  # noqa: E402

logs.configure(logging.CRITICAL)  # the table is the output, not the service's lines

URL = "https://hooks.example.com/images"
VISIBILITY_SECONDS = 180   # infra/template.yaml, WebhookQueue
MAX_RECEIVES = 8           # its redrive policy
MAX_DELAY_SECONDS = 900    # SQS's DelaySeconds limit
START = datetime(2030, 1, 1, tzinfo=timezone.utc)


class SimQueue:
    """The webhook queue as SQS keeps it, on the simulation's clock."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self.visible: list = []  # heap of (visible at, seq, message id)
        self.messages: dict[int, dict] = {}
        self.dead: list[str] = []
        self._ids = itertools.count()

    def now(self) -> float:
        return (self.clock() - START).total_seconds()

    def send(self, event, delay_seconds: int = 0) -> None:
        self._put(event.to_json(), self.now() + min(MAX_DELAY_SECONDS, delay_seconds))

    def _put(self, body: str, at: float) -> None:
        mid = next(self._ids)
        self.messages[mid] = {"body": body, "receives": 0, "at": at}
        heapq.heappush(self.visible, (at, mid, mid))

    def retry_later(self, receipt: str, seconds: int) -> None:
        self._hide(int(receipt), self.now() + seconds)

    def dead_letter(self, event) -> None:
        self.dead.append(event.job_id)

    def _hide(self, mid: int, at: float) -> None:
        self.messages[mid]["at"] = at
        heapq.heappush(self.visible, (at, next(self._ids), mid))

    def receive(self):
        """The next message to become visible, received: (message id, body, receive count)."""
        while self.visible:
            at, _, mid = heapq.heappop(self.visible)
            message = self.messages.get(mid)
            if message is None or message["at"] != at:
                continue  # deleted, or hidden again since
            self.clock.now = max(self.clock.now, START + timedelta(seconds=at))
            message["receives"] += 1
            if message["receives"] > MAX_RECEIVES:
                self.dead.append(json.loads(message["body"])["job_id"])
                del self.messages[mid]
                continue
            self._hide(mid, at + VISIBILITY_SECONDS)
            return mid, message["body"], message["receives"]
        return None

    def delete(self, mid: int) -> None:
        self.messages.pop(mid, None)


class Receiver:
    """Refuses one job's body with `status`; takes every other. Records each call's time."""

    def __init__(self, clock: Clock, status: int):
        self.clock, self.status = clock, status
        self.bad_job = None
        self.calls: dict[str, list[float]] = {}
        self.delivered: dict[str, float] = {}

    def post(self, url, addresses, headers, body, timeout) -> int:
        job_id = json.loads(body)["job_id"]
        at = (self.clock() - START).total_seconds()
        self.calls.setdefault(job_id, []).append(at)
        if job_id == self.bad_job:
            return self.status
        self.delivered.setdefault(job_id, at)
        return 200


def simulate(good: int, status: int) -> dict:
    clock = Clock(START)
    queue = SimQueue(clock)
    receiver = Receiver(clock, status)
    ctx = Context(settings=Settings(), jobs=FakeJobStore(), objects=FakeObjectStore(), clock=clock,
                  metrics=ListMetrics(), webhooks=FakeWebhookStore(), webhook_queue=queue,
                  webhook_sender=receiver, resolve=lambda host, port: ["93.184.215.14"])
    uc = UseCases(ctx)
    uc.webhooks.register("alice", URL)
    queued_at, order = {}, []
    for n in range(good + 1):  # job n is ready, and its event queued, n seconds in
        clock.now = START + timedelta(seconds=n)
        accepted = uc.uploads.accept_upload("alice", jpeg())
        uc.worker.handle_object_created(ObjectCreated(ctx.settings.bucket, accepted.job.original_key, 1))
        queued_at[accepted.job.job_id] = n
        order.append(accepted.job.job_id)
    receiver.bad_job = order[0]
    clock.now = START  # deliveries replay from the first event's queuing
    takes_count = "receive_count" in inspect.signature(uc.webhooks.deliver).parameters
    receives: dict[str, int] = {}
    while (received := queue.receive()) is not None:
        mid, body, count = received
        job_id = json.loads(body)["job_id"]
        receives[job_id] = receives.get(job_id, 0) + 1
        try:
            if takes_count:
                uc.webhooks.deliver(body, count, str(mid))
            else:
                uc.webhooks.deliver(body, str(mid))
        except RetryLater:
            continue  # it set its own visibility
        except PoisonMessage:
            pass
        except Exception:
            continue  # Lambda failed: back after the visibility timeout
        queue.delete(mid)
    return dict(order=order, queued_at=queued_at, receiver=receiver, receives=receives, dead=queue.dead)


def hms(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--good", type=int, default=20)
    parser.add_argument("--status", type=int, default=500, help="the answer to the rejected event")
    args = parser.parse_args()
    run = simulate(args.good, args.status)
    receiver = run["receiver"]
    print(f"{'event':>7} {'queued':>8} {'delivered':>10} {'late by':>9} {'HTTP calls':>10} {'receives':>8}  (receives: of all its copies)")
    lateness = []
    for n, job_id in enumerate(run["order"]):
        name = "reject" if n == 0 else f"good{n}"
        delivered = receiver.delivered.get(job_id)
        if n == 0:
            fate = "dead-letter" if job_id in run["dead"] else "-"
        elif delivered is None:
            fate = "dead-letter" if job_id in run["dead"] else "never"
        else:
            fate = hms(delivered)
            lateness.append(delivered - run["queued_at"][job_id])
        late = hms(lateness[-1]) if n and delivered is not None else "-"
        print(f"{name:>7} {hms(run['queued_at'][job_id]):>8} {fate:>10} {late:>9} "
              f"{len(receiver.calls.get(job_id, [])):>10} {run['receives'].get(job_id, 0):>8}")
    good = len(run["order"]) - 1
    on_time = sum(1 for s in lateness if s < 60)
    print(f"\ngood events delivered: {len(lateness)}/{good}, within a minute: {on_time}/{good}, "
          f"latest: {hms(max(lateness)) if lateness else '-'}; dead-lettered: {len(run['dead'])} "
          f"({'the rejected one' if run['dead'] == [run['order'][0]] else ', '.join(run['dead']) or 'none'})")


if __name__ == "__main__":
    main()
