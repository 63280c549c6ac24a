"""local/ports.py's free_port: a port handed out once is never handed out again by the same
process, though the kernel may give a port just closed to the next bind (an API and its page,
and a gateway and moto, were each once given one port in a CI run)."""
import socket
from concurrent.futures import ThreadPoolExecutor

from local.ports import free_port


def test_no_port_is_handed_out_twice_even_from_several_threads():
    with ThreadPoolExecutor(8) as pool:
        ports = list(pool.map(lambda _: free_port(), range(400)))
    assert len(set(ports)) == len(ports)


def test_the_port_is_free_to_listen_on():
    port = free_port()
    with socket.create_server(("127.0.0.1", port)):
        pass
