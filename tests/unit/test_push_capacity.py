"""The push figures infra/capacity.py takes from the code, counted again: the messages one
image sends a watching connection by each path, and the size of the largest message against
API Gateway's 32 KB billing unit."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from infra import capacity as cap
from tests.unit.test_push import created_event, received, world
from tests.images import jpeg


def test_an_image_sends_a_watching_connection_the_messages_the_model_counts():
    use_cases, fanout, _ = world()
    use_cases.push.connect("alice", "c1")
    job = use_cases.uploads.accept_upload("alice", jpeg(640, 480)).job
    use_cases.worker.handle_object_created(created_event(job))
    assert fanout.drain()
    assert len(received(use_cases, "c1")) == cap.PUSH_MESSAGES["upload"]

    use_cases, fanout, _ = world()
    use_cases.push.connect("alice", "c1")
    data = jpeg(640, 480)
    job = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", len(data), method="PUT").job
    use_cases.ctx.objects.put(job.original_key, data, "image/jpeg")  # the client's PUT
    use_cases.worker.handle_object_created(created_event(job))
    assert fanout.drain()
    statuses = [m["job"]["status"] for m in received(use_cases, "c1")]
    assert statuses == ["awaiting_upload", "queued", "processing", "ready"]
    assert len(statuses) == cap.PUSH_MESSAGES["direct_upload"]


def test_a_ready_jobs_message_with_every_variant_and_cloud_length_urls_is_one_32_kb_unit():
    """Presigned in Lambda, each URL carries the role's session token (about 1 KB; 2 KB here)."""
    from chalicelib.adapters.s3_presign import GetPresigner
    from chalicelib.domain.jobs import Job, JobStatus, Rendition, Variant
    from chalicelib.domain.renditions import ALWAYS, RenditionFormat, RenditionName
    from chalicelib.http.views import push_body
    from chalicelib.usecases.push import message
    from chalicelib.usecases.results import Urls

    class Credentials:
        access_key, secret_key, token = "ASIA" + "A" * 16, "s" * 40, "T" * 2048

        def get_frozen_credentials(self):
            return self

    now = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)
    sign = GetPresigner(lambda: Credentials(), "us-east-1", None, client=None)
    extra = (RenditionFormat.WEBP, RenditionFormat.AVIF)
    renditions = {name: Rendition(f"renditions/{'4b0e' * 8}/{name}.jpg", 1280, 960,
                                  variants={f: Variant(f"renditions/{'4b0e' * 8}/{name}.{f}", 100_000) for f in extra})
                  for name in RenditionName}
    job = Job(job_id="4b0e" * 8, owner="alice", status=JobStatus.READY, created_at=now, updated_at=now,
              expires_at=now + timedelta(days=7), original_key="originals/x", renditions=renditions)
    bucket = "image-jobs-dev-123456789012-images"
    urls = Urls(by_name={name: sign.url(bucket, r.key, 900) for name, r in renditions.items()},
                expires_at=now + timedelta(minutes=15),
                variants={(name, f): sign.url(bucket, v.key, 900) for name, r in renditions.items()
                          for f, v in r.variants.items()})
    assert all("T" * 2048 in url for url in urls.by_name.values())
    body = message(push_body(job, urls)).encode()
    assert len(urls.by_name) + len(urls.variants) == 3 * len(RenditionName)
    # The URLs are most of it (docs/scale.md §9: 20 KB with every variant and 2 KB tokens); the
    # display's and thumb's JPEGs come twice, as GET shows them (image_url and thumb_url, and
    # under renditions).
    assert body.count(b"T" * 2048) == len(ALWAYS) + len(urls.by_name) + len(urls.variants)
    assert len(body) <= cap.WS_MESSAGE_UNIT_BYTES * cap.PUSH_MESSAGE_UNITS
