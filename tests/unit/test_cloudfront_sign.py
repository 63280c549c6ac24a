"""DELIVERY=cloudfront: URLs signed with the project's code (a canned policy, the window's
expiry) verify against the public key the distribution trusts, name the rendition's path under
the distribution's `renditions/` origin and nothing else, and are byte-identical across
containers within a window."""
from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qs, urlsplit

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from chalicelib.adapters.cloudfront_sign import CloudFrontPresigner
from chalicelib.adapters.s3_store import S3Store
from chalicelib.config import Settings
from chalicelib.domain.delivery import UrlWindow

DOMAIN, KEY_ID = "d111111abcdef8.cloudfront.net", "K2JCJMDEHXQW5F"
KEY = "renditions/3e8b6a2f-1c4d-4f5e-8a9b-0c1d2e3f4a5b/1/thumb_512.jpg"
NOW = datetime(2026, 12, 1, 10, 41, 7, 654321, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def keys():
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    return pem, private.public_key()


def presigner(pem, reads=None):
    def load():
        if reads is not None:
            reads.append(1)
        return pem
    return CloudFrontPresigner(DOMAIN, KEY_ID, load, "renditions/")


def verify(url: str, public_key) -> tuple[str, int]:
    """What CloudFront checks of a canned-policy URL: the signature over the policy it
    rebuilds from the resource and Expires, with the key named. (resource, expires)."""
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    assert set(query) == {"Expires", "Signature", "Key-Pair-Id"} and query["Key-Pair-Id"] == KEY_ID
    resource = f"{parts.scheme}://{parts.netloc}{parts.path}"
    policy = json.dumps({"Statement": [{"Resource": resource, "Condition": {
        "DateLessThan": {"AWS:EpochTime": int(query["Expires"])}}}]}, separators=(",", ":"))
    signature = base64.b64decode(query["Signature"].translate(str.maketrans("-_~", "+=/")))
    public_key.verify(signature, policy.encode(), padding.PKCS1v15(), hashes.SHA1())
    return resource, int(query["Expires"])


def test_a_url_verifies_with_the_public_key_and_expires_with_its_window(keys):
    pem, public = keys
    window = UrlWindow(3600, 3600)
    url = presigner(pem).url("bucket", KEY, window.expires_in, window.signed_at(NOW))
    resource, expires = verify(url, public)
    assert resource == f"https://{DOMAIN}/3e8b6a2f-1c4d-4f5e-8a9b-0c1d2e3f4a5b/1/thumb_512.jpg"
    assert datetime.fromtimestamp(expires, timezone.utc) == window.expires_at(NOW) == \
        datetime(2026, 12, 1, 12, tzinfo=timezone.utc)


def test_a_tampered_path_or_expiry_does_not_verify(keys):
    pem, public = keys
    url = presigner(pem).url("bucket", KEY, 7200, datetime(2026, 12, 1, 10, tzinfo=timezone.utc))
    for forged in (url.replace("thumb_512.jpg", "display.jpg"), url.replace("/1/", "/2/"),
                   url.replace("Expires=1796", "Expires=1797")):
        with pytest.raises(InvalidSignature):
            verify(forged, public)


@pytest.mark.parametrize("key", ["originals/3e8b6a2f-1c4d-4f5e-8a9b-0c1d2e3f4a5b", "other/x.jpg",
                                 "renditionsX/y.jpg", "3e8b6a2f/1/thumb.jpg"])
def test_no_key_outside_renditions_is_ever_signed(keys, key):
    with pytest.raises(ValueError):
        presigner(keys[0]).url("bucket", key, 7200, NOW)


def test_every_container_gives_the_same_url_in_a_window_and_reads_the_key_once(keys):
    pem, public = keys
    window = UrlWindow(3600, 3600)
    reads: list = []
    one, other = presigner(pem, reads), presigner(pem)
    urls = {one.url("b", KEY, window.expires_in, window.signed_at(NOW + timedelta(minutes=m))) for m in (0, 5, 18)}
    urls.add(other.url("b", KEY, window.expires_in, window.signed_at(NOW)))
    assert len(urls) == 1 and reads == [1]
    later = one.url("b", KEY, window.expires_in, window.signed_at(NOW + timedelta(hours=1)))
    assert later not in urls and verify(later, public)[1] == verify(urls.pop(), public)[1] + 3600


def test_the_store_hands_out_cloudfront_urls_and_the_stage_needs_all_three_settings(keys):
    store = S3Store(None, "bucket", get_presigner=presigner(keys[0]))
    assert store.presign_get(KEY, 7200, NOW).startswith(f"https://{DOMAIN}/3e8b6a2f")
    with pytest.raises(ValueError, match="CLOUDFRONT_"):
        Settings.from_environ({"DELIVERY": "cloudfront", "CLOUDFRONT_DOMAIN": DOMAIN, "LOCAL_RUNNER": "1"})
    with pytest.raises(ValueError, match="DELIVERY"):
        Settings.from_environ({"DELIVERY": "cdn", "LOCAL_RUNNER": "1"})


def test_a_url_handed_out_near_the_jobs_end_verifies_only_until_its_end(keys):
    """The distribution caches the object for the retention: the URL's own expiry is all that
    keeps it from serving past the job. Cut at expires_at (issue 47, item 4), and the same
    URL for both windows that end past it."""
    import dataclasses

    from chalicelib.usecases.manage import ManageJobs
    from tests.unit.test_delivery import make_use_cases, ready_job

    pem, public = keys
    use_cases = make_use_cases()
    job = ready_job(use_cases)
    manage = ManageJobs(dataclasses.replace(use_cases.ctx, objects=S3Store(None, "bucket", get_presigner=presigner(pem))))
    ends = []
    for before in (timedelta(minutes=70), timedelta(minutes=30), timedelta(seconds=5)):
        use_cases.ctx.clock.now = job.expires_at - before
        urls = manage.urls(job)
        ends.append((verify(urls.by_name["display"], public)[1], urls.expires_at, urls.by_name["display"]))
    cut = int(job.expires_at.timestamp())
    assert [expires for expires, _, _ in ends] == [cut] * 3
    assert all(claimed == datetime.fromtimestamp(cut, timezone.utc) for _, claimed, _ in ends)
    assert len({url for _, _, url in ends}) == 1  # CloudFront's URL holds the expiry alone
