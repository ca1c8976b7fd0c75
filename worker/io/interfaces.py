"""The interfaces where records enter and leave, as the loop and the checkpoint see them.

Kafka implements them in ``worker.io.kafka``; the unit tests implement them in memory, so
the prequential loop runs without a broker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from nbstream.arrow import RowProblems

from .records import Origin, Polled

RowsT_contra = TypeVar("RowsT_contra", contravariant=True)


class PredictionSink(Protocol):
    def send_predictions(self, polled: Polled, rows: list[int], values: list[bytes]) -> list[int]:
        """values[j]: the prediction of message rows[j], sent keyed like it. Returns the j whose
        prediction went to the dead-letter topic instead (too large for the output topic)."""

    def flush(self) -> None:
        """Return once every prediction sent is durable; raise if one failed."""


class RejectSink(Protocol[RowsT_contra]):
    """Where rows that cannot be used go (dead-letter topic, rejects folder). ``count``: rows so far."""
    count: int

    def reject(self, rows: RowsT_contra, problems: RowProblems) -> None:
        """Set aside every bad row of ``rows`` (a poll's messages, or a file's rows) with its problem."""

    def flush(self) -> None:
        """Return once everything rejected so far is durable; raise if some of it failed."""


@dataclass
class Refusals:
    """What the output refused (the broker: see ``kafka/sink.py``), kept across sessions; inputs
    are (topic, partition, offset)."""
    suspects: set[Origin] = field(default_factory=set)  # in a refused batch: next time, sent alone
    poisoned: dict[Origin, str] = field(default_factory=dict)  # refused alone: next time, a dead letter with this error

    def poisoned_errors(self, polled: Polled) -> list[str | None]:
        """(n,) the error of each of a poll's inputs whose output was refused alone, else None."""
        poisoned = self.poisoned
        return [poisoned.get((polled.topic, p, o))
                for p, o in zip(polled.partitions.tolist(), polled.offsets.tolist(), strict=True)]
