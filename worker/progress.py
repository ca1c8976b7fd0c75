"""A progress bar with rows/s on a terminal; silence elsewhere (logs, pipes, tests)."""

from __future__ import annotations

import sys

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text


class RowsPerSecond(ProgressColumn):
    """The task's speed, or a dash until rich has measured one (it needs two updates)."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{'—':>10} rows/s" if speed is None else f"{speed:>10,.0f} rows/s")


class RowProgress:
    def __init__(self, description: str, total: int | None, done: int = 0, enabled: bool | None = None):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._progress = None
        if self.enabled:
            self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TaskProgressColumn(), RowsPerSecond(), TimeRemainingColumn(), transient=False)
            self._task = self._progress.add_task(description, total=total, completed=done)

    def __enter__(self) -> RowProgress:
        if self._progress:
            self._progress.start()
        return self

    def advance(self, rows: int) -> None:
        if self._progress:
            self._progress.advance(self._task, rows)

    def __exit__(self, *exc: object) -> None:
        if self._progress:
            self._progress.stop()
