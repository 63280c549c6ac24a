import json
from pathlib import Path

import pytest

from chalicelib.domain.errors import PoisonMessage
from chalicelib.domain.events import ObjectCreated, aws_event, minio_event, parse_message

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


@pytest.mark.parametrize("build", [aws_event, minio_event])
def test_the_builders_make_what_the_parser_reads_back(build):
    created = ObjectCreated("images", "originals/a b+c%d", 123)
    assert parse_message(json.dumps(build(created))) == [created]


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
