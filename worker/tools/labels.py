"""Labels sent apart from their messages (``worker produce --labels-topic``): "features now, labels later".

Each row's message goes to the topic without its label, and a label event ``{"id": ..., "label":
...}`` to the labels topic, keyed by the same id (so the same partitioner puts both in the
partition of the same number), ``delay`` messages after its own.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import orjson


class DelayedLabels:
    """send(topic, value, key) : how a record is sent; delay : messages sent between a message and
    its label (0: right after it)."""

    def __init__(self, send: Callable[[str, bytes, bytes], None], topic: str, delay: int):
        self.send, self.topic, self.delay = send, topic, delay
        self.waiting: deque[tuple[bytes, bytes]] = deque()
        self.sent = 0

    def follow(self, key: bytes, message_id: object, label: object) -> None:
        """The label of a message just sent, to send once ``delay`` more messages went."""
        self.waiting.append((key, orjson.dumps({"id": message_id, "label": label})))
        while len(self.waiting) > self.delay:
            self._send_oldest()

    def drain(self) -> None:
        """Send every label still waiting (the messages ran out)."""
        while self.waiting:
            self._send_oldest()

    def _send_oldest(self) -> None:
        key, value = self.waiting.popleft()
        self.send(self.topic, value, key)
        self.sent += 1
