"""The use cases, one module each, all given the same Context (chalicelib/usecases/context.py):

  uploads.Uploads       POST /images, the bytes through the API
  direct_uploads.DirectUploads  POST /uploads, and a direct upload's parts and completion
  idempotency.Idempotency  creating a job under its Idempotency-Key and quota (both uploads)
  manage.ManageJobs     read, cancel and delete an owner's job
  listing.ListJobs      an owner's jobs, a page at a time
  worker.Worker         object-created event -> renditions -> ready or failed
  sweeper.Sweeper       leases, resends, deadlines, retention
  orphans.OrphanScan    objects no job needs
  webhooks.Webhooks     an owner's webhook, and delivering its events
  admission.Admission   per-owner request rate, backlog shedding
  waits.Waits           Prefer: wait, a read held until its job changes
  push.Push             every status change, to the owner's WebSocket connections
  lifecycle             the steps they share (fail, finish, remove, quota places, clean up)
"""
from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from chalicelib.usecases.admission import Admission
from chalicelib.usecases.context import Context

if TYPE_CHECKING:
    from chalicelib.usecases.direct_uploads import DirectUploads
    from chalicelib.usecases.idempotency import Idempotency
    from chalicelib.usecases.listing import ListJobs
    from chalicelib.usecases.manage import ManageJobs
    from chalicelib.usecases.orphans import OrphanScan
    from chalicelib.usecases.push import Push
    from chalicelib.usecases.sweeper import Sweeper
    from chalicelib.usecases.uploads import Uploads
    from chalicelib.usecases.waits import Waits
    from chalicelib.usecases.webhooks import Webhooks
    from chalicelib.usecases.worker import Worker


class UseCases:
    """The use cases over one Context, each built (and its module imported) on first
    use: a GET never loads the imaging stack that uploads and the worker need (Pillow,
    pillow-heif, LittleCMS), a large part of a cold start."""

    def __init__(self, ctx: Context):
        self.ctx = ctx

    @cached_property
    def admission(self) -> Admission:
        return Admission(self.ctx)

    @cached_property
    def idempotency(self) -> Idempotency:
        from chalicelib.usecases.idempotency import Idempotency

        return Idempotency(self.ctx, self.admission)

    @cached_property
    def uploads(self) -> Uploads:
        from chalicelib.usecases.uploads import Uploads

        return Uploads(self.ctx, self.admission, self.idempotency)

    @cached_property
    def direct_uploads(self) -> DirectUploads:
        from chalicelib.usecases.direct_uploads import DirectUploads

        return DirectUploads(self.ctx, self.admission, self.idempotency)

    @cached_property
    def manage(self) -> ManageJobs:
        from chalicelib.usecases.manage import ManageJobs

        return ManageJobs(self.ctx)

    @cached_property
    def listing(self) -> ListJobs:
        from chalicelib.usecases.listing import ListJobs

        return ListJobs(self.ctx)

    @cached_property
    def worker(self) -> Worker:
        from chalicelib.usecases.worker import Worker

        return Worker(self.ctx)

    @cached_property
    def sweeper(self) -> Sweeper:
        from chalicelib.usecases.sweeper import Sweeper

        return Sweeper(self.ctx)

    @cached_property
    def orphan_scan(self) -> OrphanScan:
        from chalicelib.usecases.orphans import OrphanScan

        return OrphanScan(self.ctx)

    @cached_property
    def webhooks(self) -> Webhooks:
        from chalicelib.usecases.webhooks import Webhooks

        return Webhooks(self.ctx, self.manage.urls)

    @cached_property
    def waits(self) -> Waits:
        from chalicelib.usecases.waits import Waits

        return Waits(self.ctx, self.admission)

    @cached_property
    def push(self) -> Push:
        from chalicelib.usecases.push import Push

        return Push(self.ctx, self.manage.urls, self.admission)
