"""Two fixes to kafka-python 3.0.12, applied when this module is imported.

1. Its transport reads what the socket holds and, when the same read also finds the peer has
closed, aborts without handing over the bytes it read. A broker that refuses a SASL login
sends its error response and closes the connection a moment later; on a busy machine both
arrive in one read, so the client only ever reports "socket disconnected" instead of
"Authentication failed ... invalid credentials". The loop below is kafka-python's own, with
the received bytes delivered, and their readers given a turn of the event loop, before the
disconnect is acted on.

2. Its client's ``connection_delay`` answers in seconds (the connection manager's unit), where
its producer's sender, the one caller that uses the figure, waits that many milliseconds: while
the broker is away, a producer holding records woke every millisecond (7% of a core) instead of
once per reconnection backoff. The client answers in milliseconds, as the sender expects; the
other caller only asks whether it is above 0.
"""

from __future__ import annotations

import time

import kafka
import kafka.errors as errors
from kafka.net import compat, transport

FIXED_VERSION = "3.0.12"


async def _read_from_sock(self: transport.KafkaTCPTransport) -> None:
    while self._read and not self._closed:
        await self._net.wait_read(self._sock)
        received, error = self._sock_recv()
        if received:
            self.last_read = time.monotonic()
            if self._protocol and self._protocol._sensors:
                self._protocol._sensors.bytes_received.record(len(received))
            try:
                self._protocol.data_received(received)
            except errors.KafkaProtocolError as protocol_error:
                return self.abort(error=protocol_error)  # type: ignore[no-any-return]  # kafka-python is untyped
            if error:  # let whoever waited for these bytes act on them first
                await self._net.sleep(0)
        if error:
            return self.abort(error=error)  # type: ignore[no-any-return]  # kafka-python is untyped


def _connection_delay_ms(self: compat.KafkaNetClient, node_id: object) -> float:
    """Milliseconds until a connection to ``node_id`` may be tried again (0: now)."""
    return self._manager.connection_delay(node_id) * 1000  # type: ignore[no-any-return]  # kafka-python is untyped


if kafka.__version__ == FIXED_VERSION:
    transport.KafkaTCPTransport._read_from_sock = _read_from_sock
    compat.KafkaNetClient.connection_delay = _connection_delay_ms
