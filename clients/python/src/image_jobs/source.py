"""What an upload sends: bytes in memory, or a file by its path read in chunks (never whole),
with the ranges, checksum and fingerprint the upload routes ask of it."""
from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import IO, Iterator, Optional, Union

Source = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, IO[bytes]]
CHUNK = 64 * 1024
# Enough of the start of a file to know its type (sniff.guess_type reads an ftyp box of 4 KiB).
HEAD = 4096


class UploadFile:
    """One upload's bytes: a path is opened for each range it sends and read CHUNK at a time,
    so a file of any size costs a chunk of memory; bytes (and a file object, read once) are
    kept as they are."""

    def __init__(self, source: Source):
        self.path: Optional[Path] = None
        self._data: Optional[bytes] = None
        if isinstance(source, (bytes, bytearray, memoryview)):
            self._data, self.name = bytes(source), "upload"
        elif hasattr(source, "read"):
            # A file object may not seek, and is read once: its bytes are kept.
            self._data = bytes(source.read())  # type: ignore[union-attr]
            self.name = Path(str(getattr(source, "name", "upload"))).name
        else:
            self.path = Path(source)  # type: ignore[arg-type]
            self.name = self.path.name
        if self.path is not None:
            stat = self.path.stat()
            self.size = stat.st_size
            self._mtime_ns: Optional[int] = stat.st_mtime_ns
        else:
            assert self._data is not None
            self.size = len(self._data)
            self._mtime_ns = None

    def head(self) -> bytes:
        """The first bytes, to sniff the type from."""
        return b"".join(self.chunks(0, min(HEAD, self.size)))

    def chunks(self, offset: int = 0, length: Optional[int] = None) -> Iterator[bytes]:
        """The bytes from `offset`, `length` of them (default: to the end), CHUNK at a time."""
        end = self.size if length is None else offset + length
        if self._data is not None:
            view = memoryview(self._data)
            for start in range(offset, end, CHUNK):
                yield bytes(view[start:min(start + CHUNK, end)])
            return
        assert self.path is not None
        with open(self.path, "rb") as file:
            file.seek(offset)
            left = end - offset
            while left > 0:
                chunk = file.read(min(CHUNK, left))
                if not chunk:
                    raise OSError(f"{self.path} ended {left} bytes early: it changed during the upload")
                left -= len(chunk)
                yield chunk

    def reader(self, offset: int = 0, length: Optional[int] = None) -> "RangeReader":
        return RangeReader(self, offset, self.size - offset if length is None else length)

    def sha256(self) -> str:
        """Base64 of the SHA-256 digest (S3's x-amz-checksum-sha256), read in chunks."""
        digest = hashlib.sha256()
        for chunk in self.chunks():
            digest.update(chunk)
        return base64.b64encode(digest.digest()).decode()

    def fingerprint(self) -> Optional[str]:
        """A file's identity for resume records: its absolute path, size and modification time
        (an edited file is another upload); None for bytes, which have no such identity."""
        if self.path is None:
            return None
        return json.dumps([str(self.path.resolve()), self.size, self._mtime_ns])


class RangeReader:
    """A range of an UploadFile as a file object (read, seek, tell): what httpx's form reads
    the file part from. `on_read(n)` hears of each chunk as it is handed over."""

    def __init__(self, file: UploadFile, offset: int, length: int):
        self._file, self._offset, self._length = file, offset, length
        self._position = 0
        self._chunks: Optional[Iterator[bytes]] = None
        self._pending = b""

    def read(self, size: Optional[int] = -1) -> bytes:
        if self._chunks is None:
            self._chunks = self._file.chunks(self._offset + self._position, self._length - self._position)
        want = self._length - self._position if size is None or size < 0 else size
        out = [self._pending]
        have = len(self._pending)
        while have < want:
            chunk = next(self._chunks, b"")
            if not chunk:
                break
            out.append(chunk)
            have += len(chunk)
        data = b"".join(out)
        data, self._pending = data[:want], data[want:]
        self._position += len(data)
        return data

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._position, os.SEEK_END: self._length}[whence]
        self._position = max(0, min(self._length, base + offset))
        self._chunks, self._pending = None, b""
        return self._position

    def tell(self) -> int:
        return self._position
