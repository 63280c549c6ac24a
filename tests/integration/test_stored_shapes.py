"""An upgrade in place loses nothing: the items each release wrote (tests/fixtures/records/
<shape version>/, recorded by running that release) are loaded into a table on moto's server,
with the objects that release had stored, and today's use cases run over them through the
real adapter: GET, the webhook and push bodies, delete, cancel, the orphan scan, the sweeper.

Each release's own GET body of each job (bodies.json) is what today's must still show, URLs
compared by the key they sign; every object it had stored (objects.json) is one a record
names, which no clean-up may delete while the record lives.
"""
from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from chalicelib.bootstrap import build_use_cases
from chalicelib.domain.errors import JobFinished, JobNotFound
from chalicelib.domain.jobs import JobStatus, shard_key, sweep_key
from chalicelib.domain.vocabulary import SweepOutcome
from chalicelib.http.views import job_body
from chalicelib.domain.webhooks import WebhookEvent
from local.provision import provision
from local.services import aws_client
from tests.fixtures.records.record import keyed
from tests.images import jpeg

RECORDS = Path(__file__).resolve().parent.parent / "fixtures" / "records"
VERSIONS = sorted(int(p.name) for p in RECORDS.iterdir() if p.is_dir() and p.name.isdigit())


@dataclass
class Recorded:
    """One shape version's fixture: its items by file name, the bodies and the objects."""

    version: int
    items: dict[str, dict]
    bodies: dict[str, dict]
    objects: list[str]

    @classmethod
    def load(cls, version: int) -> "Recorded":
        folder = RECORDS / str(version)
        items = {p.stem: json.loads(p.read_text()) for p in sorted((folder / "items").glob("*.json"))}
        return cls(version, items, json.loads((folder / "bodies.json").read_text()),
                   json.loads((folder / "objects.json").read_text()))

    def jobs(self) -> dict[str, tuple[str, str, str]]:
        """name -> (owner, job id, status) of every job item."""
        return {name: (raw["owner"]["S"], raw["pk"]["S"].removeprefix("job#"), raw["status"]["S"])
                for name, raw in self.items.items() if name.startswith("job-")}

    def objects_of(self, job_id: str) -> set[str]:
        return {key for key in self.objects if f"/{job_id}" in key}

    def latest(self, attribute: str) -> datetime:
        values = [raw[attribute] for raw in self.items.values() if attribute in raw]
        if values and "N" in values[0]:
            return max(datetime.fromtimestamp(int(v["N"]), timezone.utc) for v in values)
        return max(datetime.strptime(v["S"], "%Y-%m-%dT%H:%M:%S.%f%z") for v in values)


class Receiver:
    """A webhook endpoint on loopback that keeps every body it is sent."""

    def __init__(self):
        bodies = self.bodies = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self):
        self._server.shutdown()
        self._server.server_close()


class RecordingPushSender:
    """API Gateway's management API stands in: push's port, keeping each message sent."""

    def __init__(self):
        self.sent: list[tuple[str, dict]] = []

    def send(self, connection_id: str, message: str) -> None:
        self.sent.append((connection_id, json.loads(message)))


@dataclass
class World:
    recorded: Recorded
    use_cases: object
    clients: dict
    settings: object

    def stored(self) -> set[str]:
        pages = self.clients["s3"].get_paginator("list_objects_v2").paginate(Bucket=self.settings.bucket)
        return {o["Key"] for page in pages for o in page.get("Contents", [])}

    def at(self, moment: datetime) -> None:
        self.use_cases.ctx.clock = lambda: moment

    def body(self, job) -> dict:
        return keyed(job_body(job, self.use_cases.manage.urls(job)), self.settings.bucket)


@pytest.fixture(params=VERSIONS, ids=lambda v: f"shape-{v}")
def world(request, settings_for):
    recorded = Recorded.load(request.param)
    settings = settings_for(webhook_allow_loopback=True,
                            push_stream_arn="arn:aws:dynamodb:us-east-1:000000000000:table/jobs/stream/x")
    clients = {n: aws_client(n, settings.region, settings.endpoint_url) for n in ("sqs", "s3", "dynamodb")}
    provision(settings, clients["sqs"], clients["s3"], clients["dynamodb"])
    for raw in recorded.items.values():
        clients["dynamodb"].put_item(TableName=settings.table, Item=raw)
    image = jpeg(64, 48)
    for key in recorded.objects:
        clients["s3"].put_object(Bucket=settings.bucket, Key=key, Body=image)
    use_cases = build_use_cases(settings)
    use_cases.ctx.push_sender = RecordingPushSender()
    found = World(recorded, use_cases, clients, settings)
    # A minute after the recording: what it made is as it left it (no lease or URL run out).
    found.at(recorded.latest("updated_at") + timedelta(minutes=1))
    return found


def contains(shown, expected, where="body"):
    """Every member the release showed is shown the same (new members may be added)."""
    if isinstance(expected, dict):
        assert isinstance(shown, dict), f"{where}: {shown!r} is no object"
        for name, value in expected.items():
            assert name in shown, f"{where}.{name} is missing (shown: {sorted(shown)})"
            contains(shown[name], value, f"{where}.{name}")
    else:
        assert shown == expected, f"{where}: {shown!r}, the release showed {expected!r}"


def test_the_recordings_hold_every_status_and_both_owners():
    for version in VERSIONS:
        recorded = Recorded.load(version)
        jobs = recorded.jobs().values()
        assert {status for _, _, status in jobs} == {s.value for s in JobStatus}, version
        assert {owner for owner, _, _ in jobs} == {"alice", "bob"}, version
        assert set(recorded.bodies) == set(recorded.jobs()), version


def test_get_shows_each_job_as_the_release_that_wrote_it_did(world):
    manage = world.use_cases.manage
    for name, (owner, job_id, status) in world.recorded.jobs().items():
        shown = world.body(manage.get_job(owner, job_id))
        contains(shown, world.recorded.bodies[name], name)
        if status == "ready":  # what the contract requires of every ready job
            assert {"image_url", "thumb_url", "renditions"} <= set(shown), name
            assert shown["image_url"] in world.recorded.objects, name
        with pytest.raises(JobNotFound):  # and still only to its owner
            manage.get_job("mallory", job_id)


def test_a_webhook_carries_each_finished_job_as_get_shows_it(world):
    receiver = Receiver()
    try:
        for owner in ("alice", "bob"):
            world.use_cases.webhooks.register(owner, receiver.url)
        finished = {name: job for name, job in world.recorded.jobs().items()
                    if JobStatus(job[2]).terminal}
        for name, (owner, job_id, _) in finished.items():
            event = WebhookEvent(event_id=f"msg_{uuid.uuid4().hex}", owner=owner, job_id=job_id)
            assert world.use_cases.webhooks.deliver(event.to_json(), None).value == "delivered", name
        assert len(receiver.bodies) == len(finished)
        for (name, (owner, job_id, _)), sent in zip(finished.items(), receiver.bodies):
            shown = keyed(sent, world.settings.bucket)
            contains(shown, world.recorded.bodies[name], f"webhook {name}")
            assert shown == world.body(world.use_cases.manage.get_job(owner, job_id)), name
    finally:
        receiver.close()


def test_a_push_from_the_stream_carries_the_job_as_get_shows_it(world):
    """The stream hands over the item as stored (NewImage): an item of any shape."""
    push = world.use_cases.push
    push.connect("alice", "conn-alice")
    push.connect("bob", "conn-bob")
    jobs = world.recorded.jobs()
    records = [{"eventName": "MODIFY", "dynamodb": {"NewImage": world.recorded.items[name]}} for name in jobs]
    assert push.publish_changes(records) == len(jobs)
    sent = {message["job"]["job_id"]: (connection, message) for connection, message in
            world.use_cases.ctx.push_sender.sent}
    for name, (owner, job_id, _) in jobs.items():
        connection, message = sent[job_id]
        assert connection == f"conn-{owner}", name
        shown = keyed(message["job"], world.settings.bucket)
        contains(shown, world.recorded.bodies[name], f"push {name}")
        assert shown == world.body(world.use_cases.manage.get_job(owner, job_id)), name


def test_delete_removes_each_job_and_every_object_it_names(world):
    manage = world.use_cases.manage
    for name, (owner, job_id, _) in world.recorded.jobs().items():
        manage.delete(owner, job_id)
        with pytest.raises(JobNotFound):
            manage.get_job(owner, job_id)
        left = world.stored() & world.recorded.objects_of(job_id)
        assert not left, f"{name}: delete left {sorted(left)}"
    assert not world.stored()


def test_cancel_ends_each_unfinished_job_and_keeps_each_finished_one(world):
    manage = world.use_cases.manage
    for name, (owner, job_id, status) in world.recorded.jobs().items():
        if JobStatus(status).terminal:
            if status == "cancelled":
                assert manage.cancel(owner, job_id).status is JobStatus.CANCELLED
            else:
                with pytest.raises(JobFinished):
                    manage.cancel(owner, job_id)
            contains(world.body(manage.get_job(owner, job_id)), world.recorded.bodies[name], name)
        else:
            assert manage.cancel(owner, job_id).status is JobStatus.CANCELLED, name
            assert manage.get_job(owner, job_id).status is JobStatus.CANCELLED, name
    # A cancel removes renditions only, and no ready job's.
    originals = {key for key in world.recorded.objects if key.startswith(world.settings.originals_prefix)}
    ready = {key for name, (_, job_id, status) in world.recorded.jobs().items() if status == "ready"
             for key in world.recorded.objects_of(job_id)}
    assert originals | ready <= world.stored()


def test_the_orphan_scan_deletes_no_object_a_record_names(world):
    s = world.settings
    ready_id = next(job_id for _, job_id, status in world.recorded.jobs().values() if status == "ready")
    # Two true orphans, so that a scan that checked nothing cannot pass: an original whose
    # job is gone, and a rendition of an attempt the ready job never had.
    planted = [f"{s.originals_prefix}{uuid.uuid4()}", f"{s.renditions_prefix}{ready_id}/9/display.jpg"]
    for key in planted:
        world.clients["s3"].put_object(Bucket=s.bucket, Key=key, Body=b"x")
    # Past the grace period of every object just stored (the scan lists by storage's clock).
    world.at(datetime.now(timezone.utc) + timedelta(seconds=s.orphan_grace_seconds + 60))
    report = world.use_cases.orphan_scan.run()
    deleted = set(world.recorded.objects) - world.stored()
    assert not deleted, f"the orphan scan deleted {len(deleted)} named objects: {sorted(deleted)}"
    assert not set(planted) & world.stored()
    assert report["orphans_deleted"] == len(planted)


class _IndexedShardsOnly:
    """The real jobs adapter, whose sweep queries go to moto only for the due index's shards
    that hold items of this table: the `sweep_key`s its items carry, and every status's key of
    each job's id (where a write of today's puts it: sweep_key), read from the table itself
    (a Scan) before each sweep. No item is under any other shard's keys, so those queries would
    find nothing: the sweep's outcome is a whole sweep's. moto answers each query by reading
    every item of the table, and a sweep asks 448 keys (64 shards of 7 statuses): 6 shapes x 2
    sweeps cost some 30 CPU-s of the test and its moto, where a dozen jobs' shards are some 80
    keys a sweep. The sweeper still asks for every key, in its own order;
    tests/integration/test_sweeper.py sweeps every shard on moto."""

    def __init__(self, world: World):
        self._world, self._jobs, self._keys = world, world.use_cases.ctx.jobs, set()
        world.use_cases.ctx.jobs = self

    def read(self) -> None:
        pages = self._world.clients["dynamodb"].get_paginator("scan").paginate(
            TableName=self._world.settings.table, ConsistentRead=True)
        items = [item for page in pages for item in page["Items"]]
        self._keys = {item["sweep_key"]["S"] for item in items if "sweep_key" in item}
        self._keys |= {sweep_key(status, item["pk"]["S"].removeprefix("job#")) for item in items
                       if item["pk"]["S"].startswith("job#") for status in JobStatus}

    def due(self, status: JobStatus, now: datetime, limit: int, *, shard: int) -> list:
        return self._jobs.due(status, now, limit, shard=shard) if shard_key(status, shard) in self._keys else []

    def __getattr__(self, name: str):
        return getattr(self._jobs, name)


def test_the_sweeper_keeps_live_jobs_and_removes_expired_ones_with_their_objects(world):
    if world.recorded.version < 2:
        # What the upgrade of a table of the first release runs once (docs/deploy.md).
        from infra import upgrade_records

        s = world.settings
        command = [s.table, "--region", s.region, "--endpoint-url", s.endpoint_url]
        assert upgrade_records.main(command) == 0
        model = upgrade_records.job_model(upgrade_records.DynamoTable(s.table, s.region, s.endpoint_url))
        assert upgrade_records.add_missing_sweep_keys(model) == 0  # a second run writes nothing
    indexed = _IndexedShardsOnly(world)
    sweeper = world.use_cases.sweeper
    indexed.read()
    sweeper.sweep()
    assert set(world.recorded.objects) <= world.stored(), "the sweeper deleted objects of live jobs"
    manage = world.use_cases.manage
    for name, (owner, job_id, _) in world.recorded.jobs().items():
        contains(world.body(manage.get_job(owner, job_id)), world.recorded.bodies[name], name)
    # Past every job's retention: each finished job goes, with every object it names.
    world.at(world.recorded.latest("expires_at") + timedelta(seconds=1))
    indexed.read()
    assert sweeper.sweep()[SweepOutcome.EXPIRED_DELETED] >= 1
    for name, (owner, job_id, status) in world.recorded.jobs().items():
        if not JobStatus(status).terminal:
            continue
        assert world.use_cases.ctx.jobs.get(job_id) is None, f"{name} was not removed"
        left = world.stored() & world.recorded.objects_of(job_id)
        assert not left, f"{name}: the sweeper left {sorted(left)}"


def test_every_recorded_job_is_listed_by_its_owner_without_metadata(world):
    """The list's index (owner, created_at) covers every shape's job items (DynamoDB backfills
    it when the stack adds it: each shape has both attributes), and a job written before
    metadata existed shows none, in the list and to the service principal as to its owner."""
    from chalicelib.usecases.listing import ListQuery

    now = world.use_cases.ctx.clock()
    for owner in ("alice", "bob"):
        expected = {job_id for o, job_id, _ in world.recorded.jobs().values() if o == owner}
        listed, token = [], None
        while True:
            page = world.use_cases.listing.page(owner, owner, ListQuery(page_size=2, page_token=token))
            listed += page.jobs
            token = page.next_page_token
            if token is None:
                break
        live = {j.job_id for j in listed}
        assert live == {j for j in expected if not world.use_cases.ctx.jobs.get(j).is_expired(now)}
        assert [j.created_at for j in listed] == sorted((j.created_at for j in listed), reverse=True)
        for job in listed:
            assert job.metadata == {} and "metadata" not in world.body(job)
            assert world.use_cases.manage.get_any_job(job.job_id).owner == owner
