"""botocore clients for the adapters: one session for all of them, and a client made on first
use where many requests never need it.

Making a client loads its service's model and endpoint rules (S3's are the largest), and
every new session parses botocore's whole endpoint table again. boto3 would add its own
import and a session per client; the adapters need only botocore's clients.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any, Callable, Optional

import botocore.loaders
import botocore.session
from botocore.config import Config
from botocore.exceptions import DataNotFoundError


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
                self._session = new_session()
            return self._session

    def lazy(self, service: str, endpoint_url: Optional[str], config: Config,
             prepare: Callable[[Any], Any] = lambda client: client) -> "LazyClient":
        """`prepare` gets the client once it is made (the time budget's hooks go on here)."""
        return LazyClient(lambda: prepare(self.create(service, endpoint_url, config)), self.lock)

    def load(self, *services: str) -> None:
        """Load these services' models and the endpoint table into the session now (a first
        client costs tens of ms of JSON parsing; later ones, from the loaded models, a few)."""
        for service in services:
            self.create(service, None, Config())

    def create(self, service: str, endpoint_url: Optional[str], config: Config):
        with self.lock:
            return self.session.create_client(service, region_name=self._region,
                                              endpoint_url=endpoint_url, config=config)


def new_session() -> botocore.session.Session:
    """A botocore session on the process's loader: the models and endpoint rules another
    session parsed are not parsed again."""
    session = botocore.session.Session()
    session.register_component("data_loader", _Loader.create(session))
    return session


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


class _Loader(botocore.loaders.Loader):
    """botocore's data loader, but a service's name is checked by looking in that service's
    own folder. botocore lists every service's folders (twice: for the model and for the
    endpoint rules) only to check a name before loading it, a cost of every cold start. A
    name botocore does not know still fails as it would."""

    @classmethod
    def create(cls, session: botocore.session.Session) -> "_Loader":
        """As botocore.loaders.create_loader, from the session's data_path (AWS_DATA_PATH), but
        one loader per path for the process: a session of its own (a new Context) then reuses
        the models and endpoint rules already parsed, as clients of one session do (making
        three clients cost 96 ms with a new loader, 18 ms with a loaded one)."""
        data_path = session.get_config_variable("data_path")
        with _loaders_lock:
            loader = _loaders.get(data_path)
            if loader is None:
                paths = None if data_path is None else [
                    os.path.expanduser(os.path.expandvars(path)) for path in data_path.split(os.pathsep)]
                loader = _loaders[data_path] = cls(extra_search_paths=paths)
            return loader

    def list_available_services(self, type_name):
        return _KnownServices(self, type_name)


_loaders: dict[Optional[str], _Loader] = {}
_loaders_lock = threading.Lock()


class _KnownServices(Sequence):
    def __init__(self, loader: _Loader, type_name: str):
        self._loader, self._type_name = loader, type_name
        self._all: Optional[list] = None

    def __contains__(self, name: object) -> bool:
        try:
            return bool(self._loader.list_api_versions(name, self._type_name))
        except DataNotFoundError:
            return False

    def _listed(self) -> list:  # only for a caller that wants them all (an error message)
        if self._all is None:
            self._all = botocore.loaders.Loader.list_available_services(self._loader, self._type_name)
        return self._all

    def __getitem__(self, index):
        return self._listed()[index]

    def __len__(self) -> int:
        return len(self._listed())
