"""EdgeCache on CloudFront (DELIVERY=cloudfront with INVALIDATE_ON_DELETE=1): CreateInvalidation
of one wildcard path, the objects' prefix as the distribution's URLs name it.

One path a call, whatever the number of files: CloudFront bills per path (a wildcard path is
one), and has at most 15 wildcard paths in progress per distribution (docs/scale.md,
"Invalidating CloudFront on DELETE"). The CallerReference is the path itself: a request
repeated with it is the one CloudFront already has, not a new one billed again.
"""
from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.domain.errors import TransientError


class CloudFrontInvalidator:
    def __init__(self, client, distribution_id: str, prefix: str):
        """client: a CloudFront client with short timeouts and one attempt (bootstrap.py);
        prefix: the renditions' prefix, the distribution's origin path (as CloudFrontPresigner)."""
        self._client = client
        self._distribution_id = distribution_id
        self._prefix = prefix

    def invalidate(self, key_prefix: str) -> None:
        if not key_prefix.startswith(self._prefix):
            raise ValueError("only renditions are delivered through the distribution")
        path = "/" + key_prefix[len(self._prefix):] + "*"
        try:
            self._client.create_invalidation(DistributionId=self._distribution_id, InvalidationBatch={
                "Paths": {"Quantity": 1, "Items": [path]}, "CallerReference": path})
        except (BotoCoreError, ClientError) as error:
            # Slow (a timeout), refused (TooManyInvalidationsInProgress, AccessDenied) or down.
            raise TransientError(f"CloudFront did not take the invalidation: {error}") from error
