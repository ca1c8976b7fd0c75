"""In-memory stand-ins for the loop's sinks, state and upstream; every call is logged in order."""

from __future__ import annotations

import json
from dataclasses import dataclass

from worker.io.records import Polled


@dataclass
class FakeRecord:
    value: bytes | None
    offset: int
    partition: int = 0
    topic: str = "in"
    key: bytes | None = None
    timestamp: int = 0  # milliseconds; 0: none (left out of latency)


def records(messages: list, first_offset: int = 0) -> Polled:
    """A poll of messages holding the given dicts as JSON (bytes and None are taken as they are)."""
    return Polled.of("in", [FakeRecord(m if m is None or isinstance(m, bytes) else json.dumps(m).encode(),
                                       first_offset + i, key=str(first_offset + i).encode())
                            for i, m in enumerate(messages)])


class Journal(list):
    """The order in which the fakes were called."""


class FakeUpstream:
    """Where the source position is acknowledged (Checkpointer's Upstream)."""

    def __init__(self, journal: Journal):
        self.journal = journal

    def acknowledge(self) -> None:
        self.journal.append("acknowledge")


class FakeSink:
    """Prediction and reject sink at once, as the Kafka producer is."""

    def __init__(self, journal: Journal):
        self.journal = journal
        self.predictions: list[dict] = []
        self.rejected: list[tuple[int, str, str]] = []  # (offset, column, message)
        self.count = 0

    def send_predictions(self, polled, rows, values) -> None:
        self.predictions.extend(json.loads(value) for value in values)

    def reject(self, polled, problems) -> None:
        for row, column, message in problems:
            self.rejected.append((int(polled.offsets[row]), column, message))
            self.count += 1

    def flush(self) -> None:
        self.journal.append("flush")


class FakeState:
    def __init__(self, journal: Journal, written: bool = True):
        self.journal, self.written = journal, written

    def write(self) -> bool:
        self.journal.append("write")
        return self.written


class FakeFollower:
    """A state topic that holds what was put in it (StateFollower's interface)."""

    def __init__(self, records: list[tuple[bytes, bytes | None]] = ()):
        from worker.io.kafka.state_topic import StateAssembler

        self.topic = "state"
        self.assembler = StateAssembler()
        self.pending = list(records)
        self.bytes_read = 0

    def put(self, records) -> None:
        self.pending.extend(records)

    def poll(self, timeout_s: float = 0.0) -> list[str]:
        names = [self.assembler.add(key, value) for key, value in self.pending]
        self.pending = []
        return [name for name in names if name]

    def catch_up(self, timeout_s: float) -> list[str]:
        return self.poll()
