"""Rows set aside by --skip-invalid: counted and written to Parquet, never silently dropped.

Rejected rows wait in memory until the next checkpoint flushes them as one part file, before
the snapshot is written. The part is named after the position of its first row, so a run
restarted from that snapshot reads the same rows again and writes the same part name: no
rejected row is lost or written twice.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from nbstream.arrow import RowProblems
from nbstream.persistence.atomic import AtomicFile

from ..files import writing
from .source import Batch


class ParquetRejects:
    """The reject sink of `worker train`: bad rows with their file, row, column and error.

    count : rows rejected in all (set it when continuing a run)
    """

    def __init__(self, directory: Path, count: int = 0):
        self.directory = directory
        self.count = count
        self._pending: list[pa.Table] = []
        self._first: tuple[int, int] | None = None  # (file index, row) of the first pending row

    def reject(self, batch: Batch, problems: RowProblems) -> None:
        """Keep the bad rows of a batch with their file, row, column and error."""
        bad = np.flatnonzero(problems.bad)
        if not len(bad):
            return
        table = pa.Table.from_batches([batch.data]).take(pa.array(bad))
        table = (table.append_column("_file", pa.array([batch.path] * len(bad)))
                 .append_column("_row", pa.array(batch.first_row + bad, pa.int64()))
                 .append_column("_column", pa.array(problems.column[bad].tolist(), pa.string()))
                 .append_column("_error", pa.array(problems.message[bad].tolist(), pa.string())))
        if self._first is None:
            self._first = (batch.end.file_index, batch.first_row + int(bad[0]))
        self._pending.append(table)
        self.count += len(bad)

    def flush(self) -> None:
        """Write what is pending as one part file (atomically and durably)."""
        if not self._pending or self._first is None:
            return
        file_index, row = self._first
        target = self.directory / f"part-{file_index:05d}-{row:012d}.parquet"
        with writing(self.directory), AtomicFile(target) as out:
            pq.write_table(pa.concat_tables(self._pending, promote_options="permissive"), out)
        self._pending, self._first = [], None
