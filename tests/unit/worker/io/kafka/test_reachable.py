"""Whether a bootstrap server listens: asked before a replica whose broker went away builds its
Kafka clients again."""

from __future__ import annotations

import socket

from worker.io.kafka.reachable import addresses, any_listens


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_bootstrap_lists_read_as_hosts_and_ports_ipv6_bracketed():
    assert addresses("a:9092, [::1]:9093,b:1") == [("a", 9092), ("::1", 9093), ("b", 1)]
    assert addresses("no-port,c:x") == []


def test_a_listening_server_among_the_addresses_is_enough():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert any_listens(f"127.0.0.1:{closed_port()},127.0.0.1:{port}")


def test_nothing_listening_is_no_and_is_said_at_once():
    assert not any_listens(f"127.0.0.1:{closed_port()}", timeout_s=1.0)


def test_a_list_of_nothing_readable_is_left_to_the_client_to_refuse():
    assert any_listens("not-an-address")
