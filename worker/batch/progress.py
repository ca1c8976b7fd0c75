"""A progress bar with rows/s on a terminal; silence elsewhere (logs, pipes, tests)."""

from __future__ import annotations

import sys

from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn,
                           TimeRemainingColumn)


class RowProgress:
    def __init__(self, description: str, total: int | None, done: int = 0, enabled: bool | None = None):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._progress = None
        if self.enabled:
            self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TaskProgressColumn(), TextColumn("{task.speed:>10,.0f} rows/s"),
                                      TimeRemainingColumn(), transient=False)
            self._task = self._progress.add_task(description, total=total, completed=done)

    def __enter__(self) -> "RowProgress":
        if self._progress:
            self._progress.start()
        return self

    def advance(self, rows: int) -> None:
        if self._progress:
            self._progress.advance(self._task, rows)

    def __exit__(self, *exc) -> None:
        if self._progress:
            self._progress.stop()
