"""Object keys, derived from the job id only, never from anything the client named."""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

from chalicelib.domain.renditions import RenditionFormat, RenditionName

# A version-4 UUID, matched whole (a trailing newline is not part of an id).
JOB_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def is_job_id(text: str) -> bool:
    return JOB_ID.fullmatch(text) is not None


@dataclass(frozen=True)
class ObjectKeys:
    originals_prefix: str
    renditions_prefix: str

    def original(self, job_id: str) -> str:
        return f"{self.originals_prefix}{job_id}"

    def job_renditions(self, job_id: str) -> str:
        """The prefix of every rendition of the job, every attempt's."""
        return f"{self.renditions_prefix}{job_id}/"

    def rendition(self, job_id: str, attempt: int, name: RenditionName,
                  fmt: RenditionFormat = RenditionFormat.JPEG) -> str:
        """Fenced per attempt: a stale attempt can only ever write or delete its own."""
        return f"{self.job_renditions(job_id)}{attempt}/{name}.{fmt.extension}"

    def animation(self, job_id: str, attempt: int, name: RenditionName) -> str:
        """An animated source's rendition as an animated WebP, beside its still's objects
        (`<name>.webp` is the still's WebP variant)."""
        return f"{self.job_renditions(job_id)}{attempt}/{name}.animated.webp"

    def renditions(self, job_id: str, attempt: int, names: Iterable[RenditionName],
                   formats: Iterable[RenditionFormat] = ()) -> list[str]:
        """Every key one attempt may have written: each rendition's JPEG, its extra formats
        and its animation (which only an animated source has; deleting a key never written
        costs nothing, and an attempt that died may have written it before its job said so)."""
        codings = (RenditionFormat.JPEG, *(f for f in formats if f is not RenditionFormat.JPEG))
        return [key for name in names
                for key in (*(self.rendition(job_id, attempt, name, fmt) for fmt in codings),
                            self.animation(job_id, attempt, name))]

    def attempt_of(self, key: str) -> Optional[int]:
        """The attempt that wrote a rendition key; None for anything else."""
        if not key.startswith(self.renditions_prefix):
            return None
        parts = key[len(self.renditions_prefix):].split("/")
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        return int(parts[1])

    def is_original(self, key: str) -> bool:
        return key.startswith(self.originals_prefix) and self.job_id_of(key) is not None

    def job_id_of(self, key: str) -> Optional[str]:
        for prefix in (self.originals_prefix, self.renditions_prefix):
            if key.startswith(prefix):
                job_id = key[len(prefix):].split("/", 1)[0]
                return job_id if is_job_id(job_id) else None
        return None
