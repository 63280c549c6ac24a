import json
from pathlib import Path

import pytest

from chalicelib.domain.errors import PoisonMessage
from chalicelib.domain.events import ObjectCreated, aws_event, rgw_event, minio_event, parse_message

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "events"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_aws_event_gives_the_decoded_key():
    (created,) = parse_message(fixture("aws_s3_put.json"))
    assert created == ObjectCreated(
        bucket="image-jobs", key="originals/my photo(1).jpg", size=1024,
        etag="d41d8cd98f00b204e9800998ecf8427e",
    )


def test_s3_test_event_is_skipped():
    assert parse_message(fixture("aws_s3_test_event.json")) == []


def test_minio_event_gives_the_decoded_key_and_unquoted_etag():
    (created,) = parse_message(fixture("minio_put.json"))
    assert created == ObjectCreated(
        bucket="image-jobs", key="originals/my photo(1).jpg", size=2048,
        etag="5d41402abc4b2a76b9719d911017c592",
    )


# Recorded from the RADOS Gateway (Ceph 16.2.15) over AMQP: a PutObject, a browser POST form
# and a multipart completion, each with the key exactly as stored.
@pytest.mark.parametrize("name, key, size, etag", [
    ("rgw_put.json", "originals/a b+c%/é.jpg", 5, "827ccb0eea8a706c4c34a16891f84e7b"),
    ("rgw_post.json", "originals/post form.jpg", 6, "e80b5017098950fc58aad83c8c14978e"),
    ("rgw_multipart.json", "originals/multi part.jpg", 5242881, "0c62823571cff39c8dddcc6a74e2569f-2"),
])
def test_rgw_events_give_the_key_as_sent_never_unquoted(name, key, size, etag):
    (created,) = parse_message(fixture(name).encode())
    assert created == ObjectCreated(bucket="image-jobs", key=key, size=size, etag=etag)


def test_an_rgw_key_that_looks_encoded_stays_as_it_is():
    """The gateway does not encode: "%41" and "+" in its key are the stored characters, where
    the same text from S3 decodes to "A" and a space."""
    doc = json.loads(fixture("rgw_put.json"))
    doc["Records"][0]["s3"]["object"]["key"] = "originals/100%41+x.jpg"
    (created,) = parse_message(json.dumps(doc))
    assert created.key == "originals/100%41+x.jpg"
    doc["Records"][0]["eventSource"] = "aws:s3"
    (created,) = parse_message(json.dumps(doc))
    assert created.key == "originals/100A x.jpg"


def test_rgw_removals_are_ignored():
    doc = json.loads(fixture("rgw_put.json"))
    doc["Records"][0]["eventName"] = "ObjectRemoved:Delete"
    assert parse_message(json.dumps(doc)) == []


def test_bytes_body_is_accepted_as_from_amqp():
    (created,) = parse_message(fixture("minio_put.json").encode())
    assert created.key == "originals/my photo(1).jpg"


def test_sns_envelope_is_unwrapped():
    body = json.dumps({"Type": "Notification", "Message": fixture("aws_s3_put.json")})
    (created,) = parse_message(body)
    assert created.key == "originals/my photo(1).jpg"


def test_other_event_kinds_are_ignored():
    doc = json.loads(fixture("aws_s3_put.json"))
    doc["Records"][0]["eventName"] = "ObjectRemoved:Delete"
    assert parse_message(json.dumps(doc)) == []


@pytest.mark.parametrize("body", [
    b"\x00\xffgarbage", "not json", "[]", '"text"', '{"hello": "world"}',
    '{"Records": "nope"}', '{"Records": [42]}', '{"Records": [{"eventName": "ObjectCreated:Put"}]}',
    '{"Records": [{"eventName": "ObjectCreated:Put", "s3": {"bucket": {"name": "b"}, "object": {"key": ""}}}]}',
])
def test_poison_messages_are_named_as_such(body):
    with pytest.raises(PoisonMessage):
        parse_message(body)


@pytest.mark.parametrize("build", [aws_event, minio_event, rgw_event])
def test_the_builders_make_what_the_parser_reads_back(build):
    created = ObjectCreated("images", "originals/a b+c%d", 123)
    assert parse_message(json.dumps(build(created))) == [created]


def test_every_amqp_event_shape_the_settings_accept_has_a_builder():
    from chalicelib.config import AMQP_EVENT_SHAPES
    from chalicelib.domain.events import AMQP_EVENT_BUILDERS

    assert tuple(AMQP_EVENT_BUILDERS) == AMQP_EVENT_SHAPES


def test_the_rgw_builder_has_the_recorded_events_members():
    """The resend looks like what the gateway sends: the recorded Put's members, fewer of them."""
    recorded = json.loads(fixture("rgw_put.json"))["Records"][0]
    (built,) = rgw_event(ObjectCreated("image-jobs", "originals/a b+c%/é.jpg", 5))["Records"]
    assert set(built) <= set(recorded)
    assert set(built["s3"]["object"]) <= set(recorded["s3"]["object"])
    assert (built["eventSource"], built["eventName"], built["eventVersion"]) == (
        recorded["eventSource"], "ObjectCreated:Put", recorded["eventVersion"])
    assert built["s3"]["object"]["key"] == recorded["s3"]["object"]["key"]



@pytest.mark.parametrize("size", ["Infinity", "-Infinity", "NaN", "1.5", '"12"', "true", "-1", "1e400"])
def test_a_size_that_is_not_a_byte_count_is_poison(size):
    body = fixture("aws_s3_put.json").replace('"size": 1024', f'"size": {size}')
    assert f'"size": {size}' in body
    with pytest.raises(PoisonMessage):
        parse_message(body)


@pytest.mark.parametrize("body", [
    "[" * 100_000 + "]" * 100_000,
    '{"Records": [{"eventName": "ObjectCreated:Put", "s3": {"bucket": {"name": "b"}, "object": ["k"]}}]}',
    '{"Records": [{"eventName": "ObjectCreated:Put", "s3": {"bucket": {"name": "b"}, "object": {"key": 7}}}]}',
    json.dumps({"Type": "Notification", "Message": json.dumps({"Type": "Notification", "Message": "{}"})}),
])
def test_any_parse_failure_is_poison(body):
    with pytest.raises(PoisonMessage):
        parse_message(body)
