"""Presigned GET URLs signed here, without botocore's S3 client.

Making the S3 client loads S3's service model and endpoint rules, the largest of botocore's,
and a cold GET of a ready job needs nothing of it but two signatures. The URL is the one the
client would make (tests/unit/test_s3_presign.py compares them) where its shape is plain:
an emulator's endpoint (path style), or a bucket on AWS's standard partition whose name
needs no path style. Anything else is left to the client.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Optional
from urllib.parse import quote

from botocore.auth import S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest

# Regions of AWS's standard partition (not China, GovCloud, ISO): for them the client
# presigns on the global host name, bucket.s3.amazonaws.com, whatever the region.
_STANDARD_REGION = re.compile(r"^(us|eu|ap|sa|ca|me|af|il|mx)-[a-z]+-\d$")
# Virtual-hosted names must be valid host labels; a dot would break the TLS certificate.
_VIRTUAL_BUCKET = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")


class GetPresigner:
    def __init__(self, credentials: Callable[[], Any], region: str, endpoint_url: Optional[str],
                 client: Any):
        """credentials(): botocore credentials (the session's); client: the S3 client (or a
        lazy one) for the URLs not signed here."""
        self._credentials = credentials
        self._region = region
        self._endpoint_url = endpoint_url.rstrip("/") if endpoint_url else None
        self._client = client

    def url(self, bucket: str, key: str, expires_in: int) -> str:
        base = self._base(bucket)
        if base is None:
            return self._client.generate_presigned_url(
                "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=expires_in)
        request = AWSRequest(method="GET", url=base + quote(key, safe="/~"))
        S3SigV4QueryAuth(self._credentials().get_frozen_credentials(), "s3", self._region,
                         expires=expires_in).add_auth(request)
        return request.url

    def _base(self, bucket: str) -> Optional[str]:
        if self._endpoint_url is not None:
            return f"{self._endpoint_url}/{bucket}/"
        if not (_VIRTUAL_BUCKET.match(bucket) and _STANDARD_REGION.match(self._region)):
            return None
        return f"https://{bucket}.s3.amazonaws.com/"
