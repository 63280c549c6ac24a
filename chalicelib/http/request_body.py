"""The bodies of requests: the image of an upload (multipart `file` part or raw bytes), the
JSON object of a direct upload and the parts of a multipart upload's completion.

HTTP-shaped parsing lives here so that app.py stays wiring and the use cases see values.
"""
from __future__ import annotations

import io
import json
import re
from datetime import datetime, timedelta, timezone
from typing import Optional

from chalicelib.domain import focus, sniff
from chalicelib.domain.focus import Focus
from chalicelib.domain.errors import FileTooLarge, InvalidRequest, UnsupportedFormat
# The Idempotency-Key header's check is the domain's rule.
from chalicelib.domain.idempotency import check_idempotency_key as idempotency_key
from chalicelib.http import auth

MULTIPART = "multipart/form-data"
JSON = "application/json"
# Labels a raw image body may carry. The label never decides the type (the bytes do), but in
# the cloud API Gateway passes a body through untouched only when its label is a binary media
# type, so the route takes exactly these, and app.py lists them all as binary types.
IMAGE_ALIASES = ("image/jpg", "image/pjpeg", "image/x-png")
RAW_TYPES = (*sorted(sniff.ALLOWED_TYPES), *IMAGE_ALIASES, "application/octet-stream")
BINARY_TYPES = (MULTIPART, *RAW_TYPES)
# Room for the multipart envelope around a file at the size limit.
MULTIPART_OVERHEAD = 64 * 1024
# A multipart body's structure (the contract's numbers, which are also the multipart
# package's defaults): past any of them the body is malformed, 400 invalid_request.
MULTIPART_MAX_PARTS = 128
MULTIPART_MAX_HEADERS = 8
MULTIPART_MAX_HEADER_BYTES = 4224
# {"content_type": ..., "size": ...} is under 100 bytes, its metadata at most 2 KiB of UTF-8
# (more as \u escapes); anything near this is not one.
MAX_JSON_BYTES = 16384
# Nesting a JSON object may have; ours has one level. Deeper bodies are refused before
# they are parsed, so a hostile one never reaches the parser's recursion limit.
MAX_JSON_DEPTH = 8


def formats_param(value: Optional[str]) -> list[str]:
    """`?formats=avif,webp` -> ["avif", "webp"] (and `?renditions=` alike); the use case
    checks the names."""
    return [name for name in (value or "").split(",") if name.strip()]


def focus_param(params) -> Optional[Focus]:
    """`?focus=x,y` (POST /images) -> the client's Focus, or None without the parameter;
    400 invalid_request when malformed or given more than once."""
    if not params or "focus" not in params:
        return None
    given = params.getlist("focus") if hasattr(params, "getlist") else [params["focus"]]
    if len(given) != 1:
        raise InvalidRequest("'focus' may be given once")
    return focus.parse_query(given[0])


def focus_member(body: dict) -> Optional[Focus]:
    """`"focus": {"x": ..., "y": ...}` of a JSON body (POST /uploads) -> the client's Focus,
    or None without the member (null is no focus: 400)."""
    return focus.parse_object(body["focus"]) if "focus" in body else None


def media_type(content_type: str) -> str:
    """`image/JPEG; q=1` -> `image/jpeg`."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def max_request_bytes(max_upload_bytes: int) -> int:
    """The largest body any route reads: a file at the limit in its multipart envelope."""
    return max_upload_bytes + MULTIPART_OVERHEAD


def image_bytes(body: bytes, content_type: str, max_bytes: int) -> bytes:
    import multipart  # here, not at the top: only uploads need it, a cold GET does not

    ctype, options = multipart.parse_options_header(content_type or "")
    ctype = ctype.strip().lower()
    if ctype == MULTIPART:
        return _file_part(body, options.get("boundary", ""), max_bytes)
    if ctype in RAW_TYPES:
        if len(body) > max_bytes:
            raise FileTooLarge(f"The file is larger than {max_bytes} bytes")
        if not body:
            raise InvalidRequest("The request body is empty")
        return body
    raise UnsupportedFormat("Send multipart/form-data with a 'file' part, or the image bytes "
                            "labelled with one of: " + ", ".join(RAW_TYPES))


def _file_part(body: bytes, boundary: str, max_bytes: int) -> bytes:
    if not boundary:
        raise InvalidRequest("multipart/form-data without a boundary")
    if len(body) > max_bytes + MULTIPART_OVERHEAD:
        raise FileTooLarge(f"The file is larger than {max_bytes} bytes")
    import multipart

    # The body's length is bounded above, so the parser's byte limits are that bound and only
    # its structure limits (parts, headers a part, a header's length) can be reached: those
    # are a malformed request, not a large file. The file's own size is checked below.
    parser = multipart.MultipartParser(
        io.BytesIO(body), boundary, content_length=len(body),
        spool_limit=len(body) + 1, memory_limit=len(body) + 1,
        part_limit=MULTIPART_MAX_PARTS, header_limit=MULTIPART_MAX_HEADERS,
        headersize_limit=MULTIPART_MAX_HEADER_BYTES,
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
        raise InvalidRequest("The multipart body has too many parts, or a part too many or "
                             "too long headers") from None
    except multipart.MultipartError:
        raise InvalidRequest("The multipart body could not be parsed") from None
    raise InvalidRequest("The multipart body has no 'file' part")


def json_object(body: bytes, content_type: str, fields: dict[str, type]) -> dict:
    """The JSON object of a request, with exactly the members in `fields` that it has.

    A member's type is int, str, list (of strings), dict (an object; null is not one), or
    object (any JSON value, which the caller checks). An integral number such as 1472.0 is an int: JSON has one number type,
    and JSON Schema calls 1472.0 an integer.
    """
    if media_type(content_type) != JSON:
        raise InvalidRequest("Send the body as application/json")
    if len(body) > MAX_JSON_BYTES:
        raise InvalidRequest(f"The JSON body is larger than {MAX_JSON_BYTES} bytes")
    if _depth(body) > MAX_JSON_DEPTH:
        raise InvalidRequest("The JSON body is nested too deeply")
    try:
        value = json.loads(body or b"")
    except (ValueError, RecursionError):
        raise InvalidRequest("The body is not valid JSON") from None
    if not isinstance(value, dict):
        raise InvalidRequest("The body must be a JSON object")
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise InvalidRequest("Unknown members: " + ", ".join(unknown)[:200])
    return {name: _typed(name, value[name], kind) for name, kind in fields.items() if name in value}


def _typed(name: str, value: object, kind: type):
    if kind is object:
        return value
    if kind is list:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise InvalidRequest(f"'{name}' must be an array of strings")
        return value
    if kind is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InvalidRequest(f"'{name}' must be {_KIND_NAMES[kind]}")
    return value


_KIND_NAMES = {int: "an integer", str: "a string", list: "an array", dict: "a JSON object"}


def completed_parts(body: bytes, content_type: str) -> Optional[list[tuple[int, str]]]:
    """The parts of a multipart upload's completion, [(number, etag)]; None for an empty
    body, which asks the server to take the parts storage holds."""
    if not body or not body.strip():
        return None
    parts = json_object(body, content_type, {"parts": object}).get("parts")
    if parts is None:
        return None
    if not isinstance(parts, list):
        raise InvalidRequest("'parts' must be an array")
    chosen = []
    for part in parts:
        if not isinstance(part, dict) or set(part) != {"part_number", "etag"}:
            raise InvalidRequest('Each part must be {"part_number": <int>, "etag": "<ETag>"}')
        number, etag = _typed("part_number", part["part_number"], int), _typed("etag", part["etag"], str)
        chosen.append((number, etag))
    return chosen


def _depth(body: bytes) -> int:
    """The deepest nesting of brackets outside strings, without parsing."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return deepest


# GET /image-jobs's parameters (docs/contract.md "The list"); `owner` on the service's list.
_LIST_PARAMS = frozenset({"page_size", "page_token", "status", "created_after", "created_before"})


def list_query(params, with_owner: bool = False):
    """The list's query from the query string (a Chalice MultiDict, or None): `status` may be
    repeated or comma-separated. Unknown parameters are refused, so a typo never silently
    lists everything. With `with_owner`, (query, owner); `owner` is required there."""
    from chalicelib.domain.jobs import JobStatus
    from chalicelib.usecases.listing import DEFAULT_PAGE_SIZE, ListQuery

    params = params or {}
    allowed = _LIST_PARAMS | ({"owner"} if with_owner else set())
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise InvalidRequest("Unknown parameters: " + ", ".join(unknown)[:200])
    values = (lambda k: params.getlist(k)) if hasattr(params, "getlist") else (lambda k: [params[k]])

    def one(name):
        got = values(name) if name in params else []
        if len(got) > 1:
            raise InvalidRequest(f"'{name}' may be given once")
        return got[0] if got else None

    size = one("page_size")
    if size is not None and not re.fullmatch(r"[0-9]{1,4}", size):
        raise InvalidRequest("page_size must be a whole number")
    statuses = set()
    for text in (values("status") if "status" in params else []):
        for name in filter(None, (n.strip() for n in text.split(","))):
            try:
                statuses.add(JobStatus(name))
            except ValueError:
                raise InvalidRequest(f"Unknown status '{name[:40]}'") from None
    query = ListQuery(page_size=int(size) if size is not None else DEFAULT_PAGE_SIZE,
                      page_token=one("page_token"), statuses=frozenset(statuses),
                      created_after=_time("created_after", one("created_after"), upper=False),
                      created_before=_time("created_before", one("created_before"), upper=True))
    if not with_owner:
        return query
    owner = one("owner")
    if owner and len(owner.encode("utf-8", "surrogatepass")) > auth.MAX_SUBJECT_BYTES:
        # No token can carry such a subject (chalicelib/http/auth.py): no such owner.
        raise InvalidRequest(f"'owner' is a token subject: at most {auth.MAX_SUBJECT_BYTES} bytes of UTF-8")
    if not owner:
        raise InvalidRequest("The service's list needs 'owner': listing every owner's jobs at once "
                             "would read the whole table (the service webhook tells every job)")
    return query, owner


# RFC 3339's date-time (its section 5.6) and nothing else: no ISO 8601 basic form, week or
# ordinal dates, omitted seconds or zone. "T" and "Z" may be lower case (5.6's note); the
# fraction has any number of digits (.NET writes 7, Go and Java up to 9).
_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?"
                      r"(?:[Zz]|([+-])(\d{2}):(\d{2}))", re.ASCII)
_MICROSECOND = timedelta(microseconds=1)
_GREGORIAN_CYCLE = timedelta(days=146_097)  # 400 years


def _time(name: str, value: Optional[str], upper: bool) -> Optional[datetime]:
    """A bound of the list's times, None when absent, in UTC and rounded to the microsecond a
    job's created_at has: a lower bound down, an `upper` one up, so that an exclusive bound
    leaves out exactly the jobs its text does. A leap second (:60) is the end of its minute.
    400 when malformed, and when outside the times the store can hold (years 1-9999 in UTC)."""
    if value is None:
        return None
    malformed = InvalidRequest(f"'{name}' must be an RFC 3339 time with a zone, e.g. 2026-07-15T10:00:00Z")
    match = _RFC3339.fullmatch(value)
    if match is None:
        raise malformed
    year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
    digits, sign, offset_hours, offset_minutes = match.group(7, 8, 9, 10)
    digits = digits or ""
    micro, finer = int(digits[:6].ljust(6, "0")), digits[6:].strip("0") != ""
    if second == 60:
        second, micro, finer = 59, 999_999, True
    if sign and (int(offset_hours) > 23 or int(offset_minutes) > 59):
        raise malformed
    zone = timezone.utc if not sign else timezone(
        (1 if sign == "+" else -1) * timedelta(hours=int(offset_hours), minutes=int(offset_minutes)))
    out_of_range = InvalidRequest(f"'{name}' is outside the times a job can have, "
                                  f"0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z")
    # Year 0 has no datetime, but with an offset its last hours are year 1 in UTC: it is
    # taken as year 400, whose calendar is the same, and moved back after.
    shift = _GREGORIAN_CYCLE if year == 0 else timedelta(0)
    try:
        local = datetime(year or 400, month, day, hour, minute, second, micro, zone)
    except ValueError:  # month 13, February 30, hour 24, ...
        raise malformed from None
    try:
        at = local.astimezone(timezone.utc) - shift
        # The time the text names lies between `at` and the next microsecond, which must
        # exist too.
        later = at + _MICROSECOND if finer else at
    except OverflowError:
        raise out_of_range from None
    return later if upper else at
