"""What the CLI keeps of an upload it has not finished, so that running it again on the same
file resumes: one small JSON file per upload under the user's cache directory.

An upload is known by the API's URL and the file's absolute path, size and modification
time (and the formats, sizes and metadata it asks, when it asks any): a file edited since
(or another server, or other options) starts a new upload, never sends its bytes into the
old one's parts. Client(resume_dir=...) keeps these records for upload(path) as the CLI does. What is kept: the Idempotency-Key, saved before anything is sent
(a process killed before it learns the job replays the same POST), and the job's Location,
once known (a resume asks GET /image-jobs/{id}/upload which parts storage holds).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Dict, Optional


def directory() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "image-jobs" / "uploads"


class UploadState:
    """The saved state of one file's upload to one API, in `folder` (default: directory())."""

    def __init__(self, api_url: str, file: Path, folder: Optional[Path] = None,
                 asked: Optional[Dict[str, Any]] = None):
        stat = file.stat()
        self.file = file.resolve()
        identity = [api_url.rstrip("/"), str(self.file), stat.st_size, stat.st_mtime_ns]
        if asked:  # the same file with other options is another upload (a plain one keeps its old key)
            identity.append(asked)
        key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:32]
        self.path = (directory() if folder is None else Path(folder)) / (key + ".json")

    def load(self) -> Dict[str, Any]:
        """What was saved, or {} (nothing, or a file that cannot be read: start afresh)."""
        try:
            value = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    def save(self, **values: Any) -> None:
        """Merge `values` into the saved state, atomically (a Ctrl-C never leaves half a file)."""
        state = {**self.load(), **values, "file": str(self.file)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(self.path.name + ".tmp")
        partial.write_text(json.dumps(state))
        os.replace(partial, self.path)

    def forget(self) -> None:
        self.path.unlink(missing_ok=True)
