"""A stop asked for (SIGTERM) ends `worker serve` within ten seconds whatever a dependency does: here a
broker that takes connections and never answers, while the first Kafka session opens."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.helpers.kafka import CLIENTS
from tests.helpers.service import Service

LONGEST_STOP_S = 10.0


class SilentBroker:
    """A TCP server on 127.0.0.1 that takes every connection and answers nothing."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.connections.append(connection)

    def close(self) -> None:
        self.server.close()
        for connection in self.connections:
            connection.close()


@pytest.mark.faults
@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("after_s", [1.0, 6.0])  # while the session opens; while it waits to open again
def test_a_stop_ends_within_ten_seconds_while_the_broker_does_not_answer(tmp_path, client, after_s):
    broker = SilentBroker()
    service = Service(broker.address, "silent", tmp_path, client=client).start()
    try:
        deadline = time.monotonic() + 60
        while "serving" not in service.log_tail() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(after_s)
        asked = time.monotonic()
        status = service.terminate(timeout=30)
        took = time.monotonic() - asked
        assert status == 0, service.log_tail()
        assert took < LONGEST_STOP_S, f"the stop took {took:.1f} s\n{service.log_tail()}"
    finally:
        if service.running():
            service.kill()
        broker.close()
