"""In-memory stand-ins for the loop's sinks, state and upstream; every call is logged in order."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from worker.io.kafka.client import Reader
from worker.io.records import Polled, Record
from worker.service.follower import StateFollower


@dataclass
class FakeRecord:
    value: bytes | None
    offset: int
    partition: int = 0
    topic: str = "in"
    key: bytes | None = None
    timestamp: int = 0  # milliseconds; 0: none (left out of latency)
    headers: list = field(default_factory=list)


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

    def send_predictions(self, polled, rows, values) -> list[int]:
        self.predictions.extend(json.loads(value) for value in values)
        return []

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


class FakeStateReader(Reader):
    """A state topic held in memory: what was put in it is read by the next poll."""

    def __init__(self, records: list[tuple[bytes | None, bytes | None]] = ()):
        self.log: list[Record] = []
        self.read = 0
        self.put(records)

    def put(self, records) -> None:
        self.log += [Record("state", 0, len(self.log) + i, key, value) for i, (key, value) in enumerate(records)]

    def assign(self, topic: str, timeout_s: float = 15.0, partitions: list[int] | None = None) -> list[int]:
        return [0]

    def assign_at(self, topic: str, starts: dict[int, int]) -> None:
        self.read = starts.get(0, 0)

    def poll(self, timeout_s: float, max_records: int = 10_000) -> list:
        polled = self.log[self.read:self.read + max_records]
        self.read += len(polled)
        return polled

    def caught_up(self, *, cached: bool = False) -> bool:
        return self.read == len(self.log)

    def close(self) -> None:
        pass


class FakeFollower(StateFollower):
    """A state topic that holds what was put in it, followed as the service follows one."""

    def __init__(self, records: list[tuple[bytes | None, bytes | None]] = (), reread: bool = True):
        """reread : pending chunks are read again at take-over (as the service reads them), else kept."""
        reader = FakeStateReader(records)
        super().__init__(reader, "state", reopen=self._reread if reread else None)

    def _reread(self) -> FakeStateReader:
        return FakeStateReader([(record.key, record.value) for record in self.reader.log])

    def put(self, records) -> None:
        self.reader.put(records)
