"""When to checkpoint, and the one order in which a checkpoint happens.

Order (each step durable before the next):
  1. flush what leaves the worker for this interval (rejected rows; for Kafka, the producer)
  2. write the snapshot, which holds the source position reached (atomic rename)
  3. acknowledge upstream (for Kafka, commit the offsets; Parquet has nothing to commit)

The snapshot is the source of truth: a restart resumes from the position it holds, so
whatever a crash interrupts after step 2 is redone, never counted twice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class CheckpointPolicy:
    """Due after ``every_rows`` rows or ``every_seconds`` seconds, whichever comes first."""
    every_rows: int | None = None
    every_seconds: float | None = None
    _rows: int = 0
    _since: float = field(default_factory=time.monotonic)

    def __post_init__(self):
        for name in ("every_rows", "every_seconds"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive; got {value}.")

    def record(self, rows: int) -> bool:
        """Count rows just processed; True when a checkpoint is due."""
        self._rows += rows
        by_rows = self.every_rows is not None and self._rows >= self.every_rows
        by_time = self.every_seconds is not None and time.monotonic() - self._since >= self.every_seconds
        return by_rows or by_time

    def reset(self) -> None:
        self._rows = 0
        self._since = time.monotonic()
