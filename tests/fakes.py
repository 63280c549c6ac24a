"""In-memory stores implementing the ports with the same conditional semantics."""
from __future__ import annotations

import dataclasses
import hashlib
import math
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Optional

from chalicelib.domain.errors import (BucketMoved, ConditionFailed, FileTooLarge, IdempotencyKeyTaken, InvalidRequest,
                                      QuotaFull, TransientError)
from chalicelib.domain.jobs import Job, JobObjects, JobStatus, shard_key, sweep_key
from chalicelib.domain.idempotency import IdempotencyRecord
from chalicelib.domain.listing import ListCursor, OwnedPage
from chalicelib.domain.storage import PresignedPost, PresignedPut, ScanPoint, StoredObject, StoredPart
from chalicelib.domain.webhooks import Webhook, WebhookEvent

if TYPE_CHECKING:  # tests/unit/test_cold_path.py watches what a GET imports, with these fakes
    from chalicelib.domain.events import ObjectCreated
    from chalicelib.usecases.context import Context


class FakeJobStore:
    def __init__(self):
        self.items: dict[str, Job] = {}
        self.idempotency: dict[str, IdempotencyRecord] = {}
        self.owners: dict[str, set[str]] = {}
        self.points: dict[str, ScanPoint] = {}
        self.contents: dict[tuple[str, str], tuple[str, datetime]] = {}
        self._lock = threading.Lock()
        self.down = False

    def _check(self):
        if self.down:
            raise TransientError("job table unavailable")

    def _current(self, job_id: str) -> Job:
        current = self.items.get(job_id)
        if current is None:
            raise ConditionFailed()
        return current

    def create(self, job: Job, quota: int) -> None:
        with self._lock:
            self._check()
            self._create(job, quota)

    def create_with_key(self, job: Job, record: IdempotencyRecord, now: datetime, quota: int) -> None:
        with self._lock:
            self._check()
            held = self.idempotency.get(record.scope)
            if held is not None and now < held.expires_at:
                raise IdempotencyKeyTaken()
            self._create(job, quota)
            self.idempotency[record.scope] = record

    def _create(self, job: Job, quota: int) -> None:
        if job.job_id in self.items:
            raise ConditionFailed()
        slots = self.owners.setdefault(job.owner, set())
        if len(slots) >= quota:
            raise QuotaFull()
        slots.add(job.job_id)
        self.items[job.job_id] = job

    def active_jobs(self, owner: str) -> set[str]:
        self._check()
        return set(self.owners.get(owner, ()))

    def release_place(self, owner: str, job_id: str) -> None:
        with self._lock:
            self._check()
            self.owners.get(owner, set()).discard(job_id)

    def get_idempotency(self, scope: str) -> Optional[IdempotencyRecord]:
        self._check()
        return self.idempotency.get(scope)

    def release_idempotency(self, scope: str, job_id: str) -> None:
        with self._lock:
            self._check()
            if scope in self.idempotency and self.idempotency[scope].job_id == job_id:
                del self.idempotency[scope]

    def same_content(self, owner: str, sha256: str) -> Optional[str]:
        self._check()
        noted = self.contents.get((owner, sha256))
        return None if noted is None else noted[0]

    def note_content(self, owner: str, sha256: str, job_id: str, expires_at: datetime) -> None:
        self._check()
        self.contents[owner, sha256] = (job_id, expires_at)

    def get(self, job_id: str) -> Optional[Job]:
        self._check()
        return self.items.get(job_id)

    def objects_of(self, job_ids: list[str]) -> dict[str, JobObjects]:
        self._check()
        with self._lock:
            return {i: JobObjects.of(self.items[i]) for i in job_ids if i in self.items}

    def due(self, status: JobStatus, now: datetime, limit: int, *, shard: int) -> list[Job]:
        """As the table's index: the shard's key derived from status and id as the table's
        writes derive it."""
        self._check()
        key = shard_key(status, shard)
        with self._lock:
            jobs = list(self.items.values())
        found = [j for j in jobs
                 if sweep_key(j.status, j.job_id) == key and j.sweep_at is not None and j.sweep_at <= now]
        return sorted(found, key=lambda j: j.sweep_at)[:limit]

    def owned(self, owner: str, limit: int, after: Optional[ListCursor] = None,
              created_after: Optional[datetime] = None,
              created_before: Optional[datetime] = None) -> OwnedPage:
        """As the owner index: newest first, ties by job id (DynamoDB keeps its own order)."""
        self._check()
        with self._lock:
            jobs = [j for j in self.items.values() if j.owner == owner
                    and (created_after is None or j.created_at >= created_after)
                    and (created_before is None or j.created_at <= created_before)]
        jobs.sort(key=lambda j: (j.created_at, j.job_id), reverse=True)
        if after is not None:
            jobs = [j for j in jobs if (j.created_at, j.job_id) < (after.created_at, after.job_id)]
        page = jobs[:limit]
        last = ListCursor(page[-1].created_at, page[-1].job_id) if page else None
        return OwnedPage(jobs=page, last=last, more=len(jobs) > limit)

    def move(self, job: Job, from_status: JobStatus) -> None:
        with self._lock:
            self._check()
            current = self._current(job.job_id)
            if current.status is not from_status or current.attempt != job.attempt:
                raise ConditionFailed()
            self.items[job.job_id] = job

    def claim(self, job_id: str, now: datetime, lease: timedelta, max_attempts: int,
              source=None) -> Job:
        with self._lock:
            self._check()
            job = self._current(job_id)
            if not job.claimable(now, max_attempts):
                raise ConditionFailed()
            claimed = dataclasses.replace(
                job, status=JobStatus.PROCESSING, attempt=job.attempt + 1,
                lease_expires_at=now + lease, sweep_at=now + lease, updated_at=now,
                source=job.source if source is None else source,
            )
            self.items[job_id] = claimed
            return claimed

    def _held_by(self, job_id: str, attempt: int) -> Job:
        current = self._current(job_id)
        if current.status is not JobStatus.PROCESSING or current.attempt != attempt:
            raise ConditionFailed()
        return current

    def release_lease(self, job_id: str, attempt: int, now: datetime) -> None:
        with self._lock:
            self._check()
            current = self._held_by(job_id, attempt)
            self.items[job_id] = dataclasses.replace(current, lease_expires_at=now, sweep_at=now, updated_at=now)

    def finish_attempt(self, job: Job, attempt: int) -> None:
        with self._lock:
            self._check()
            self._held_by(job.job_id, attempt)
            self.items[job.job_id] = job

    def update_if_unchanged(self, job: Job, seen: Job) -> None:
        with self._lock:
            self._check()
            current = self._current(job.job_id)
            if current.status is not seen.status or current.updated_at != seen.updated_at:
                raise ConditionFailed()
            self.items[job.job_id] = job

    def delete(self, job_id: str) -> None:
        with self._lock:
            self._check()
            self.items.pop(job_id, None)

    def delete_many(self, job_ids: list[str]) -> None:
        for job_id in job_ids:
            self.delete(job_id)

    def scan_points(self, names: list[str]) -> dict[str, ScanPoint]:
        self._check()
        with self._lock:
            return {name: self.points.get(name, ScanPoint()) for name in names}

    def save_scan_point(self, name: str, point: ScanPoint) -> None:
        with self._lock:
            self._check()
            self.points[name] = point


class FakeObjectStore:
    def __init__(self, clock=None, on_created=None):
        self.objects: dict[str, tuple[bytes, str]] = {}
        self.modified: dict[str, datetime] = {}
        self.cache_controls: dict[str, Optional[str]] = {}
        self.clock = clock
        self.down = False
        # Storage's object-created notification: called with the key after each put.
        self.on_created = on_created
        self.uploads: dict[str, tuple[str, str, dict[int, bytes]]] = {}
        self.upload_started: dict[str, datetime] = {}
        self.next_upload = 0

    def put(self, key: str, data: bytes, content_type: str, cache_control: Optional[str] = None,
            began: Optional[datetime] = None) -> None:
        """began: when the write began, which S3 stamps as Last-Modified (a multipart
        upload's initiation; a long PUT's start); default now."""
        if self.down:
            raise TransientError("storage unavailable")
        self.objects[key] = (data, content_type)
        self.cache_controls[key] = cache_control
        self.modified[key] = began or self._now()
        if self.on_created is not None:
            self.on_created(key)

    def _now(self) -> datetime:
        return self.clock() if self.clock is not None else datetime.now(timezone.utc)

    def copy(self, source_key: str, key: str) -> None:
        if self.down:
            raise TransientError("storage unavailable")
        data, content_type = self.objects[source_key]
        self.copied = getattr(self, "copied", 0) + 1
        self.put(key, data, content_type, self.cache_controls.get(source_key))

    def head(self, key: str) -> Optional[StoredObject]:
        if self.down:
            raise TransientError("storage unavailable")
        if key not in self.objects:
            return None
        return StoredObject(size=len(self.objects[key][0]), last_modified=self.modified[key],
                            cache_control=self.cache_controls.get(key))

    def get(self, key: str, max_bytes: int) -> bytes:
        if self.down:
            raise TransientError("storage unavailable")
        data, _ = self.objects[key]
        if len(data) > max_bytes:
            raise FileTooLarge()
        return data

    def delete(self, key: str) -> None:
        if self.down:
            raise TransientError("storage unavailable")
        self.objects.pop(key, None)
        self.modified.pop(key, None)

    def delete_many(self, keys: list[str]) -> None:
        for key in keys:
            self.delete(key)

    def presign_get(self, key: str, expires_in: int, signed_at: Optional[datetime] = None) -> str:
        signed = "" if signed_at is None else f"&signed={signed_at:%Y%m%dT%H%M%SZ}"
        return f"https://storage.test/{key}?expires={expires_in}{signed}"

    def presign_post(self, key: str, content_type: str, max_size: int, expires_in: int,
                     cache_control: Optional[str] = None) -> PresignedPost:
        return PresignedPost(url="https://storage.test/bucket", fields={
            "key": key, "Content-Type": content_type, "policy": f"1-{max_size}-{expires_in}"})

    def presign_put(self, key: str, content_type: str, size: int, sha256, expires_in: int,
                    cache_control: Optional[str] = None) -> PresignedPut:
        headers = {"Content-Type": content_type, "Content-Length": str(size)}
        if sha256 is not None:
            headers["x-amz-checksum-sha256"] = sha256
        return PresignedPut(url=f"https://storage.test/{key}?put&expires={expires_in}", headers=headers)

    # Multipart uploads: upload id -> (key, content type, {part number: bytes}).
    def start_multipart(self, key: str, content_type: str, cache_control: Optional[str] = None) -> str:
        if self.down:
            raise TransientError("storage unavailable")
        self.next_upload += 1
        upload_id = f"upload-{self.next_upload}"
        self.uploads[upload_id] = (key, content_type, {})
        self.upload_started[upload_id] = self._now()
        return upload_id

    def presign_part(self, key: str, upload_id: str, number: int, size: int, expires_in: int) -> str:
        return (f"https://storage.test/{key}?uploadId={upload_id}&partNumber={number}"
                f"&length={size}&expires={expires_in}")

    def put_part(self, upload_id: str, number: int, data: bytes) -> str:
        """What a client's PUT to a part URL does; the part's ETag."""
        self.uploads[upload_id][2][number] = data
        return _etag(data)

    def list_parts(self, key: str, upload_id: str) -> list[StoredPart]:
        if self.down:
            raise TransientError("storage unavailable")
        if upload_id not in self.uploads:
            raise KeyError(upload_id)
        parts = self.uploads[upload_id][2]
        return [StoredPart(n, _etag(parts[n]), len(parts[n])) for n in sorted(parts)]

    def complete_multipart(self, key: str, upload_id: str, parts: list[StoredPart]) -> None:
        if self.down:
            raise TransientError("storage unavailable")
        if upload_id not in self.uploads:
            raise KeyError(upload_id)
        _, content_type, held = self.uploads[upload_id]
        numbers = [p.number for p in parts]
        if (numbers != sorted(set(numbers)) or not parts
                or any(p.number not in held or _etag(held[p.number]) != p.etag for p in parts)):
            raise InvalidRequest("The parts are not the ones storage holds")
        del self.uploads[upload_id]
        # As S3: "for multipart uploads, the object creation date is the date of initiation".
        self.put(key, b"".join(held[n] for n in numbers), content_type,
                 began=self.upload_started.pop(upload_id))

    def abort_multipart(self, key: str, upload_id: str) -> None:
        if self.down:
            raise TransientError("storage unavailable")
        self.uploads.pop(upload_id, None)

    def list_keys(self, prefix: str, older_than: datetime, after: Optional[str] = None):
        if self.down:
            raise TransientError("storage unavailable")
        for key in sorted(self.objects):  # S3 lists keys in order
            if (key.startswith(prefix) and (after is None or key > after)
                    and self.modified.get(key, older_than) < older_than):
                yield key


def _etag(data: bytes) -> str:
    return '"' + hashlib.md5(data).hexdigest() + '"'


class FakePublisher:
    def __init__(self):
        self.sent: list[ObjectCreated] = []

    def publish_object_created(self, created: ObjectCreated) -> None:
        self.sent.append(created)


class FakeEdgeCache:
    """EdgeCache: the prefixes asked for, with what storage still held under each when asked
    (`objects`: the FakeObjectStore); `down` refuses, as a slow or throttled CloudFront."""

    def __init__(self, objects: FakeObjectStore):
        self._objects = objects
        self.asked: list[tuple[str, list[str]]] = []
        self.down = False

    def invalidate(self, key_prefix: str) -> None:
        if self.down:
            raise TransientError("CloudFront did not take the invalidation: timeout")
        self.asked.append((key_prefix, sorted(k for k in self._objects.objects if k.startswith(key_prefix))))


class QuietBacklog:
    """BacklogGauge of a queue that holds nothing and cannot tell how far it has drained (as
    a broker's): nothing is shed, and no message is ever known lost."""

    def depth(self) -> int:
        return 0

    def drained_before(self, now: datetime) -> Optional[datetime]:
        return None


class FakeQueue:
    """The events queue: EventPublisher and BacklogGauge, with exact message ages.

    `sent` keeps every event ever published (resends), `waiting` those not yet taken
    by `take` and not acknowledged; `drained_before` is what CloudWatch's oldest-message age
    approximates in AWS."""

    def __init__(self, clock):
        self.clock = clock
        self.sent: list[ObjectCreated] = []
        self.waiting: list[tuple[datetime, ObjectCreated]] = []
        self.down = False
        self.unknown = False  # the gauge cannot tell (no metric, a broker)

    def publish_object_created(self, created: ObjectCreated) -> None:
        if self.down:
            raise TransientError("queue unavailable")
        self.sent.append(created)
        self.waiting.append((self.clock(), created))

    def take(self) -> list[ObjectCreated]:
        """Every waiting event, gone from the queue (delivered and acknowledged)."""
        taken = [event for _, event in self.waiting]
        self.waiting.clear()
        return taken

    def depth(self) -> int:
        return len(self.waiting)

    def drained_before(self, now: datetime) -> Optional[datetime]:
        if self.down:
            raise TransientError("queue unavailable")
        if self.unknown:
            return None
        return min((sent_at for sent_at, _ in self.waiting), default=now)


class Clock:
    def __init__(self, start: datetime):
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class FakeWebhookStore:
    """WebhookStore in memory, with the same preconditions as DynamoWebhookStore."""

    def __init__(self):
        self.hooks: dict[str, Webhook] = {}
        self._lock = threading.Lock()
        self.down = False

    def _check(self):
        if self.down:
            raise TransientError("webhook store unavailable")

    def get_webhook(self, owner: str) -> Optional[Webhook]:
        self._check()
        return self.hooks.get(owner)

    def get_webhooks(self, owners) -> dict[str, Webhook]:
        self._check()
        return {owner: self.hooks[owner] for owner in owners if owner in self.hooks}

    def create_webhook(self, webhook: Webhook) -> None:
        with self._lock:
            self._check()
            if webhook.owner in self.hooks:
                raise ConditionFailed()
            self.hooks[webhook.owner] = webhook

    def update_webhook(self, webhook: Webhook, seen: Webhook) -> None:
        with self._lock:
            self._check()
            current = self.hooks.get(webhook.owner)
            if current is None or current.secret != seen.secret:
                raise ConditionFailed()
            self.hooks[webhook.owner] = webhook

    def delete_webhook(self, owner: str) -> None:
        with self._lock:
            self._check()
            self.hooks.pop(owner, None)

    def save_breaker(self, owner: str, breaker) -> None:
        with self._lock:
            self._check()
            if owner in self.hooks:
                self.hooks[owner] = dataclasses.replace(self.hooks[owner], breaker=breaker)


class FakeKeys:
    """Each secret made at random on first use, kept by this instance (one deployment)."""

    def __init__(self):
        self.made: dict[str, bytes] = {}

    def key(self, name: str) -> bytes:
        import secrets

        return self.made.setdefault(name, secrets.token_bytes(32))


class FakeRateStore:
    """RateStore in memory, with the same preconditions as DynamoRateStore; `writes` counts
    every write asked for, as the table would bill them (a failed condition too)."""

    def __init__(self):
        self.buckets: dict[str, float] = {}  # owner -> full_at
        self.filled: dict[str, float] = {}  # owner -> when last taken from full
        self.writes = 0
        self.reads = 0
        self._lock = threading.Lock()
        self.down = False

    def full_at(self, owner: str) -> Optional[float]:
        with self._lock:
            if self.down:
                raise TransientError("rate store unavailable")
            self.reads += 1
            return self.buckets.get(owner)

    def take_from_full(self, owner: str, now: float, cost: float, depth: float) -> float:
        with self._lock:
            self._write()
            if self.buckets.get(owner, now) > now:
                raise BucketMoved(self.buckets[owner])
            self.buckets[owner] = now + cost
            self.filled[owner] = now
            return self.buckets[owner]

    def take(self, owner: str, now: float, cost: float, depth: float, unspent: float = 0.0,
             leased_at: float = 0.0) -> float:
        with self._lock:
            self._write()
            full_at = self.buckets.get(owner)
            if full_at is None or not now < full_at <= now + depth - (cost - unspent):
                raise BucketMoved(full_at)
            if unspent and not self.filled.get(owner, math.inf) <= leased_at:
                raise BucketMoved(full_at)
            self.buckets[owner] = full_at + cost - unspent
            return self.buckets[owner]

    def _write(self):
        if self.down:
            raise TransientError("rate store unavailable")
        self.writes += 1


class FakeDeliveryLog:
    """DeliveryLog in memory, bounded as DynamoDeliveryLog is; `down` makes it raise and
    `hold` makes each record wait that many seconds first (a slow table)."""

    def __init__(self):
        from chalicelib.domain.webhooks import DELIVERY_LOG_SIZE

        self.kept: dict[str, list] = {}
        self.size = DELIVERY_LOG_SIZE
        self.down = False
        self.hold = 0.0

    def record(self, receiver, attempt):
        if self.hold:
            time.sleep(self.hold)
        if self.down:
            raise TransientError("delivery log unavailable")
        self.kept[receiver] = ([attempt] + self.kept.get(receiver, []))[:self.size]

    def recent(self, receiver):
        if self.down:
            raise TransientError("delivery log unavailable")
        return sorted(self.kept.get(receiver, []), key=lambda a: a.at, reverse=True)


class FakeWebhookQueue:
    def __init__(self):
        self.sent: list[WebhookEvent] = []
        self.sent_delays: list[int] = []         # delay_seconds of each send, as sent
        self.delays: list[tuple[str, int]] = []  # (receipt, seconds) of retry_later
        self.dead_letters: list[WebhookEvent] = []
        self.down = False

    def send(self, event: WebhookEvent, delay_seconds: int = 0) -> None:
        if self.down:
            raise TransientError("webhook queue unavailable")
        self.sent.append(event)
        self.sent_delays.append(delay_seconds)

    def retry_later(self, receipt: str, seconds: int) -> None:
        self.delays.append((receipt, seconds))

    def dead_letter(self, event: WebhookEvent) -> None:
        if self.down:
            raise TransientError("webhook queue unavailable")
        self.dead_letters.append(event)


class FakeSender:
    """Answers with the statuses given, in turn (the last one from then on), or raises an
    Exception given in their place; records every call."""

    def __init__(self, *answers):
        self.answers = list(answers) or [200]
        self.calls: list[dict] = []

    def post(self, url, addresses, headers, body, timeout) -> int:
        self.calls.append({"url": url, "addresses": addresses, "headers": headers, "body": body,
                           "timeout": timeout})
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


class ListMetrics:
    """EmfMetrics writing into a list: tests read the very EMF lines the service prints."""

    def __init__(self, service: str = "image-jobs"):
        from chalicelib.runtime.metrics import EmfMetrics

        self.lines: list[str] = []
        self._emf = EmfMetrics(service, write=self.lines.append, strict=True)

    def emit(self, values, dimensions=None) -> None:
        self._emf.emit(values, dimensions)

    def points(self) -> list[tuple[str, dict, float]]:
        """(metric, dimensions but service, value) of every line so far."""
        import json

        found = []
        for line in self.lines:
            record = json.loads(line)
            (directive,) = record["_aws"]["CloudWatchMetrics"]
            names = {n for dims in directive["Dimensions"] for n in dims} - {"service"}
            dims = {n: record[n] for n in names}
            for metric in directive["Metrics"]:
                for value in record[metric["Name"]]:
                    found.append((metric["Name"], dims, value))
        return found

    def total(self, metric: str, **dims) -> float:
        return sum(v for name, d, v in self.points() if name == metric and all(d.get(k) == x for k, x in dims.items()))


class FakeWaitSlots:
    """WaitSlots in memory: owner -> {slot: (holder, until)}."""

    def __init__(self):
        self.held: dict[str, dict[int, tuple[str, datetime]]] = {}
        self._lock = threading.Lock()
        self.down = False

    def take(self, owner: str, holder: str, until: datetime, now: datetime, slots: int) -> Optional[int]:
        with self._lock:
            if self.down:
                raise TransientError("wait slots unavailable")
            mine = self.held.setdefault(owner, {})
            for slot in range(slots):
                if slot not in mine or mine[slot][1] < now:
                    mine[slot] = (holder, until)
                    return slot
            return None

    def give_back(self, owner: str, slot: int, holder: str) -> None:
        with self._lock:
            mine = self.held.get(owner, {})
            if slot in mine and mine[slot][0] == holder:
                del mine[slot]


class FakeDeliverySlots(FakeWaitSlots):
    """DeliverySlots in memory: FakeWaitSlots, and each slot's last hold in seconds."""

    def __init__(self):
        super().__init__()
        self.last_held: dict[str, dict[int, float]] = {}
        self.most_held: dict[str, int] = {}  # the most slots each receiver held at once

    def take(self, receiver, holder, until, now, slots):
        slot = super().take(receiver, holder, until, now, slots)
        with self._lock:
            if slot is not None:
                held = sum(1 for _, held_until in self.held[receiver].values() if held_until >= now)
                self.most_held[receiver] = max(self.most_held.get(receiver, 0), held)
        return slot

    def give_back(self, receiver, slot, holder, held_seconds=0.0):
        with self._lock:
            if self.down:
                raise TransientError("delivery slots unavailable")
            mine = self.held.get(receiver, {})
            if slot in mine and mine[slot][0] == holder:
                del mine[slot]
                self.last_held.setdefault(receiver, {})[slot] = held_seconds

    def recent_hold(self, receiver, slots):
        with self._lock:
            if self.down:
                raise TransientError("delivery slots unavailable")
            held = [v for k, v in self.last_held.get(receiver, {}).items() if k < slots]
            return sum(held) / len(held) if held else None


class FakePushConnections:
    """PushConnections in memory: connection id -> (owner, until), and when each opened."""

    def __init__(self):
        self.connections: dict[str, tuple[str, datetime]] = {}
        self.opened: dict[str, Optional[datetime]] = {}
        self._lock = threading.Lock()
        self.down = False

    def _check(self):
        if self.down:
            raise TransientError("push connections unavailable")

    def add(self, owner: str, connection_id: str, until: datetime, limit: int,
            opened_at: Optional[datetime] = None) -> None:
        from chalicelib.domain.errors import PushConnectionsFull

        with self._lock:
            self._check()
            others = [c for c, (o, _) in self.connections.items() if o == owner and c != connection_id]
            if len(others) >= limit:
                raise PushConnectionsFull(owner)
            self.connections[connection_id] = (owner, until)
            self.opened[connection_id] = opened_at

    def remove(self, connection_id: str, owner: Optional[str] = None,
               opened_before: Optional[datetime] = None) -> None:
        with self._lock:
            self._check()
            opened = self.opened.get(connection_id)
            if opened_before is not None and opened is not None and opened >= opened_before:
                return
            self.connections.pop(connection_id, None)
            self.opened.pop(connection_id, None)

    def of_owner(self, owner: str) -> list[str]:
        with self._lock:
            self._check()
            return sorted(c for c, (o, _) in self.connections.items() if o == owner)


class FakePushSender:
    """PushSender in memory: what each connection was sent; `gone` ones raise ConnectionGone,
    `slow` ones take that many seconds, and all of them raise TransientError while `down`."""

    def __init__(self):
        self.sent: dict[str, list[str]] = {}
        self.gone: set[str] = set()
        self.slow: dict[str, float] = {}
        self.down = False

    def send(self, connection_id: str, message: str) -> None:
        import time

        from chalicelib.domain.errors import ConnectionGone

        if self.down:
            raise TransientError("push gateway unavailable")
        if connection_id in self.gone:
            raise ConnectionGone(connection_id)
        time.sleep(self.slow.get(connection_id, 0))
        self.sent.setdefault(connection_id, []).append(message)


def fake_context(**given) -> "Context":
    """A Context as bootstrap would make it: what the test gives, and for every other port a
    fresh fake that keeps to itself (no webhook registered, nothing shed, no message known
    lost); the bodies are chalicelib/http/views.py's, which bootstrap hands over."""
    from chalicelib.http import views
    from chalicelib.usecases.context import Context

    ports = dict(job_body=views.job_body, push_body=views.push_body, publisher=FakePublisher(),
                 backlog=QuietBacklog(), rates=FakeRateStore(), metrics=ListMetrics(given["settings"].metrics_service),
                 webhooks=FakeWebhookStore(), webhook_queue=FakeWebhookQueue(), webhook_sender=FakeSender(),
                 delivery_slots=FakeDeliverySlots(), webhook_turns=FakeRateStore(), wait_slots=FakeWaitSlots(),
                 delivery_log=FakeDeliveryLog(),
                 keys=FakeKeys())
    return Context(**{**ports, **given})
