"""One rejected webhook event among good ones, and one slow receiver among fast ones: when
does each good event arrive?

Issue 23's simulation, around the real `Webhooks.deliver` over the in-memory fakes with a
fake clock, and a queue that behaves as SQS does for it: a received message is hidden for
the queue's visibility timeout unless the handler sets another, a handler that returns
deletes it, DelaySeconds stops at 15 minutes, and a message received more than the redrive
policy's maxReceiveCount times is dead-lettered without reaching the handler.

One owner; their receiver refuses one job's body (HTTP 500, its own bug on that body) and
takes every other. The rejected event is queued first, then the good ones a second apart;
one delivery runs at a time. Run it on any checkout (it adapts to `deliver`'s signature).

Then issue 32's slow receiver: alice's endpoint answers 200 after 4.9 s and has a backlog
(500 events); bob's single event is queued a second later. WEBHOOK_MAX_CONCURRENCY delivery
functions run the real `deliver` at once on a virtual clock (threads that sleep on it; it
jumps once all of them sleep), each run costing --overhead seconds besides its call. Two
rows side by side: before (nothing bounds a receiver: UnboundedSlots, as the code before
issue 32) and after (WEBHOOK_RECEIVER_SLOTS slots per receiver, and turns).

    .venv/bin/python benchmarks/webhook_fairness.py [--good 20] [--status 500]
        [--backlog 500] [--slow-seconds 4.9] [--overhead 0.05]
"""
from __future__ import annotations

import argparse
import heapq
import inspect
import itertools
import json
import sys
import threading
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import logging  # noqa: E402

from chalicelib.config import Settings  # noqa: E402
from chalicelib.domain.errors import PoisonMessage, RetryLater  # noqa: E402
from chalicelib.domain.events import ObjectCreated  # noqa: E402
from chalicelib.domain.webhooks import WebhookEvent
from chalicelib.usecases.announce import event_id  # noqa: E402
from chalicelib.usecases import UseCases  # noqa: E402
from tests.fakes import (  # noqa: E402
    Clock, FakeJobStore, FakeObjectStore, FakeWebhookStore, ListMetrics, fake_context)
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
    ctx = fake_context(settings=Settings(), jobs=FakeJobStore(), objects=FakeObjectStore(), clock=clock,
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


class VirtualTime:
    """The simulation's clock for `parties` threads: each sleeps on it, and once all of them
    sleep it jumps to the earliest wake-up, so that seconds of waiting cost none."""

    def __init__(self, parties: int):
        self.t = 0.0
        self.parties = parties
        self._wake: dict[int, float] = {}
        self._cv = threading.Condition()

    def __call__(self) -> datetime:
        return START + timedelta(seconds=self.t)

    def sleep(self, seconds: float) -> None:
        with self._cv:
            me = threading.get_ident()
            self._wake[me] = self.t + max(0.0, seconds)
            while True:
                if len(self._wake) >= self.parties:
                    self.t = max(self.t, min(self._wake.values()))
                    self._cv.notify_all()
                if self.t >= self._wake[me]:
                    break
                self._cv.wait()
            del self._wake[me]

    def leave(self) -> None:
        with self._cv:
            self.parties -= 1
            self._cv.notify_all()


class SharedQueue:
    """The webhook queue as SQS keeps it, read by several functions at once, on virtual time."""

    def __init__(self, vt: VirtualTime):
        self.vt = vt
        self._lock = threading.Lock()
        self._heap: list = []
        self._at: dict[int, float] = {}
        self._bodies: dict[int, str] = {}
        self._ids = itertools.count()

    def send(self, event, delay_seconds: int = 0) -> None:
        with self._lock:
            mid = next(self._ids)
            self._bodies[mid] = event.to_json()
            self._show(mid, self.vt.t + min(MAX_DELAY_SECONDS, delay_seconds))

    def _show(self, mid: int, at: float) -> None:
        self._at[mid] = at
        heapq.heappush(self._heap, (at, next(self._ids), mid))

    def retry_later(self, receipt: str, seconds: int) -> None:
        with self._lock:
            self._show(int(receipt), self.vt.t + seconds)

    def dead_letter(self, event) -> None:
        pass

    def receive(self):
        """(message id, body) of a message visible now, hidden for the visibility timeout;
        else the time the next one shows (None: the queue is empty)."""
        with self._lock:
            while self._heap:
                at, _, mid = self._heap[0]
                if self._at.get(mid) != at:
                    heapq.heappop(self._heap)
                    continue
                if at > self.vt.t:
                    return at
                heapq.heappop(self._heap)
                self._show(mid, self.vt.t + VISIBILITY_SECONDS)
                return mid, self._bodies[mid]
            return None

    def delete(self, mid: int) -> None:
        with self._lock:
            self._at.pop(mid, None)


class SlowReceiver:
    """Alice's endpoint answers 200 after `slow` seconds, everyone else's after 0.2 s."""

    def __init__(self, vt: VirtualTime, slow: float):
        self.vt, self.slow = vt, slow
        self.delivered: dict[str, float] = {}
        self._lock = threading.Lock()
        self.in_flight: dict[str, int] = {}
        self.most_in_flight: dict[str, int] = {}

    def post(self, url, addresses, headers, body, timeout) -> int:
        owner = "alice" if url.endswith("/alice") else "other"
        with self._lock:
            self.in_flight[owner] = self.in_flight.get(owner, 0) + 1
            self.most_in_flight[owner] = max(self.most_in_flight.get(owner, 0), self.in_flight[owner])
        self.vt.sleep(self.slow if owner == "alice" else 0.2)
        with self._lock:
            self.in_flight[owner] -= 1
            self.delivered.setdefault(json.loads(body)["job_id"], self.vt.t)
        return 200


class UnboundedSlots:
    """DeliverySlots that bound nothing: every delivery gets a slot, none is ever deferred."""

    def take(self, receiver, holder, until, now, slots):
        return 0

    def give_back(self, receiver, slot, holder, held_seconds=0.0):
        pass

    def recent_hold(self, receiver, slots):
        return None


def simulate_slow(bounded: bool, backlog: int, slow: float, overhead: float) -> dict:
    """Alice's `backlog` events queued at 0 s, bob's one at 1 s, delivered by the functions."""
    from tests.fakes import FakeDeliverySlots, FakeRateStore

    settings = Settings()
    functions = settings.webhook_max_concurrency
    vt = VirtualTime(functions)
    queue = SharedQueue(vt)
    receiver = SlowReceiver(vt, slow)
    ctx = fake_context(settings=settings, jobs=FakeJobStore(), objects=FakeObjectStore(), clock=vt,
                       metrics=ListMetrics(), webhooks=FakeWebhookStore(), webhook_queue=queue,
                       webhook_sender=receiver, resolve=lambda host, port: ["93.184.215.14"],
                       delivery_slots=FakeDeliverySlots() if bounded else UnboundedSlots(),
                       webhook_turns=FakeRateStore())
    uc = UseCases(ctx)
    ready = {}
    for owner in ("alice", "bob"):
        uc.webhooks.register(owner, f"{URL}/{owner}")
        accepted = uc.uploads.accept_upload(owner, jpeg())
        uc.worker.handle_object_created(ObjectCreated(settings.bucket, accepted.job.original_key, 1))
        ready[owner] = ctx.jobs.get(accepted.job.job_id)
    queue._heap.clear()
    queue._at.clear()  # the two real events: the simulation queues its own
    alice_jobs = []
    for n in range(backlog):
        job = replace(ready["alice"], job_id=f"{ready['alice'].job_id[:-6]}{n:06d}")
        ctx.jobs.items[job.job_id] = job
        alice_jobs.append(job.job_id)
        queue.send(WebhookEvent(event_id(job), "alice", job.job_id))
    bob = ready["bob"]
    vt.t = 1.0
    queue.send(WebhookEvent(event_id(bob), "bob", bob.job_id))
    vt.t = 0.0
    runs = [0]
    wanted = set(alice_jobs) | {bob.job_id}

    def function():
        try:
            while not wanted <= receiver.delivered.keys():
                received = queue.receive()
                if not isinstance(received, tuple):
                    vt.sleep((received - vt.t) if received is not None else 1.0)
                    continue
                mid, body = received
                runs[0] += 1
                try:
                    uc.webhooks.deliver(body, str(mid))
                    queue.delete(mid)
                except RetryLater:
                    pass  # it set its own visibility
                vt.sleep(overhead)
        finally:
            vt.leave()

    threads = [threading.Thread(target=function) for _ in range(functions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return dict(bob=receiver.delivered[bob.job_id] - 1.0,
                alice_last=max(receiver.delivered[j] for j in alice_jobs),
                runs=runs[0], most=receiver.most_in_flight.get("alice", 0), functions=functions,
                slots=settings.receiver_slots)


def slow_rows(backlog: int, slow: float, overhead: float) -> None:
    print(f"\nslow receiver: alice answers 200 after {slow} s with {backlog} events queued; bob's one "
          f"event queued 1 s later; each function run costs {overhead} s besides its call")
    print(f"{'policy':>34} {'bob late by':>11} {'alice done':>10} {'runs':>6} {'alice in flight':>15}")
    rows = {}
    for bounded in (False, True):
        run = simulate_slow(bounded, backlog, slow, overhead)
        name = (f"after: {run['slots']} slots per receiver" if bounded
                else f"before: unbounded ({run['functions']} functions)")
        rows[bounded] = run
        print(f"{name:>34} {run['bob']:>10.1f}s {hms(run['alice_last']):>10} {run['runs']:>6} "
              f"{run['most']:>9} of {run['functions']}")
    before, after = rows[False], rows[True]
    print(f"bob's event: {before['bob'] / max(after['bob'], 0.001):.0f} times sooner; alice's backlog "
          f"takes {after['alice_last'] / before['alice_last']:.1f} times as long, with "
          f"{after['runs'] / before['runs']:.1f} times the function runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--good", type=int, default=20)
    parser.add_argument("--status", type=int, default=500, help="the answer to the rejected event")
    parser.add_argument("--backlog", type=int, default=500, help="the slow receiver's events queued")
    parser.add_argument("--slow-seconds", type=float, default=4.9)
    parser.add_argument("--overhead", type=float, default=0.05, help="seconds a function run costs besides its call")
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


    slow_rows(args.backlog, args.slow_seconds, args.overhead)


if __name__ == "__main__":
    main()
