import pytest

from chalicelib.domain.errors import FileTooLarge, InvalidRequest, UnsupportedFormat
from chalicelib.http.request_body import idempotency_key, image_bytes, json_object

JPEG = b"\xff\xd8\xff\xe0" + b"x" * 100


def multipart(parts, boundary="b0undary"):
    body = b""
    for name, data in parts:
        body += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; "
                 f"filename=\"a.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n").encode()
        body += data + b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def test_file_part_is_extracted_among_other_fields():
    body, ctype = multipart([("caption", b"hello"), ("file", JPEG)])
    assert image_bytes(body, ctype, 1000) == JPEG


def test_raw_image_body_is_taken_as_is():
    assert image_bytes(JPEG, "image/png", 1000) == JPEG  # the header never decides the type
    assert image_bytes(JPEG, "application/octet-stream", 1000) == JPEG


def test_file_over_the_limit_is_413_in_both_shapes():
    body, ctype = multipart([("file", JPEG)])
    with pytest.raises(FileTooLarge):
        image_bytes(body, ctype, 50)
    with pytest.raises(FileTooLarge):
        image_bytes(JPEG, "image/jpeg", 50)


@pytest.mark.parametrize("body,ctype", [
    (multipart([("photo", JPEG)])[0], "multipart/form-data; boundary=b0undary"),
    (b"--x\r\ngarbage", "multipart/form-data; boundary=x"),
    (JPEG, "multipart/form-data"),
    (b"", "image/jpeg"),
])
def test_malformed_or_missing_file_is_invalid_request(body, ctype):
    with pytest.raises(InvalidRequest):
        image_bytes(body, ctype, 1000)


def test_non_image_content_type_is_unsupported():
    with pytest.raises(UnsupportedFormat):
        image_bytes(b'{"a": 1}', "application/json", 1000)


@pytest.mark.parametrize("label", ["image/x-png", "image/pjpeg", "image/jpg", "IMAGE/HEIC; q=1"])
def test_the_aliases_clients_send_are_taken(label):
    assert image_bytes(JPEG, label, 1000) == JPEG


def test_an_image_label_outside_the_binary_types_is_unsupported():
    # API Gateway would have mangled such a body as text; refusing it locally too keeps
    # the two alike.
    with pytest.raises(UnsupportedFormat):
        image_bytes(JPEG, "image/bmp", 1000)


def test_every_type_the_sniffer_accepts_is_a_binary_type():
    from chalicelib.domain import sniff
    from chalicelib.http.request_body import BINARY_TYPES

    assert sniff.ALLOWED_TYPES <= set(BINARY_TYPES)


FIELDS = {"content_type": str, "size": int}


def test_a_json_object_gives_its_members_typed():
    body = b'{"content_type": "image/png", "size": 1472.0}'
    assert json_object(body, "application/json; charset=utf-8", FIELDS) == {
        "content_type": "image/png", "size": 1472}
    assert json_object(b"{}", "application/json", FIELDS) == {}


@pytest.mark.parametrize("body,ctype", [
    (b'{"size": 1}', "text/plain"),                       # not labelled JSON
    (b'{"size": 1', "application/json"),                  # malformed
    (b'[1, 2]', "application/json"),                      # not an object
    (b'{"size": 1.5}', "application/json"),               # not integral
    (b'{"size": true}', "application/json"),              # a bool is no number here
    (b'{"size": NaN}', "application/json"),
    (b'{"size": "12"}', "application/json"),
    (b'{"content_type": 5}', "application/json"),
    (b'{"size": 1, "filename": "a.jpg"}', "application/json"),  # unknown member
    (b'{"size": 1, "x": "' + b"a" * 5000 + b'"}', "application/json"),  # oversized
    (b'{"x": ' + b"[" * 9 + b"]" * 9 + b"}", "application/json"),        # too deep
    (b"[" * 100_000 + b"]" * 100_000, "application/json"),               # hostile depth
])
def test_a_body_that_is_not_the_object_asked_for_is_invalid_request(body, ctype):
    with pytest.raises(InvalidRequest):
        json_object(body, ctype, FIELDS)


def test_brackets_inside_strings_do_not_count_as_nesting():
    body = b'{"content_type": "[[[[[[[[[[[[{{{{{\\"", "size": 3}'
    assert json_object(body, "application/json", FIELDS)["size"] == 3


@pytest.mark.parametrize("key", ["a", "k" * 255, "with inner spaces", "~!@#$%^&*()"])
def test_idempotency_keys_of_printable_ascii_are_taken(key):
    assert idempotency_key(key) == key
    assert idempotency_key(None) is None


@pytest.mark.parametrize("key", ["", " lead", "trail ", "k" * 256, "tab\there", "é"])
def test_idempotency_keys_http_cannot_carry_as_sent_are_invalid(key):
    with pytest.raises(InvalidRequest):
        idempotency_key(key)


def test_too_many_parts_is_invalid_request_not_file_too_large():
    body, ctype = multipart([(f"f{i}", b"") for i in range(200)] + [("file", JPEG)])
    assert len(body) < 50_000
    with pytest.raises(InvalidRequest):
        image_bytes(body, ctype, 1000_000)


def test_too_many_or_too_long_headers_is_invalid_request():
    many = ("--b\r\nContent-Disposition: form-data; name=\"file\"\r\n"
            + "".join(f"X-H{i}: v\r\n" for i in range(20)) + "\r\n").encode() + JPEG + b"\r\n--b--\r\n"
    long = ("--b\r\nContent-Disposition: form-data; name=\"file\"\r\nX-Long: " + "v" * 5000
            + "\r\n\r\n").encode() + JPEG + b"\r\n--b--\r\n"
    for body in (many, long):
        with pytest.raises(InvalidRequest):
            image_bytes(body, "multipart/form-data; boundary=b", 1000_000)


def test_a_file_part_over_the_limit_within_the_envelope_is_413():
    body, ctype = multipart([("file", JPEG + b"x" * 2000)])
    with pytest.raises(FileTooLarge):
        image_bytes(body, ctype, 1000)
