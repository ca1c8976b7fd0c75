"""When to checkpoint, and the one order in which a checkpoint happens.

``Checkpointer.commit`` is the only place the order is written, for train and serve alike:

  1. flush every output: what leaves the worker for this interval (rejected rows,
     predictions, dead letters) is written and confirmed
  2. write the state, which holds the source position reached (a snapshot, renamed into
     place atomically)
  3. acknowledge upstream (Kafka: commit the offsets; Parquet has nothing to acknowledge)

The state is the source of truth: a restart resumes from the position it holds, so
whatever a crash interrupts after step 1 is redone, never counted twice, and nothing is
acknowledged that did not leave first.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


class Output(Protocol):
    """Somewhere records leave the worker (predictions, dead letters, rejected rows)."""

    def flush(self) -> None:
        """Return once everything sent so far is durable; raise if any of it failed."""


class State(Protocol):
    def write(self) -> bool:
        """Write the state with the position reached; False when there is nothing to write yet."""


class Upstream(Protocol):
    def acknowledge(self) -> None:
        """Tell the source the position the written state holds."""


@dataclass
class CheckpointPolicy:
    """Due after ``every_rows`` rows or ``every_seconds`` seconds, whichever comes first."""
    every_rows: int | None = None
    every_seconds: float | None = None
    _rows: int = 0
    _since: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
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


class Checkpointer:
    """Commits the outputs, the state and the upstream position, in that order, when due."""

    def __init__(self, policy: CheckpointPolicy, outputs: Sequence[Output], state: State,
                 upstream: Upstream | None = None):
        self.policy = policy
        self.outputs = list(outputs)
        self.state = state
        self.upstream = upstream

    def record(self, rows: int) -> bool:
        """Count rows just processed and commit when a checkpoint is due; True if one was written."""
        return self.commit() if self.policy.record(rows) else False

    def commit(self) -> bool:
        """1. flush the outputs, 2. write the state, 3. acknowledge upstream. True if state was written."""
        for output in self.outputs:  # 1
            output.flush()
        written = self.state.write()  # 2
        if written and self.upstream is not None:  # 3
            self.upstream.acknowledge()
        self.policy.reset()
        return written
