"""Presigned GET URLs signed here, without botocore's S3 client, at a signing time given.

Two reasons. Making the S3 client loads S3's service model and endpoint rules, the largest of
botocore's, and a cold GET of a ready job needs nothing of it but signatures. And botocore
signs at the current second with no option to fix it (boto/botocore#2647), while a URL must
stay the same for a whole window (chalicelib/domain/delivery.py): WindowedQueryAuth is
botocore's S3SigV4QueryAuth with the signing time given instead of read from the clock.

The URL is the one the client would make at that time (tests/unit/test_s3_presign.py compares
them) where its shape is plain: an emulator's endpoint (path style), or a bucket on AWS's
standard partition whose name needs no path style. For any other shape the client makes the
URL and it is signed again here, so the window holds there too.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Callable, Optional
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from botocore import auth
from botocore.auth import SIGV4_TIMESTAMP, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest

# Regions of AWS's standard partition (not China, GovCloud, ISO): for them the client
# presigns on the global host name, bucket.s3.amazonaws.com, whatever the region.
_STANDARD_REGION = re.compile(r"^(us|eu|ap|sa|ca|me|af|il|mx)-[a-z]+-\d$")
# Virtual-hosted names must be valid host labels; a dot would break the TLS certificate.
_VIRTUAL_BUCKET = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")


class WindowedQueryAuth(S3SigV4QueryAuth):
    """S3SigV4QueryAuth signing at `signed_at`: add_auth as botocore's, but for the clock."""

    def __init__(self, credentials, region_name: str, expires: int, signed_at: datetime):
        super().__init__(credentials, "s3", region_name, expires=expires)
        # Naive times are UTC, as botocore's own clock gives them.
        self._signed_at = signed_at if signed_at.tzinfo is None else signed_at.astimezone(timezone.utc)

    def add_auth(self, request: AWSRequest) -> None:
        request.context["timestamp"] = self._signed_at.strftime(SIGV4_TIMESTAMP)
        self._modify_request_before_signing(request)
        canonical_request = self.canonical_request(request)
        string_to_sign = self.string_to_sign(request, canonical_request)
        self._inject_signature_to_request(request, self.signature(string_to_sign, request))


class GetPresigner:
    def __init__(self, credentials: Callable[[], Any], region: str, endpoint_url: Optional[str],
                 client: Any):
        """credentials(): botocore credentials (the session's); client: the S3 client (or a
        lazy one) for the URL shapes not built here."""
        self._credentials = credentials
        self._region = region
        self._endpoint_url = endpoint_url.rstrip("/") if endpoint_url else None
        self._client = client

    def url(self, bucket: str, key: str, expires_in: int, signed_at: Optional[datetime] = None) -> str:
        """Valid from signed_at (default: now) for expires_in seconds."""
        signed_at = signed_at or auth.get_current_datetime()
        base = self._base(bucket)
        if base is None:
            made = self._client.generate_presigned_url(
                "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=expires_in)
            unsigned = urlsplit(made)
            rest = [(k, v) for k, v in parse_qsl(unsigned.query, keep_blank_values=True)
                    if not k.startswith("X-Amz-")]
            url = urlunsplit(unsigned._replace(query=urlencode(rest)))
        else:
            url = base + quote(key, safe="/~")
        request = AWSRequest(method="GET", url=url)
        WindowedQueryAuth(self._credentials().get_frozen_credentials(), self._region, expires_in,
                          signed_at).add_auth(request)
        return request.url

    def _base(self, bucket: str) -> Optional[str]:
        if self._endpoint_url is not None:
            return f"{self._endpoint_url}/{bucket}/"
        if not (_VIRTUAL_BUCKET.match(bucket) and _STANDARD_REGION.match(self._region)):
            return None
        return f"https://{bucket}.s3.amazonaws.com/"
