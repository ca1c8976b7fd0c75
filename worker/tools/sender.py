"""Messages sent at a pace, each confirmed by the broker, and label events after them: `worker produce`'s sending."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypeAlias

import pyarrow as pa

from ..io.kafka.client import DeliveryFailed, KafkaFailure, Producer, record_bytes
from ..progress import RowProgress
from .labels import DelayedLabels

Message: TypeAlias = tuple[int, bytes | None, bytes]  # (rows, key, value) of one message
# (table, rows per message) -> each message
MessageMaker: TypeAlias = Callable[[pa.Table, int], Iterator[Message]]
CONFIRM_EVERY = 10_000  # records between confirmations at most: bounds what a failure leaves unconfirmed


@dataclass
class Produced:
    sent: int  # messages
    failed: int
    error: str | None = None  # the first failure, if any
    rows: int = 0  # examples in the messages sent
    labels: int = 0  # label events sent apart (--labels-topic)


class Pace(Protocol):
    """What a sender takes of a produce request (``ProduceRequest``): where, how fast, how many
    rows a message, and the labels topic with its delay."""

    @property
    def topic(self) -> str: ...

    @property
    def rate(self) -> float: ...

    @property
    def rows_per_message(self) -> int: ...

    @property
    def labels_topic(self) -> str | None: ...

    @property
    def label_delay(self) -> int: ...


class Sender:
    """Sends a request's messages on ``producer``: at its rate, each no larger than ``limit_bytes``
    (a larger one is counted failed: the broker would refuse it and its batch), its label apart
    with --labels-topic; ``confirm`` waits for the broker to have every one."""

    def __init__(self, producer: Producer, request: Pace, limit_bytes: int, timeout_s: float):
        self.producer, self.topic, self.rate = producer, request.topic, request.rate
        self.rows_per_message, self.limit_bytes, self.timeout_s = request.rows_per_message, limit_bytes, timeout_s
        self.labels = None if request.labels_topic is None else DelayedLabels(
            lambda to, value, key: producer.send(to, value, key=key), request.labels_topic, request.label_delay)
        self.sent = self.failed = self.rows = 0
        self.error: str | None = None  # the first failure
        self.started = time.monotonic()

    def send_table(self, table: pa.Table, messages: MessageMaker, bar: RowProgress) -> None:
        """Send a table's rows as messages, then confirm them."""
        if self.labels is not None:
            ids, labels = table.column("id").to_pylist(), table.column("label").to_pylist()
            table = table.drop_columns(["label"])
        shown = 0  # rows sent but not yet shown on the bar
        for row, (rows, key, value) in enumerate(messages(table, self.rows_per_message)):
            self._pace()
            self.sent += 1
            self.rows += rows
            shown += rows
            if self.rate or shown >= 1_000:  # a paced message shows at once; else every thousand rows
                bar.advance(shown)
                shown = 0
            if self._send(key, value) and self.labels is not None:
                assert key is not None  # keyed by its id
                self.labels.follow(key, ids[row], labels[row])
        self.confirm()
        bar.advance(shown)

    def _pace(self) -> None:
        if self.rate:
            delay = self.started + self.rows / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def _send(self, key: bytes | None, value: bytes) -> bool:
        """Send one message; False when it is too large for the topic (counted failed)."""
        if record_bytes(key, value, []) > self.limit_bytes:
            self.failed += 1
            self.error = self.error or (f"a message of {len(value):,} bytes exceeds the topic's limit "
                                                      f"of {self.limit_bytes:,}")
            return False
        self.producer.send(self.topic, value, key=key)
        return True

    def confirm(self) -> None:
        """Wait until the broker has every message sent; those it refused are counted failed."""
        try:
            self.producer.flush(self.timeout_s)
        except DeliveryFailed as failed:
            self.failed += len(failed.failures)
            self.error = self.error or failed.failures[0].error
        except KafkaFailure as failure:
            raise KafkaFailure(f"{failure} ({self.sent:,} sent, the last {CONFIRM_EVERY:,} at most "
                               "unconfirmed)") from None

    def finish(self) -> Produced:
        """Send the labels still held back, confirm everything; what was sent."""
        if self.labels is not None:
            self.labels.drain()
        self.confirm()
        return Produced(self.sent, self.failed, self.error, self.rows, 0 if self.labels is None else self.labels.sent)

    def close(self) -> None:
        self.producer.close(timeout_s=5.0)
