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


def test_ports_come_from_below_the_ephemeral_range():
    # An outgoing connection takes its port from the ephemeral range: one drawn below it cannot
    # be taken by a connection between being handed out and its server's bind.
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    ports = [free_port() for _ in range(50)]
    assert all(low - 16384 <= port < low for port in ports)


def test_a_listening_port_is_never_handed_out(monkeypatch):
    import local.ports as ports

    with socket.create_server(("127.0.0.1", 0)) as server, socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        taken, other = server.getsockname()[1], spare.getsockname()[1]
        spare.close()
        monkeypatch.setattr(ports, "listening_range", lambda: [taken, other])
        assert free_port() == other


def test_the_range_leaves_room_below_the_ephemeral_ports(tmp_path):
    from local.ports import listening_range

    setting = tmp_path / "range"
    setting.write_text("32768\t60999\n")
    assert listening_range(str(setting)) == range(16384, 32768)
    setting.write_text("1024 65535\n")
    assert not listening_range(str(setting))
    assert listening_range(str(tmp_path / "absent")) == range(32768, 49152)
