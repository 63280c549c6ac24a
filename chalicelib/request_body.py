"""The image bytes of an upload request: multipart `file` part or a raw body.

HTTP-shaped parsing lives here so that app.py stays wiring and service.py sees bytes.
"""
from __future__ import annotations

import io

from chalicelib.errors import FileTooLarge, InvalidRequest, UnsupportedFormat

# A raw body must say it is an image (or opaque bytes); the real type is sniffed later.
RAW_TYPES = ("application/octet-stream",)
# Room for the multipart envelope around a file at the size limit.
MULTIPART_OVERHEAD = 64 * 1024


def image_bytes(body: bytes, content_type: str, max_bytes: int) -> bytes:
    import multipart  # here, not at the top: only uploads need it, a cold GET does not

    ctype, options = multipart.parse_options_header(content_type or "")
    ctype = ctype.lower()
    if ctype == "multipart/form-data":
        return _file_part(body, options.get("boundary", ""), max_bytes)
    if ctype.startswith("image/") or ctype in RAW_TYPES:
        if len(body) > max_bytes:
            raise FileTooLarge(f"The file is larger than {max_bytes} bytes")
        if not body:
            raise InvalidRequest("The request body is empty")
        return body
    raise UnsupportedFormat("Send multipart/form-data with a 'file' part, or raw image bytes")


def _file_part(body: bytes, boundary: str, max_bytes: int) -> bytes:
    if not boundary:
        raise InvalidRequest("multipart/form-data without a boundary")
    if len(body) > max_bytes + MULTIPART_OVERHEAD:
        raise FileTooLarge(f"The file is larger than {max_bytes} bytes")
    import multipart

    parser = multipart.MultipartParser(
        io.BytesIO(body), boundary, content_length=len(body),
        partsize_limit=max_bytes + 1, spool_limit=max_bytes + 1,
        memory_limit=max_bytes + MULTIPART_OVERHEAD,
    )
    try:
        for part in parser:
            if part.name == "file":
                data = part.raw
                if len(data) > max_bytes:
                    raise FileTooLarge(f"The file is larger than {max_bytes} bytes")
                if not data:
                    raise InvalidRequest("The 'file' part is empty")
                return data
    except multipart.ParserLimitReached:
        raise FileTooLarge(f"The file is larger than {max_bytes} bytes") from None
    except multipart.MultipartError:
        raise InvalidRequest("The multipart body could not be parsed") from None
    raise InvalidRequest("The multipart body has no 'file' part")
