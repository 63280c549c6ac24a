import pytest

from chalicelib.errors import FileTooLarge, InvalidRequest, UnsupportedFormat
from chalicelib.request_body import image_bytes

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
