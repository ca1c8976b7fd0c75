"""Rows set aside by --skip-invalid: counted and written to Parquet, never silently dropped.

Rejected rows wait in memory until the next checkpoint, which writes them as one part file
named after the position the interval started at, before the snapshot. A run restarted from
that snapshot rewrites only parts after it, so no rejected row is lost or written twice.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from nbstream.features import RowProblems

from .sources.parquet import Position


class Rejects:
    def __init__(self, directory: Path):
        self.directory = directory
        self.count = 0
        self._pending: list[pa.Table] = []

    def add(self, batch: pa.RecordBatch, path: str, first_row: int, problems: RowProblems) -> None:
        """Keep the bad rows of a batch with their file, row, column and error."""
        bad = np.flatnonzero(problems.bad)
        table = pa.Table.from_batches([batch]).take(pa.array(bad))
        table = (table.append_column("_file", pa.array([path] * len(bad)))
                 .append_column("_row", pa.array(first_row + bad, pa.int64()))
                 .append_column("_column", pa.array(problems.column[bad].tolist(), pa.string()))
                 .append_column("_error", pa.array(problems.message[bad].tolist(), pa.string())))
        self._pending.append(table)
        self.count += len(bad)

    def flush(self, interval_start: Position) -> Path | None:
        """Write what is pending as one part file (atomically); None when nothing is."""
        if not self._pending:
            return None
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.directory / f"part-{interval_start.file_index:05d}-{interval_start.row:012d}.parquet"
        temporary = target.with_suffix(".tmp")
        pq.write_table(pa.concat_tables(self._pending, promote_options="permissive"), temporary)
        os.replace(temporary, target)
        self._pending = []
        return target
