"""The ports the local runner listens on: which of its parts wants each, and the setting that
moves it. A port that is taken ends the run with one line saying so (python -m local)."""
from __future__ import annotations

import contextlib
import errno
import random
import socket
import threading
from dataclasses import dataclass


class PortTaken(Exception):
    """Something else listens where one of the runner's parts was to listen."""

    def __init__(self, port: int):
        super().__init__(f"port {port} is taken")
        self.port = port


@dataclass(frozen=True)
class Port:
    number: int
    wanted_by: str
    variable: str
    hint: str = ""

    def taken(self) -> str:
        return (f"port {self.number} is taken, wanted by {self.wanted_by}: "
                f"set {self.variable} to a free port{self.hint}")


def wanted(runner, components: set[str], page: bool) -> list[Port]:
    """Every port this run listens on (page: the page is served)."""
    ports = []
    if runner.embedded_aws:
        ports.append(Port(runner.aws_port, "the embedded AWS services (moto's server)", "AWS_PORT",
                          ", or EMBEDDED_AWS=0 to use the services already there (LocalStack, say)"))
    if runner.storage == "rgw":
        ports.append(Port(runner.rgw_port, "Ceph's RADOS Gateway (STORAGE=rgw)", "RGW_PORT"))
    if "api" in components:
        ports.append(Port(runner.api_port, "the API (chalice local)", "API_PORT"))
    if page:
        ports.append(Port(runner.web_port, "the page", "WEB_PORT",
                          ", or leave web out of LOCAL_COMPONENTS"))
    if "push" in components:
        ports.append(Port(runner.push_port, "the push gateway's WebSocket", "PUSH_PORT",
                          ", or leave push out of LOCAL_COMPONENTS"))
        ports.append(Port(runner.push_management_port, "the push gateway's management API",
                          "PUSH_MANAGEMENT_PORT", ", or leave push out of LOCAL_COMPONENTS"))
    return ports


def refusal(host: str, ports: list[Port]) -> str | None:
    """The line that stops the run before it starts (a port asked for twice, or taken), or None."""
    by_number: dict[int, Port] = {}
    for port in ports:
        other = by_number.setdefault(port.number, port)
        if other is not port:
            return (f"port {port.number} is wanted twice: by {other.wanted_by} ({other.variable}) "
                    f"and by {port.wanted_by} ({port.variable}); set one of them to another port")
    for port in ports:
        try:
            ensure_free(host, port.number)
        except PortTaken:
            return port.taken()
    return None


def ensure_free(host: str, port: int) -> None:
    """PortTaken unless a server could listen on host:port now (bound as servers bind, with
    SO_REUSEADDR, so a closed connection's TIME_WAIT does not count)."""
    with socket.socket() as probe, binding(port):
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))


@contextlib.contextmanager
def binding(port: int):
    """A bind inside the block that finds `port` in use raises PortTaken."""
    try:
        yield
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
        raise PortTaken(port) from None


_handed_out: set[int] = set()
_handing = threading.Lock()
_choose = random.SystemRandom()  # no seed a test or plugin sets: each process its own draws


def free_port() -> int:
    """A loopback port nothing listens on now, and never one this process handed out before:
    the kernel may give a port just closed to the next bind(0), and two parts given one port
    (an API and its page, a gateway and moto) collide when they start.

    It is drawn below the kernel's ephemeral range, where no outgoing connection is ever given
    a port: a bind(0) port comes from that range, and any connection made before its server
    binds it (the runner's own, Ceph's daemons') could take it (one CI run lost an RGW
    runner's 17 tests to its page's port so)."""
    ports = listening_range()
    with _handing:
        while True:
            port = _choose.choice(ports) if ports else _kernel_port()
            if port in _handed_out:
                continue
            if ports:
                try:
                    ensure_free("127.0.0.1", port)  # as the runner checks its ports before it starts
                except PortTaken:
                    continue
            _handed_out.add(port)
            return port


def listening_range(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> range:
    """Up to 16,384 ports just below the ephemeral range (Linux's 32768-60999 by default, else
    IANA's 49152-65535); empty when that range starts too low to leave any."""
    try:
        with open(path) as numbers:
            low = int(numbers.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 49152
    return range(max(1024, low - 16384), low)


def _kernel_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
