"""botocore clients for the adapters: one session for all of them, and a client made on first
use where many requests never need it.

Making a client loads its service's model and endpoint rules (S3's are the largest, tens of
milliseconds), and every new session parses the 1.2 MB endpoint table again. boto3 would add
its own import and a session per client; the adapters need only botocore's clients.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Optional

import botocore.session
from botocore.config import Config


class Clients:
    """Makes botocore clients from one session. botocore's client creation is not thread-safe,
    and API threads or worker threads may ask at once, so it is done under one lock."""

    def __init__(self, region: str):
        self._region = region
        # Re-entrant: PynamoDB's connection asks for the session while making its client.
        self.lock = threading.RLock()
        self._session: Optional[botocore.session.Session] = None

    @property
    def session(self) -> botocore.session.Session:
        with self.lock:
            if self._session is None:
                self._session = botocore.session.Session()
            return self._session

    def lazy(self, service: str, endpoint_url: Optional[str], config: Config,
             prepare: Callable[[Any], Any] = lambda client: client) -> "LazyClient":
        """`prepare` gets the client once it is made (the time budget's hooks go on here)."""
        return LazyClient(lambda: prepare(self.create(service, endpoint_url, config)), self.lock)

    def create(self, service: str, endpoint_url: Optional[str], config: Config):
        with self.lock:
            return self.session.create_client(service, region_name=self._region,
                                              endpoint_url=endpoint_url, config=config)


class LazyClient:
    """Stands in for a botocore client and makes it on first use; then it is that client."""

    def __init__(self, make: Callable[[], Any], lock: threading.RLock):
        self._make = make
        self._lock = lock  # the session's: one client is made at a time
        self._client: Any = None

    def __getattr__(self, name: str) -> Any:
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._make()
                client = self._client
        return getattr(client, name)
