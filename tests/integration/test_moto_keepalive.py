"""moto's server (local/moto_server.py, on waitress) keeps connections alive as AWS does, and
still answers what werkzeug's server did: a body cut short is never stored, chunked and
aws-chunked bodies arrive whole, answers without a body (HEAD, 304) keep the connection usable."""
from __future__ import annotations

import http.client
import socket
import threading
import time
import uuid
import zlib
from base64 import b64encode
from urllib.parse import urlsplit

import pytest
import urllib3.util.connection
from botocore.exceptions import ClientError

from local.services import aws_client


@pytest.fixture
def s3(moto_endpoint):
    return aws_client("s3", "us-east-1", moto_endpoint)


@pytest.fixture
def bucket(s3):
    name = f"keepalive-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=name)
    return name


def address(endpoint: str) -> tuple[str, int]:
    parts = urlsplit(endpoint)
    return parts.hostname, parts.port


def test_two_requests_over_one_connection_use_it_both_times(moto_endpoint):
    connection = http.client.HTTPConnection(*address(moto_endpoint), timeout=10)
    ports = []
    for _ in range(2):
        connection.request("GET", "/")  # ListBuckets
        answer = connection.getresponse()
        answer.read()
        assert answer.status == 200 and not answer.will_close
        ports.append(connection.sock.getsockname()[1])
    connection.close()
    assert ports[0] == ports[1]  # http.client would have connected again after a close


def test_botocore_connects_once_for_many_calls(moto_endpoint, monkeypatch):
    dynamodb = aws_client("dynamodb", "us-east-1", moto_endpoint)
    connects = []
    create = urllib3.util.connection.create_connection
    monkeypatch.setattr(urllib3.util.connection, "create_connection",
                        lambda *args, **kwargs: connects.append(args[0]) or create(*args, **kwargs))
    for _ in range(5):
        dynamodb.list_tables(Limit=1)
    assert len(connects) == 1


def cut_upload(endpoint: str, path: str, announced: int, sent: int) -> None:
    """A PUT that announces `announced` bytes, sends `sent`, and closes: a client that died."""
    with socket.create_connection(address(endpoint), timeout=10) as sock:
        sock.sendall(f"PUT {path} HTTP/1.1\r\nHost: {address(endpoint)[0]}\r\n"
                     f"Content-Length: {announced}\r\nContent-Type: application/octet-stream\r\n\r\n".encode())
        sock.sendall(b"x" * sent)
    time.sleep(0.3)  # what the server would do with it, it has done by now


def test_an_upload_cut_short_is_not_stored(moto_endpoint, s3, bucket):
    cut_upload(moto_endpoint, f"/{bucket}/cut", announced=1_000_000, sent=600_000)
    with pytest.raises(ClientError) as missing:
        s3.head_object(Bucket=bucket, Key="cut")
    assert missing.value.response["Error"]["Code"] == "404"


def test_a_part_cut_short_is_not_stored(moto_endpoint, s3, bucket):
    upload = s3.create_multipart_upload(Bucket=bucket, Key="parts")["UploadId"]
    url = s3.generate_presigned_url("upload_part", Params={
        "Bucket": bucket, "Key": "parts", "UploadId": upload, "PartNumber": 1})
    parts = urlsplit(url)
    cut_upload(moto_endpoint, f"{parts.path}?{parts.query}", announced=6_000_000, sent=3_000_000)
    assert s3.list_parts(Bucket=bucket, Key="parts", UploadId=upload).get("Parts", []) == []


def test_a_60_mb_put_is_stored_whole(s3, bucket):
    body = b"\x01" * (60 * 1024 * 1024)
    s3.put_object(Bucket=bucket, Key="large", Body=body)
    assert s3.head_object(Bucket=bucket, Key="large")["ContentLength"] == len(body)


def test_a_chunked_body_is_stored_dechunked(moto_endpoint, bucket, s3):
    body = bytes(range(256)) * 1000
    url = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "chunked"})
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(*address(moto_endpoint), timeout=10)
    pieces = (body[i:i + 70_000] for i in range(0, len(body), 70_000))
    connection.request("PUT", f"{parts.path}?{parts.query}", body=pieces, encode_chunked=True)
    answer = connection.getresponse()
    answer.read()
    assert answer.status == 200
    assert s3.get_object(Bucket=bucket, Key="chunked")["Body"].read() == body


def test_an_aws_chunked_body_with_its_trailing_checksum_is_stored_decoded(s3, bucket):
    """botocore sends a streaming upload's checksum in a trailer over HTTPS (aws-chunked in
    Transfer-Encoding: chunked); over HTTP it would not, so it is told to here."""
    def trailer(params, **_):
        params["context"]["checksum"]["request_algorithm"]["in"] = "trailer"

    s3.meta.events.register("before-call.s3.PutObject", trailer)
    body = b"pixels" * 50_000
    s3.put_object(Bucket=bucket, Key="aws-chunked", Body=body, ChecksumAlgorithm="CRC32")
    stored = s3.get_object(Bucket=bucket, Key="aws-chunked", ChecksumMode="ENABLED")
    assert stored["Body"].read() == body
    assert stored["ChecksumCRC32"] == b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()


def test_metadata_named_with_underscores_keeps_its_names(s3, bucket):
    s3.put_object(Bucket=bucket, Key="meta", Body=b"x", Metadata={"my_key": "1", "other-key": "2"})
    assert s3.head_object(Bucket=bucket, Key="meta")["Metadata"] == {"my_key": "1", "other-key": "2"}


def test_an_encoded_slash_in_a_key_is_part_of_the_key(moto_endpoint, s3, bucket):
    s3.put_object(Bucket=bucket, Key="a/b", Body=b"slash")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "a/b"})
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(*address(moto_endpoint), timeout=10)
    connection.request("GET", f"{parts.path.replace('a/b', 'a%2Fb')}?{parts.query}")
    answer = connection.getresponse()
    assert (answer.status, answer.read()) == (200, b"slash")


def test_answers_without_a_body_leave_the_connection_usable(moto_endpoint, s3, bucket):
    """HEAD, 304 and 204 (DeleteObject) answers, then one with a body, all on one connection."""
    put = s3.put_object(Bucket=bucket, Key="etag", Body=b"0123456789")
    connection = http.client.HTTPConnection(*address(moto_endpoint), timeout=10)

    def ask(method, **headers):
        operation = "delete_object" if method == "DELETE" else "get_object"
        url = s3.generate_presigned_url(operation, Params={"Bucket": bucket, "Key": "etag"})
        parts = urlsplit(url)
        connection.request(method, f"{parts.path}?{parts.query}", headers=headers)
        answer = connection.getresponse()
        return answer.status, answer.getheader("Content-Length"), answer.read(), connection.sock.getsockname()

    head = ask("HEAD")
    not_modified = ask("GET", **{"If-None-Match": put["ETag"]})
    got = ask("GET")
    deleted = ask("DELETE")
    gone = ask("GET")
    assert head[:3] == (200, "10", b"")
    assert not_modified[0] == 304 and not_modified[2] == b""
    assert got[:3] == (200, "10", b"0123456789")
    assert deleted[0] == 204 and gone[0] == 404 and b"NoSuchKey" in gone[2]
    assert len({head[3], not_modified[3], got[3], deleted[3], gone[3]}) == 1


def test_long_polls_hold_no_other_request_up(moto_endpoint):
    """Eight receives wait on an empty queue; another call is answered while they still wait."""
    sqs = aws_client("sqs", "us-east-1", moto_endpoint)
    queue = sqs.create_queue(QueueName=f"keepalive-{uuid.uuid4().hex[:10]}")["QueueUrl"]
    ended = []

    def poll():
        aws_client("sqs", "us-east-1", moto_endpoint).receive_message(QueueUrl=queue, WaitTimeSeconds=3)
        ended.append(time.monotonic())

    polls = [threading.Thread(target=poll) for _ in range(8)]
    for thread in polls:
        thread.start()
    time.sleep(0.5)
    sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])
    answered = time.monotonic()
    for thread in polls:
        thread.join(30)
    assert len(ended) == 8 and answered < min(ended)
