"""WebhookSender over HTTP(S) with urllib3 (already in every Lambda package, under botocore).

It dials the addresses the SSRF guard vetted, never the name again, while TLS still checks
the certificate against the URL's host name (SNI and hostname match). No redirect is
followed: a 3xx is just a status that is not success. A timer cuts the connection when
the whole attempt has used up its time, so a receiver that trickles bytes cannot hold a
delivery longer than that either.
"""
from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from typing import Optional
from urllib.parse import urlsplit

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import HTTPError as Urllib3Error

from chalicelib.domain.errors import DeliveryFailed
from chalicelib.domain.webhooks import Address

# A receiver's answer is not read: only the status counts.
_CONNECT_SECONDS = 3.0


class HttpWebhookSender:
    def __init__(self, ca_certs: Optional[str] = None):
        # ca_certs: tests trust their own certificate authority; None: the system's.
        self._ca_certs = ca_certs

    def post(self, url: str, addresses: tuple[Address, ...], headers: dict[str, str], body: bytes,
             timeout: float) -> int:
        parts = urlsplit(url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = {**headers, "Host": parts.netloc, "Content-Length": str(len(body)),
                   "Connection": "close"}
        deadline = time.monotonic() + timeout
        failure = DeliveryFailed("connection")
        for address in addresses:  # the next address only when this one cannot be reached
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DeliveryFailed("timeout")
            connection = self._connection(parts.scheme, parts.hostname, address, remaining)
            try:
                connection.connect()
            except (OSError, Urllib3Error, ValueError) as error:  # ValueError: a name mismatch
                failure = _failure(error)
                connection.close()
                if failure.reason == "tls":
                    raise failure from None
                continue
            # Connected: the rest of the time is for sending and for the answer.
            connection.timeout = max(0.001, deadline - time.monotonic())
            return self._exchange(connection, path, headers, body, deadline)
        raise failure

    def _connection(self, scheme: str, host: str, address: Address, remaining: float):
        timeout = min(_CONNECT_SECONDS, remaining)
        if scheme == "https":
            return HTTPSConnection(address.ip, address.port, timeout=timeout, server_hostname=host,
                                   assert_hostname=host, cert_reqs="CERT_REQUIRED",
                                   ca_certs=self._ca_certs)
        return HTTPConnection(address.ip, address.port, timeout=timeout)

    @staticmethod
    def _exchange(connection, path: str, headers: dict[str, str], body: bytes, deadline: float) -> int:
        cut = threading.Event()

        def cut_off():
            cut.set()
            sock = connection.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)  # wakes a blocked read at once
                except OSError:
                    pass

        watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), cut_off)
        watchdog.daemon = True
        watchdog.start()
        try:
            connection.request("POST", path, body=body, headers=headers, preload_content=False)
            response = connection.getresponse()
            return response.status
        except (OSError, Urllib3Error, http.client.HTTPException) as error:
            raise (DeliveryFailed("timeout") if cut.is_set() else _failure(error)) from None
        finally:
            watchdog.cancel()
            connection.close()


def _failure(error: BaseException) -> DeliveryFailed:
    name = type(error).__name__
    if isinstance(error, (ssl.SSLError, ssl.CertificateError)) or "SSL" in name or "Certificate" in name:
        return DeliveryFailed("tls")
    if isinstance(error, (TimeoutError, socket.timeout)) or "Timeout" in name:
        return DeliveryFailed("timeout")
    if isinstance(error, http.client.HTTPException) and not isinstance(error, ConnectionError):
        return DeliveryFailed("protocol")
    return DeliveryFailed("connection")
