"""The interfaces where records enter and leave, as the loop and the checkpoint see them.

Kafka implements them in ``worker.io.kafka``; the unit tests implement them in memory, so
the prequential loop runs without a broker.
"""

from __future__ import annotations

from typing import Protocol

from nbstream.arrow import RowProblems


class Record(Protocol):
    """One input message."""
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int  # milliseconds since the epoch


class RecordSource(Protocol):
    """Where messages come from. ``assigned``: the partitions this worker reads now."""
    assigned: set

    def poll(self, timeout_ms: int) -> list[Record]:
        """The next records, in partition order, none twice (empty after the timeout)."""

    def acknowledge(self) -> None:
        """Tell upstream how far the written state goes."""


class PredictionSink(Protocol):
    def prediction(self, key: bytes | None, value: bytes) -> None:
        """Send one prediction, keyed like its input."""

    def flush(self) -> None:
        """Return once every prediction sent is durable; raise if one failed."""


class RejectSink(Protocol):
    """Where rows that cannot be used go (dead-letter topic, rejects folder). ``count``: rows so far."""
    count: int

    def reject(self, rows, problems: RowProblems) -> None:
        """Set aside every bad row of ``rows`` (the batch's records or rows) with its problem."""

    def flush(self) -> None:
        """Return once everything rejected so far is durable; raise if some of it failed."""
