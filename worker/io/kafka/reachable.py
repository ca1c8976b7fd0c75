"""Whether a bootstrap server accepts a TCP connection at all.

Asked before a new Kafka session is opened after one failed: while no server of the cluster
listens, a replica builds no Kafka clients (each would spend its threads retrying, and a session
opening would go through its steps only to fail), and it starts its next session as soon as one
listens again. A server that listens may still fail the session; the session then says why.
"""

from __future__ import annotations

import socket


def addresses(bootstrap: str) -> list[tuple[str, int]]:
    """(host, port) of each "host:port" of a bootstrap list ("[::1]:9092" for IPv6); those that
    do not read are left out."""
    found = []
    for address in bootstrap.split(","):
        host, _, port = address.strip().rpartition(":")
        if host and port.isdigit():
            found.append((host.strip("[]"), int(port)))
    return found


def any_listens(bootstrap: str, timeout_s: float = 1.0) -> bool:
    """Whether a server of ``bootstrap`` accepts a TCP connection within ``timeout_s`` (True when
    no address reads: the client will say what is wrong with them)."""
    listed = addresses(bootstrap)
    for host, port in listed:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return True
        except OSError:
            continue
    return not listed
