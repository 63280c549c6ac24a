"""The SSRF guard: which webhook URLs the service will call (chalicelib/usecases/webhook_urls.py).

Names resolve through a fake resolver (no DNS here), except `localhost`, which the machine's
own resolver answers. Nothing is ever sent anywhere by these tests.
"""
import socket

import pytest

from chalicelib.domain.webhooks import Address
from chalicelib.usecases.webhook_urls import UrlRefused, check, system_resolver

PUBLIC = "93.184.215.14"
NAMES = {
    "hooks.example.com": [PUBLIC],
    "dual.example.com": [PUBLIC, "2606:2800:21f:cb07:6820:80da:af6b:8b2c"],
    "rebind.example.com": ["127.0.0.1"],          # a public-looking name that resolves to loopback
    "mixed.example.com": [PUBLIC, "10.0.0.7"],   # one bad answer is enough to refuse
    "metadata.example.com": ["169.254.169.254"],
}


def resolve(host, port):
    if host in NAMES:
        return NAMES[host]
    if host == "localhost":
        return system_resolver(host, port)  # /etc/hosts, no DNS
    # Literal addresses and their odd spellings, as the C library reads them; never DNS.
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    return [info[4][0] for info in infos]


def refused(url, allow_loopback=False):
    with pytest.raises(UrlRefused) as caught:
        check(url, allow_loopback, resolve)
    return str(caught.value)


def test_a_public_https_url_is_accepted_with_the_addresses_to_dial():
    target = check("https://hooks.example.com/images?x=1", False, resolve)
    assert target.host == "hooks.example.com"
    assert target.addresses == (Address(PUBLIC, 443),)
    dual = check("https://dual.example.com:8443/h", False, resolve)
    assert [a.port for a in dual.addresses] == [8443, 8443] and len(dual.addresses) == 2


@pytest.mark.parametrize("url", [
    "https://127.0.0.1/hook",                 # loopback, with loopback not allowed
    "https://127.1/hook",                     # the same, spelled short
    "https://2130706433/hook",                # the same, as one number
    "https://0x7f.0.0.1/hook",                # the same, in hexadecimal
    "https://[::1]/hook",                     # IPv6 loopback
    "https://[::ffff:127.0.0.1]/hook",        # IPv4-mapped loopback
    "https://localhost/hook",                 # a name that resolves to loopback (the real resolver)
    "https://rebind.example.com/hook",        # the same through DNS
    "https://169.254.169.254/latest/meta-data/",   # cloud metadata (link-local)
    "https://metadata.example.com/latest",
    "https://[fd00:ec2::254]/latest",         # AWS's IPv6 metadata address (unique local)
    "https://[64:ff9b::a9fe:a9fe]/latest",    # metadata through NAT64
    "https://[2002:a9fe:a9fe::1]/latest",     # metadata through 6to4
    "https://[::7f00:1]/hook",                # IPv4-compatible loopback (::127.0.0.1)
    "https://[::a9fe:a9fe]/latest",           # IPv4-compatible metadata
    "https://[::ffff:0:a9fe:a9fe]/latest",    # IPv4-translated metadata (SIIT)
    "https://[64:ff9b:1::a9fe:a9fe]/latest",  # local-use NAT64: never public, however it embeds
    "https://[64:ff9b:1:ffff::1]/hook",
    "https://10.1.2.3/hook",                  # 10/8
    "https://172.16.5.4/hook",
    "https://192.168.1.1/hook",
    "https://100.64.0.1/hook",                # shared address space (carrier NAT)
    "https://0.0.0.0/hook",
    "https://224.0.0.1/hook",                 # multicast
    "https://mixed.example.com/hook",
])
def test_private_loopback_link_local_and_metadata_addresses_are_refused(url):
    assert "private, loopback, link-local or metadata" in refused(url)


@pytest.mark.parametrize("url, why", [
    ("http://hooks.example.com/hook", "https"),
    ("ftp://hooks.example.com/hook", "https"),
    ("hooks.example.com/hook", "https"),
    ("https://user:pw@hooks.example.com/hook", "user name or password"),
    ("https://hooks.example.com/hook#frag", "fragment"),
    ("https://hooks.example.com/a b", "spaces"),
    ("https://nowhere.invalid/hook", "does not resolve"),
    ("https://hooks.example.com:99999/hook", "not a valid URL"),
    ("https://" + "a" * 2050 + ".com/", "at most 2048"),
    ("https://hooks.example.com/" + "é" * 1000, "at most 2048"),  # 6,000 once encoded
    ("https://xn--a.example/hook", "does not resolve"),
    ("https://a\u200db.example/hook", "internationalised domain name"),  # a joiner alone: no IDNA label
    ("", "https"),
    (None, "https"),
    (42, "https"),
])
def test_malformed_or_insecure_urls_are_refused_with_a_reason(url, why):
    assert why in refused(url)


def test_where_loopback_is_allowed_it_may_be_plain_http_but_nothing_else_private_is():
    assert check("http://127.0.0.1:8080/hook", True, resolve).addresses == (Address("127.0.0.1", 8080),)
    assert check("http://localhost:8080/hook", True, resolve).addresses  # ::1 and/or 127.0.0.1
    assert check("https://[::1]:8443/hook", True, resolve).addresses == (Address("::1", 8443),)
    for url in ("https://10.1.2.3/hook", "https://169.254.169.254/", "http://hooks.example.com/"):
        refused(url, allow_loopback=True)
    # Plain http to a public host stays refused: only loopback receivers may skip TLS.
    assert "https" in refused("http://hooks.example.com/hook", allow_loopback=True)


def test_a_public_ipv6_address_is_not_taken_for_an_embedded_private_one():
    assert check("https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/h", False, resolve).addresses


def test_an_international_host_and_path_are_normalised_to_what_the_wire_carries():
    seen = []

    def recording(host, port):
        seen.append(host)
        return [PUBLIC]

    target = check("https://Bücher.Example/straße/ü?q=ä&r=%41%zz", False, recording)
    assert target.url == "https://xn--bcher-kva.example/stra%C3%9Fe/%C3%BC?q=%C3%A4&r=%41%25zz"
    assert target.host == seen[0] == "xn--bcher-kva.example"
    assert target.url.isascii()
    # An ASCII URL comes back as it was given, escapes and all.
    plain = "https://hooks.example.com/a/%7Euser/x;y@z?a=1&b=%2F"
    assert check(plain, False, resolve).url == plain
    assert check("https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:8443/h", False, resolve).url == \
        "https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:8443/h"
