"""What the use cases need from the outside world. Adapters implement these Protocols for
AWS-compatible services, tests/fakes.py implements them in memory, and one contract suite
(tests/integration/test_job_store.py) proves the two JobStores equal.

Protocols only: the values they take and answer are in chalicelib/domain/ (storage.py,
listing.py, idempotency.py, webhooks.py), errors in domain/errors.py, events in domain/events.py.
"""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Iterator, Optional, Protocol

from chalicelib.domain.idempotency import IdempotencyRecord
from chalicelib.domain.jobs import Job, JobObjects, JobStatus
from chalicelib.domain.listing import ListCursor, OwnedPage
from chalicelib.domain.source import Source
from chalicelib.domain.storage import PresignedPost, PresignedPut, ScanPoint, StoredObject, StoredPart
from chalicelib.domain.webhooks import Address, Attempt, Breaker, Webhook, WebhookEvent

if TYPE_CHECKING:  # a GET never parses an event: not imported on its path
    from chalicelib.domain.events import ObjectCreated


class ObjectStore(Protocol):
    def put(self, key: str, data: bytes, content_type: str, cache_control: Optional[str] = None) -> None:
        """Stored with its Content-Type and, when given, the Cache-Control it is served with."""
        ...

    def head(self, key: str) -> Optional[StoredObject]:
        """What is stored under key, or None when nothing is (never an error for that)."""
        ...

    def copy(self, source_key: str, key: str) -> None:
        """A server-side copy (no bytes through us), with the source's Content-Type and
        Cache-Control; KeyError if the source is absent."""
        ...

    def get(self, key: str, max_bytes: int) -> bytes:
        """The object's bytes; raises FileTooLarge past max_bytes, KeyError if absent."""
        ...

    def delete(self, key: str) -> None:
        """Idempotent: deleting a missing key is not an error."""
        ...

    def delete_many(self, keys: list[str]) -> None:
        """As delete, for many keys in few calls; raises TransientError unless all are gone."""
        ...

    def presign_get(self, key: str, expires_in: int, signed_at: Optional[datetime] = None) -> str:
        """A GET URL valid from signed_at (default: now) for expires_in seconds; the same
        arguments give the same URL while the signing credentials stay the same."""
        ...

    def presign_post(self, key: str, content_type: str, max_size: int, expires_in: int,
                     cache_control: Optional[str] = None) -> PresignedPost:
        """A form upload pinned to key, content type (and cache control) and size range."""
        ...

    def presign_put(self, key: str, content_type: str, size: int, sha256: Optional[str],
                    expires_in: int, cache_control: Optional[str] = None) -> PresignedPut:
        """One PUT pinned to key, content type (and cache control) and exact size, and to the
        bytes' SHA-256 (base64) when given: storage refuses any other request."""
        ...

    def start_multipart(self, key: str, content_type: str, cache_control: Optional[str] = None) -> str:
        """A new multipart upload to key; its upload id."""
        ...

    def presign_part(self, key: str, upload_id: str, number: int, size: int, expires_in: int) -> str:
        """A URL to PUT part `number` (from 1) of the upload, pinned to exactly `size` bytes:
        storage refuses a part of any other length."""
        ...

    def list_parts(self, key: str, upload_id: str) -> list[StoredPart]:
        """The parts storage holds, by number; KeyError when the upload is no more
        (completed or aborted)."""
        ...

    def complete_multipart(self, key: str, upload_id: str, parts: list[StoredPart]) -> None:
        """Join the parts into the object (storage then notifies). InvalidRequest when a part
        is not what storage holds; KeyError when the upload is no more."""
        ...

    def abort_multipart(self, key: str, upload_id: str) -> None:
        """Drop the upload and its parts. Idempotent: an upload that is no more is fine."""
        ...

    def list_keys(self, prefix: str, older_than: datetime, after: Optional[str] = None) -> Iterator[str]:
        """Keys under prefix last modified before older_than, in key order; only those
        after `after` (S3's StartAfter), when given."""
        ...


class EdgeCache(Protocol):
    """The CDN in front of the renditions (DELIVERY=cloudfront), which keeps each one it has
    served for its Cache-Control's max-age."""

    def invalidate(self, key_prefix: str) -> None:
        """Ask the CDN to drop every object under key_prefix that it holds (it takes a while
        to reach every edge). The same prefix asked again is the same request, not a second
        one. Raises TransientError when the CDN did not take it (refused, slow, unreachable)."""
        ...


class BacklogGauge(Protocol):
    def depth(self) -> int:
        """Events waiting in the queue (approximately)."""
        ...

    def drained_before(self, now: datetime) -> Optional[datetime]:
        """A time such that no message sent before it is still in the queue (waiting or in
        a worker's hands): they were all deleted or dead-lettered. `now` when the queue is
        empty; None when it cannot be known at the moment. How the sweeper tells a lost
        message from one that is merely waiting its turn."""
        ...


class EventPublisher(Protocol):
    def publish_object_created(self, created: ObjectCreated) -> None:
        """Send the storage's object-created event again (the sweeper's resend)."""
        ...


class JobStore(Protocol):
    """Jobs and idempotency records. Every write that changes a job is conditional; each
    method names its precondition and raises ConditionFailed when it does not hold, and
    TransientError when the table is unavailable. A write that the transport sent again
    after a lost answer, when the first send had landed, is this call's own: it returns as
    a success, never ConditionFailed (the store recognises the write by what only it set). Every write that sets a job's status also
    sets its sweep_key, sweep_key(status, job_id), so `due` finds it in its shard. Safe to
    call from several threads at once (the sweeper's pool)."""

    # -- creating --------------------------------------------------------------------------
    def create(self, job: Job, quota: int) -> None:
        """Insert a new job and take one of its owner's quota places, in one transaction.

        Precondition: no job has this id (ConditionFailed), and the owner holds fewer than
        `quota` places (QuotaFull)."""
        ...

    def create_with_key(self, job: Job, record: IdempotencyRecord, now: datetime, quota: int) -> None:
        """As create, with its idempotency record in the same transaction.

        Raises IdempotencyKeyTaken when a record that has not expired by `now` holds the key (an
        expired one is taken over, even if TTL has not deleted it yet), and also when a
        concurrent transaction on the same key made this one lose (DynamoDB's
        TransactionConflict): either way the caller reads the key again."""
        ...

    def active_jobs(self, owner: str) -> set[str]:
        """The job ids holding the owner's quota places."""
        ...

    def release_place(self, owner: str, job_id: str) -> None:
        """Give back the quota place job_id holds, if it holds one. Idempotent: called when a job
        finishes, and again by whoever finds a finished job still holding one."""
        ...

    def get_idempotency(self, scope: str) -> IdempotencyRecord | None: ...

    def release_idempotency(self, scope: str, job_id: str) -> None:
        """Delete the record if it still points at job_id; a missing one is fine."""
        ...

    def same_content(self, owner: str, sha256: str) -> str | None:
        """The job id last noted for this owner's bytes (note_content), or None; never
        another owner's. The job may since be gone: the caller reads it."""
        ...

    def note_content(self, owner: str, sha256: str, job_id: str, expires_at: datetime) -> None:
        """Remember job_id as made from this owner's bytes until expires_at (a later note
        replaces it)."""
        ...

    # -- reading ---------------------------------------------------------------------------
    def get(self, job_id: str) -> Job | None:
        """A strongly consistent read."""
        ...

    def objects_of(self, job_ids: list[str]) -> dict[str, JobObjects]:
        """For many jobs at once, what each says about its objects (strongly consistent,
        as get); ids with no job are absent. Raises TransientError unless all were read."""
        ...

    def due(self, status: JobStatus, now: datetime, limit: int, *, shard: int) -> list[Job]:
        """Jobs in `status` whose sweep_at has come, soonest first, from one shard of the
        due index: those whose sweep_key is shard_key(status, shard) (chalicelib/domain/jobs.py)."""
        ...

    def owned(self, owner: str, limit: int, after: Optional[ListCursor] = None,
              created_after: Optional[datetime] = None,
              created_before: Optional[datetime] = None) -> OwnedPage:
        """The next `limit` keys of the owner's jobs, newest first, from the owner index (owner,
        then created_at): those after `after`, created within the bounds given (inclusive: the
        caller applies its own), each job then read whole and strongly consistent. Never
        another owner's job; never a scan. Precondition: the bounds, when both are given, are
        not crossed (DynamoDB refuses such a range)."""
        ...

    # -- the API and the storage events: moves named by the status they leave -------------
    def move(self, job: Job, from_status: JobStatus) -> None:
        """Write `job` whole. Precondition: the stored status is `from_status` and the stored
        attempt is `job.attempt` (the one it was read with), so a move never lands on a newer
        attempt's claim."""
        ...

    # -- the worker: its attempt number is a fencing token --------------------------------
    def claim(self, job_id: str, now: datetime, lease: timedelta, max_attempts: int,
              source: Source | None = None) -> Job:
        """-> processing, attempt + 1, leased until now + lease, and the original's facts
        stored when given (a job the multipart completion queued has none yet); returns the
        claimed job.

        Precondition: the job is queued, or processing with a lease that has ended, and has
        had fewer than max_attempts attempts."""
        ...

    def release_lease(self, job_id: str, attempt: int, now: datetime) -> None:
        """End the lease now (a transient failure) so that a redelivery may claim at once.

        Precondition: the job is processing under `attempt`."""
        ...

    def finish_attempt(self, job: Job, attempt: int) -> None:
        """Write the attempt's result `job` whole (ready, or failed).

        Precondition: the job is still processing under `attempt`: a cancel, a delete or a
        newer attempt in between makes this write lose."""
        ...

    # -- the sweeper: optimistic, against the job as it read it --------------------------
    def update_if_unchanged(self, job: Job, seen: Job) -> None:
        """Write `job` whole. Precondition: the stored job has the status and updated_at
        of `seen`, so of two sweepers (or a sweeper and a worker) only one write lands."""
        ...

    def delete(self, job_id: str) -> None:
        """Remove the job; a missing one is fine."""
        ...

    def delete_many(self, job_ids: list[str]) -> None:
        """As delete, for many jobs in few calls (unconditional, as delete)."""

    # -- the orphan scan's place in the bucket ---------------------------------------------
    def scan_points(self, names: list[str]) -> dict[str, ScanPoint]:
        """Each named range's point; ScanPoint() for one never saved."""
        ...

    def save_scan_point(self, name: str, point: ScanPoint) -> None:
        """Unconditional: two scans at once may move it back a little, which costs only
        a page listed twice."""
        ...

# -- the deployment's own secrets (chalicelib/usecases/listing.py's page tokens) -------------
class Keys(Protocol):
    def key(self, name: str) -> bytes:
        """The secret named `name`: the same bytes for every process of the deployment, for
        good; made at random by whichever asks first. TransientError when unavailable."""
        ...


# -- the per-owner request rate (chalicelib/usecases/admission.py) --------------------------
class RateStore(Protocol):
    """Each owner's token bucket, one for all API processes, kept as the time it is full
    again (`full_at`, epoch seconds; none stored: full). A request takes `cost` seconds of
    it (1 / rate); an empty bucket refills in `depth` seconds (burst / rate), so a token is
    left while full_at <= now + depth - cost. Both writes return the new full_at, raise
    BucketMoved (with the full_at found) when their precondition does not hold and
    TransientError when the store is unavailable. What they store expires by itself once the bucket is full.
    A lease of n tokens is one write with cost n / rate."""

    def full_at(self, owner: str) -> Optional[float]:
        """The stored full_at (None: none stored, full). TransientError when unavailable."""
        ...

    def take_from_full(self, owner: str, now: float, cost: float, depth: float) -> float:
        """full_at = now + cost. Precondition: the bucket is full (full_at <= now, or none)."""
        ...

    def take(self, owner: str, now: float, cost: float, depth: float, unspent: float = 0.0,
             leased_at: float = 0.0) -> float:
        """full_at += cost - unspent. Precondition: it is neither full nor empty:
        now < full_at <= now + depth - (cost - unspent). `unspent`: tokens of a lease taken at
        `leased_at` that expired unspent, given back; then also no take_from_full since."""
        ...


# -- waits (chalicelib/usecases/waits.py) ---------------------------------------------------

class WaitSlots(Protocol):
    """An owner's held requests (Prefer: wait), counted across every API instance. A slot is
    held until it is given back or its `until` passes, so a crashed instance's slot frees
    itself. Safe to call from several threads and processes at once."""

    def take(self, owner: str, holder: str, until: datetime, now: datetime, slots: int) -> Optional[int]:
        """Take one of the owner's `slots` slots for `holder` until `until`: a slot nobody
        holds, or one whose holder's `until` is before `now`. Returns the slot's number, or
        None when every slot is held. TransientError when the store is unavailable."""
        ...

    def give_back(self, owner: str, slot: int, holder: str) -> None:
        """Free the slot if `holder` still holds it. Idempotent."""
        ...


# -- webhooks (chalicelib/usecases/webhooks.py) ---------------------------------------------
class WebhookStore(Protocol):
    """At most one webhook per owner. TransientError when the store is unavailable."""

    def get_webhook(self, owner: str) -> Webhook | None: ...

    def get_webhooks(self, owners: Sequence[str]) -> dict[str, Webhook]:
        """{owner: webhook} of those of `owners` that have one, in one read."""
        ...

    def create_webhook(self, webhook: Webhook) -> None:
        """Precondition: the owner has no webhook (else ConditionFailed)."""
        ...

    def update_webhook(self, webhook: Webhook, seen: Webhook) -> None:
        """Replace the owner's webhook. Precondition: the stored one still has the secret of
        `seen`, so that of a rotation and a change racing, neither undoes the other."""
        ...

    def delete_webhook(self, owner: str) -> None:
        """A missing one is fine."""
        ...

    def save_breaker(self, owner: str, breaker: Breaker) -> None:
        """Unconditional; does nothing if the owner has no webhook any more."""
        ...


class DeliveryLog(Protocol):
    """Each receiver's last DELIVERY_LOG_SIZE (domain/webhooks.py) delivery attempts (its key: the webhook's owner), kept
    for a while and then expired. Best effort: TransientError when the store is unavailable
    or slow, and the delivery never waits on it for long (usecases/webhooks.py)."""

    def record(self, receiver: str, attempt: Attempt) -> None:
        """Keep `attempt`, pushing out the receiver's oldest beyond DELIVERY_LOG_SIZE."""
        ...

    def recent(self, receiver: str) -> list[Attempt]:
        """The receiver's kept attempts, newest first."""
        ...


class DeliverySlots(Protocol):
    """A receiver's deliveries in flight, counted across every delivery function: `slots`
    slots per receiver (its key: usecases/webhooks.py receiver_key), each held from the
    moment before the call until it is given back or its `until` passes, so a crashed
    function's slot frees itself. Safe to call from several threads and processes at once;
    TransientError when the store is unavailable."""

    def take(self, receiver: str, holder: str, until: datetime, now: datetime, slots: int) -> Optional[int]:
        """As WaitSlots.take: a free slot's number for `holder`, or None when all are held."""
        ...

    def give_back(self, receiver: str, slot: int, holder: str, held_seconds: float) -> None:
        """Free the slot if `holder` still holds it, and remember how long it was held.
        Idempotent."""
        ...

    def recent_hold(self, receiver: str, slots: int) -> Optional[float]:
        """The mean of the seconds the receiver's slots were last held; None before any."""
        ...


class WebhookQueue(Protocol):
    def send(self, event: WebhookEvent, delay_seconds: int = 0) -> None:
        """Queue `event`; it may arrive sooner than `delay_seconds` (SQS delays at most 15
        minutes), never later: its `not_before` says when it is due."""
        ...

    def retry_later(self, receipt: str, seconds: int) -> None:
        """Show the received message `receipt` again after `seconds` (at most 12 hours)."""
        ...

    def dead_letter(self, event: WebhookEvent) -> None:
        """Put `event` in the dead-letter queue: it had its last attempt."""
        ...


class WebhookSender(Protocol):
    def post(self, url: str, addresses: tuple[Address, ...], headers: dict[str, str], body: bytes,
             timeout: float) -> int:
        """POST `body` to `url`, connecting only to `addresses` (the vetted ones, in order;
        never resolving the name again), following no redirect, all within `timeout`
        seconds; the HTTP status. Raises DeliveryFailed when there is none."""
        ...


# -- push (chalicelib/usecases/push.py) -----------------------------------------------------
class PushConnections(Protocol):
    """Which WebSocket connections each owner has open. TransientError when the store is
    unavailable. An entry whose connection closed without a disconnect is forgotten when a
    send finds it gone, or with its item's time."""

    def add(self, owner: str, connection_id: str, until: datetime, limit: int,
            opened_at: Optional[datetime] = None) -> None:
        """Record the connection (opened at `opened_at`), kept at least until `until` (past
        API Gateway's 2 hours), unless the owner has `limit` others already, across every
        instance: then PushConnectionsFull, and nothing recorded. Adding a recorded one again
        succeeds."""
        ...

    def remove(self, connection_id: str, owner: Optional[str] = None,
               opened_before: Optional[datetime] = None) -> None:
        """Forget the connection. Idempotent. With `owner` (a send found it gone), it leaves
        the owner's connections even if its own entry has expired already. With
        `opened_before`, a connection opened at or after it is kept: a send finds a
        connection gone until its connect has returned."""
        ...

    def of_owner(self, owner: str) -> list[str]:
        """The owner's connection ids; never another owner's."""
        ...


class PushSender(Protocol):
    def send(self, connection_id: str, message: str) -> None:
        """Hand `message` to the connection (API Gateway's PostToConnection): returns once the
        gateway has it, not once the client read it. Raises ConnectionGone for a closed
        connection, TransientError when the gateway cannot be reached."""
        ...


class JobChanges(Protocol):
    def changed_jobs(self, records: list[dict]) -> list[Job]:
        """The jobs a batch of the table's stream records moved (a new job, or a new status or
        attempt), each as its new image, in the stream's order; every other item and every
        change that leaves the status alone is left out."""
        ...
