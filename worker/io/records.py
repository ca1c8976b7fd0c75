"""Messages as the worker handles them, whatever brought them: one poll's messages, column by column."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

import numpy as np

from nbstream.utils.ndarrays import BoolArray, IntArray

Header: TypeAlias = tuple[str, bytes | None]  # a Kafka record header: its name, and its value (None: a null value)
Origin: TypeAlias = tuple[str, int, int]  # where an input message was read: (topic, partition, offset)
# A field's value as a message gives it (JSON's, or a record's of a schema format, read alike): a
# string, number, boolean, None, list or object, whose type is checked where it is used.
FieldValue: TypeAlias = Any


@dataclass(slots=True)
class Record:
    """One consumed message (kafka-python's ConsumerRecord has the same attributes)."""
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)
    timestamp: int = 0  # milliseconds since the epoch (0 or less: none)
    row: int | None = None  # the row inside an Arrow batch message (-1: the whole message)


class RecordLike(Protocol):
    """What ``Polled.of`` reads of a consumed message: a Record, or kafka-python's ConsumerRecord."""

    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> list[Header]: ...
    @property
    def timestamp(self) -> int: ...


@dataclass
class Polled:
    """What one poll brought, column by column: building an object per message would cost more
    than the rest of its journey. Row i is one message."""
    topic: str
    values: Sequence[bytes | None]
    keys: Sequence[bytes | None]
    partitions: IntArray
    offsets: IntArray
    timestamps: IntArray  # milliseconds since the epoch (0 or less: none)
    rows: IntArray | None = None  # per row, its row inside an Arrow batch message (None: JSON messages)
    # per row, its message's headers (None: none); None: no row has any
    headers: Sequence[list[Header] | None] | None = None

    def __len__(self) -> int:
        return len(self.values)

    def headers_of(self, i: int) -> list[Header]:
        """The headers of row i's message, as they came."""
        return (self.headers[i] or []) if self.headers is not None else []

    def record(self, i: int) -> Record:
        return Record(self.topic, int(self.partitions[i]), int(self.offsets[i]), self.keys[i], self.values[i],
                      self.headers_of(i), int(self.timestamps[i]), None if self.rows is None else int(self.rows[i]))

    def expand(self, message_of: IntArray, rows: IntArray, values: Sequence[bytes | None]) -> Polled:
        """One row per example when messages hold many (Arrow batches): row i comes from message
        message_of[i], where it is row rows[i]; values[i] is what stands for it alone."""
        index = message_of.tolist()
        return Polled(self.topic, values, [self.keys[m] for m in index], self.partitions[message_of],
                      self.offsets[message_of], self.timestamps[message_of], rows,
                      None if self.headers is None else [self.headers[m] for m in index])

    def only(self, keep: BoolArray) -> Polled:
        """The messages where ``keep`` (a bool mask of length len(self)) is true."""
        rows = np.flatnonzero(keep)
        index = rows.tolist()
        return Polled(self.topic, [self.values[i] for i in index], [self.keys[i] for i in index],
                      self.partitions[rows], self.offsets[rows], self.timestamps[rows],
                      None if self.rows is None else self.rows[rows],
                      None if self.headers is None else [self.headers[i] for i in index])

    @classmethod
    def of(cls, topic: str, records: Sequence[RecordLike]) -> Polled:
        """From Record-like objects (kafka-python's ConsumerRecord, or Record)."""
        headers = [r.headers for r in records]
        return cls(topic, [r.value for r in records], [r.key for r in records],
                   np.fromiter((r.partition for r in records), np.int64, len(records)),
                   np.fromiter((r.offset for r in records), np.int64, len(records)),
                   np.fromiter((r.timestamp for r in records), np.int64, len(records)),
                   headers=headers if any(headers) else None)
