"""S3Store and the bucket's notification, against moto's server."""
import json
import time
from dataclasses import replace

import pytest
import requests

from chalicelib.bootstrap import build_use_cases
from chalicelib.domain.errors import FileTooLarge, TransientError
from chalicelib.domain.events import parse_message


@pytest.fixture
def store(stack):
    settings, _, _ = stack
    return build_use_cases(settings).ctx.objects


def test_head_tells_a_stored_object_from_a_missing_one(store):
    assert store.head("originals/nothing-here") is None  # 404 is an answer, not an outage
    store.put("originals/h", b"12345", "image/jpeg")
    stored = store.head("originals/h")
    assert stored.size == 5 and stored.last_modified.tzinfo is not None


def test_put_get_delete_round_trip(store):
    store.put("originals/a", b"bytes", "image/jpeg")
    assert store.get("originals/a", 100) == b"bytes"
    store.delete("originals/a")
    store.delete("originals/a")  # a missing object is not an error
    with pytest.raises(KeyError):
        store.get("originals/a", 100)


def test_copy_is_a_server_side_copy_with_the_sources_type_and_cache_control_and_lives_apart(store):
    store.put("renditions/j1/1/display.avif", b"avif bytes", "image/avif", "public, max-age=60")
    store.copy("renditions/j1/1/display.avif", "renditions/j2/1/display.avif")
    store.delete("renditions/j1/1/display.avif")  # the first job deleted: the copy stays
    assert store.get("renditions/j2/1/display.avif", 100) == b"avif bytes"
    assert store.head("renditions/j2/1/display.avif").cache_control == "public, max-age=60"
    url = store.presign_get("renditions/j2/1/display.avif", 60)
    assert requests.get(url, timeout=10).headers["Content-Type"] == "image/avif"
    with pytest.raises(KeyError):
        store.copy("renditions/j1/1/display.avif", "renditions/j3/1/display.avif")


def test_delete_many_removes_every_key_in_batches_and_ignores_missing_ones(store):
    keys = [f"renditions/j{n:04d}/display.jpg" for n in range(1005)]  # two DeleteObjects calls
    for key in keys[:3] + keys[-3:]:
        store.put(key, b"x", "image/jpeg")
    store.put("originals/kept", b"x", "image/jpeg")
    store.delete_many(keys)
    store.delete_many(keys)  # all missing now: still fine
    for key in keys[:3] + keys[-3:]:
        with pytest.raises(KeyError):
            store.get(key, 100)
    assert store.get("originals/kept", 100) == b"x"


def test_get_refuses_objects_over_the_limit_without_reading_them(store):
    store.put("originals/big", b"x" * 1000, "image/jpeg")
    with pytest.raises(FileTooLarge):
        store.get("originals/big", 999)


def test_presigned_url_serves_the_bytes(store):
    store.put("renditions/j/display.jpg", b"jpeg-bytes", "image/jpeg")
    response = requests.get(store.presign_get("renditions/j/display.jpg", 60), timeout=10)
    assert response.status_code == 200 and response.content == b"jpeg-bytes"


def test_dead_endpoint_is_a_transient_error(stack):
    settings, _, _ = stack
    dead = build_use_cases(replace(settings, s3_endpoint_url="http://127.0.0.1:9")).ctx.objects
    with pytest.raises(TransientError):
        dead.head("originals/a")  # a refused connection is an outage, never "missing"
    with pytest.raises(TransientError):
        dead.put("originals/a", b"x", "image/jpeg")
    with pytest.raises(TransientError):
        dead.get("originals/a", 10)


def receive_all(sqs, queue_url, wait=2.0):
    bodies, deadline = [], time.monotonic() + wait
    while time.monotonic() < deadline:
        for m in sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10,
                                     WaitTimeSeconds=1).get("Messages", []):
            bodies.append(m["Body"])
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
    return bodies


def test_only_originals_notify_the_queue_with_a_parseable_event(stack, store):
    settings, provisioned, clients = stack
    receive_all(clients["sqs"], provisioned.queue_url, wait=1)  # drop the s3:TestEvent
    store.put("originals/photo one.jpg", b"x", "image/jpeg")
    store.put("renditions/j/display.jpg", b"y", "image/jpeg")
    bodies = receive_all(clients["sqs"], provisioned.queue_url)
    assert len(bodies) == 1, bodies
    (created,) = parse_message(bodies[0])
    assert (created.bucket, created.key, created.size) == (settings.bucket, "originals/photo one.jpg", 1)


def test_queue_has_a_dead_letter_queue(stack):
    _, provisioned, clients = stack
    attrs = clients["sqs"].get_queue_attributes(
        QueueUrl=provisioned.queue_url, AttributeNames=["RedrivePolicy"])["Attributes"]
    redrive = json.loads(attrs["RedrivePolicy"])
    dead_letter_arn = clients["sqs"].get_queue_attributes(
        QueueUrl=provisioned.dead_letter_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert redrive["deadLetterTargetArn"] == dead_letter_arn
