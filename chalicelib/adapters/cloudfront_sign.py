"""Rendition URLs as CloudFront signed URLs (DELIVERY=cloudfront): a canned policy whose expiry
is the URL window's (chalicelib/domain/delivery.py), signed with the distribution's trusted
key group's private key. RSA-SHA1 PKCS#1 v1.5 is deterministic, and the URL holds no
credential of the function: the same window gives byte-identical URLs in every container,
across credential rotation.

The distribution's origin is the bucket's `renditions/` prefix (infra/template.yaml,
OriginPath), so a URL's path is the key under it; no other key is ever signed here.
"""
from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Callable, Optional
from urllib.parse import quote

from botocore.signers import CloudFrontSigner


class CloudFrontPresigner:
    def __init__(self, domain: str, key_pair_id: str, private_key_pem: Callable[[], str], prefix: str):
        """private_key_pem(): the PEM, read on the first signature only (once per warm
        function); prefix: the renditions' prefix, the distribution's origin path."""
        self._base = f"https://{domain.strip('/')}/"
        self._key_pair_id = key_pair_id
        self._load = private_key_pem
        self._prefix = prefix
        self._signer: Optional[CloudFrontSigner] = None
        self._lock = threading.Lock()

    def url(self, bucket: str, key: str, expires_in: int, signed_at: Optional[datetime] = None) -> str:
        """Valid until signed_at + expires_in (the window's urls_expire_at), whole seconds."""
        if not key.startswith(self._prefix):
            raise ValueError("only renditions are delivered through the distribution")
        signed_at = signed_at or datetime.now(timezone.utc)
        expires = signed_at + timedelta(seconds=expires_in)
        url = self._base + quote(key[len(self._prefix):], safe="/~")
        return self._cloudfront().generate_presigned_url(url, date_less_than=expires)

    def _cloudfront(self) -> CloudFrontSigner:
        with self._lock:
            if self._signer is None:
                # cryptography is imported only where the stage delivers through CloudFront.
                from cryptography.hazmat.primitives import hashes, serialization
                from cryptography.hazmat.primitives.asymmetric import padding

                key = serialization.load_pem_private_key(self._load().encode(), password=None)
                self._signer = CloudFrontSigner(
                    self._key_pair_id, lambda message: key.sign(message, padding.PKCS1v15(), hashes.SHA1()))
            return self._signer
