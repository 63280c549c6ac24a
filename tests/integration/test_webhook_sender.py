"""The webhook sender against real receivers on 127.0.0.1 (chalicelib/adapters/http_webhooks.py):
status only, no redirect followed, a hard time limit, the vetted address dialled, and TLS
checked against the URL's host name although the address is dialled directly."""
from __future__ import annotations

import datetime
import http.server
import socket
import ssl
import threading
import time

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from chalicelib.adapters.http_webhooks import HttpWebhookSender
from chalicelib.domain.errors import DeliveryFailed
from chalicelib.domain.webhooks import Address
from tests.conftest import free_port


class Receiver(http.server.BaseHTTPRequestHandler):
    hits: list

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.hits.append((self.path, dict(self.headers), body))
        if self.path == "/ok":
            self.send_response(204)
        elif self.path == "/fail":
            self.send_response(500)
        elif self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/ok")
        elif self.path == "/slow":
            time.sleep(5)
            self.send_response(200)
        elif self.path == "/trickle":  # a byte at a time, each well within a read timeout
            for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 40:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.2)
            return
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def serve(context: ssl.SSLContext | None = None):
    hits = []
    handler = type("Handler", (Receiver,), {"hits": hits})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, hits


@pytest.fixture
def receiver():
    server, hits = serve()
    yield server.server_address[1], hits
    server.shutdown()


def post(port, path, timeout=3.0, host="127.0.0.1", scheme="http", sender=None, addresses=None):
    sender = sender or HttpWebhookSender()
    return sender.post(f"{scheme}://{host}:{port}{path}", addresses or (Address("127.0.0.1", port),),
                       {"webhook-id": "msg_1", "Content-Type": "application/json"}, b'{"a":1}', timeout)


def test_the_status_is_returned_and_the_body_and_headers_arrive(receiver):
    port, hits = receiver
    assert post(port, "/ok") == 204
    assert post(port, "/fail") == 500
    path, headers, body = hits[0]
    assert (path, body, headers["webhook-id"]) == ("/ok", b'{"a":1}', "msg_1")
    assert headers["Host"] == f"127.0.0.1:{port}"


def test_a_redirect_is_not_followed(receiver):
    port, hits = receiver
    assert post(port, "/redirect") == 302
    assert [path for path, _, _ in hits] == ["/redirect"]


def test_a_slow_receiver_is_cut_off_at_the_timeout(receiver):
    port, _ = receiver
    started = time.monotonic()
    with pytest.raises(DeliveryFailed) as failed:
        post(port, "/slow", timeout=1.0)
    assert failed.value.reason == "timeout"
    assert time.monotonic() - started < 2.5


def test_a_receiver_that_trickles_bytes_is_cut_off_at_the_timeout_too(receiver):
    port, _ = receiver
    started = time.monotonic()
    with pytest.raises(DeliveryFailed) as failed:
        post(port, "/trickle", timeout=1.5)
    assert failed.value.reason == "timeout"
    assert time.monotonic() - started < 3.0  # not 40 bytes x 0.2 s


def test_nothing_listening_is_a_connection_failure():
    with pytest.raises(DeliveryFailed) as failed:
        post(free_port(), "/ok")
    assert failed.value.reason == "connection"


def test_the_next_vetted_address_is_tried_when_one_cannot_be_reached(receiver):
    port, hits = receiver
    dead = Address("127.0.0.1", free_port())
    assert post(port, "/ok", addresses=(dead, Address("127.0.0.1", port))) == 204
    assert len(hits) == 1


# -- TLS: a certificate for hooks.test, from a certificate authority only this test trusts --

@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hooks.test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("hooks.test")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    server, hits = serve(context)
    yield server.server_address[1], hits, str(cert_file)
    server.shutdown()


def test_https_dials_the_address_and_checks_the_certificate_against_the_urls_host(tls):
    port, hits, ca = tls
    # hooks.test resolves nowhere: only the address given is dialled; SNI and the check use the name.
    assert post(port, "/ok", host="hooks.test", scheme="https", sender=HttpWebhookSender(ca)) == 204
    assert hits[-1][1]["Host"] == f"hooks.test:{port}"


def test_a_certificate_for_another_name_or_from_an_unknown_authority_is_refused(tls):
    port, hits, ca = tls
    before = len(hits)
    for host, sender in (("other.test", HttpWebhookSender(ca)), ("hooks.test", HttpWebhookSender())):
        with pytest.raises(DeliveryFailed) as failed:
            post(port, "/ok", host=host, scheme="https", sender=sender)
        assert failed.value.reason == "tls"
    assert len(hits) == before  # nothing was sent


def test_the_receiver_never_sees_a_plain_request_on_its_tls_port(tls):
    port, _, _ = tls
    with pytest.raises(DeliveryFailed):
        post(port, "/ok", timeout=2.0)
    socket.create_connection(("127.0.0.1", port), timeout=1).close()  # still up
