"""Which webhook URLs the service will call: the SSRF guard, run when a URL is registered and
again before every delivery (a name may resolve elsewhere by then).

The name is resolved and every address it resolves to must be public: a private, loopback,
link-local (cloud metadata at 169.254.169.254), shared, reserved or multicast address
anywhere in the answer refuses the URL. Addresses that embed an IPv4 one (IPv4-mapped,
IPv4-compatible, IPv4-translated, NAT64, 6to4, Teredo) are judged by the IPv4 address
inside; local-use NAT64 (64:ff9b:1::/48) is never public. Resolving first also defeats the
spellings of 127.0.0.1 that a string check misses (2130706433, 0x7f.1, 127.1).
Delivery then connects to the vetted addresses themselves, so a second, different answer
from DNS (rebinding) is never dialled.

The URL is normalised before it is stored or dialled: an internationalised host becomes its
IDNA (UTS 46) ASCII form and the path and query are percent-encoded as UTF-8, so what is
sent on the wire is ASCII; a host that is no valid IDNA name is refused.
"""
from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import Callable
from urllib.parse import quote, urlsplit, urlunsplit

import idna

from chalicelib.domain.webhooks import Address

MAX_URL_LENGTH = 2048
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: its embedding is the operator's
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")         # deprecated (RFC 4291), still routed by some
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # SIIT (RFC 2765)
# RFC 3986: what may stay as it is in a path and in a query; `%` keeps escapes already made.
_PATH_SAFE = "/:@!$&'()*+,;=%"
_QUERY_SAFE = _PATH_SAFE + "?"
_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")

# host, port -> the IP addresses the name resolves to
Resolver = Callable[[str, int], list[str]]


class UrlRefused(ValueError):
    """The URL may not be called. The message is safe to show to the client."""


class NameNotResolved(UrlRefused):
    """The URL's host name resolves to nothing (a delivery's `dns`, not `blocked`)."""


@dataclass(frozen=True)
class Target:
    url: str
    host: str
    addresses: tuple[Address, ...]


def system_resolver(host: str, port: int) -> list[str]:
    return [info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


def check(url: object, allow_loopback: bool, resolve: Resolver = system_resolver) -> Target:
    if not isinstance(url, str) or not url or len(url) > MAX_URL_LENGTH:
        raise UrlRefused(f"url must be an https URL of at most {MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise UrlRefused("url is not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http") or not parts.hostname:
        raise UrlRefused("url must be an https URL")
    if parts.username is not None or parts.password is not None:
        raise UrlRefused("url must not carry a user name or password")
    if parts.fragment or any(ch.isspace() or ord(ch) < 0x20 for ch in url):
        raise UrlRefused("url must have no fragment and no spaces or control characters")
    host = _ascii_host(parts.hostname)
    url = urlunsplit((scheme, _netloc(host, port), _encode(parts.path, _PATH_SAFE),
                      _encode(parts.query, _QUERY_SAFE), ""))
    if len(url) > MAX_URL_LENGTH:
        raise UrlRefused(f"url must be an https URL of at most {MAX_URL_LENGTH} characters")
    port = port or (443 if scheme == "https" else 80)
    try:
        resolved = resolve(host, port)
    except (OSError, UnicodeError):
        raise NameNotResolved("url's host name does not resolve") from None
    if not resolved:
        raise NameNotResolved("url's host name does not resolve")
    loopback = [_is_loopback(ip) for ip in resolved]
    for ip, is_loopback in zip(resolved, loopback):
        if is_loopback and allow_loopback:
            continue
        if not _is_public(ip):
            raise UrlRefused("url resolves to a private, loopback, link-local or metadata address")
    if scheme == "http" and not (allow_loopback and all(loopback)):
        raise UrlRefused("url must be an https URL")
    addresses = tuple(dict.fromkeys(Address(ip, port) for ip in resolved))
    return Target(url=url, host=host, addresses=addresses)


def _ascii_host(host: str) -> str:
    if host.isascii():
        return host
    try:
        return idna.encode(host, uts46=True).decode("ascii")
    except idna.IDNAError:
        raise UrlRefused("url's host name is not a valid internationalised domain name") from None


def _netloc(host: str, port: int | None) -> str:
    netloc = f"[{host}]" if ":" in host else host
    return netloc if port is None else f"{netloc}:{port}"


def _encode(text: str, safe: str) -> str:
    return quote(_STRAY_PERCENT.sub("%25", text), safe=safe)


def _address(ip: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    address = ipaddress.ip_address(ip.split("%", 1)[0])  # an IPv6 zone (%eth0) is no part of it
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour or (address.teredo or (None, None))[1]
        low_bits = int(address) & 0xFFFFFFFF
        if embedded is None and (address in _NAT64 or address in _IPV4_TRANSLATED
                                 or (address in _IPV4_COMPATIBLE and low_bits > 1)):
            embedded = ipaddress.IPv4Address(low_bits)  # :: and ::1 stay themselves
        if embedded is not None:
            return embedded
    return address


def _is_loopback(ip: str) -> bool:
    return _address(ip).is_loopback


def _is_public(ip: str) -> bool:
    address = _address(ip)
    return address.is_global and not address.is_multicast and address not in _LOCAL_NAT64
