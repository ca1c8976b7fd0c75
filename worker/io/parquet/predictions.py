"""A Parquet file of predictions, written in parts and renamed into place, durably, only when complete."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from nbstream.persistence.atomic import AtomicFile

from ..files import writing


class PredictionWriter:
    """Write tables of one schema to ``path`` atomically: a reader never sees half a file.

    Use as a context manager; ``commit()`` renames the finished file into place, and leaving
    without it removes the temporary file.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self.rows = 0
        self._file: AtomicFile | None = None
        self._writer: pq.ParquetWriter | None = None

    def __enter__(self) -> PredictionWriter:
        with writing(self.path):
            self._file = AtomicFile(self.path)
        return self

    def write(self, table: pa.Table) -> None:
        if self._file is None:
            raise RuntimeError("write inside `with PredictionWriter(...)`, before commit()")
        with writing(self.path):
            if self._writer is None:
                self._writer = pq.ParquetWriter(self._file.file, table.schema)
            self._writer.write_table(table)
        self.rows += table.num_rows

    def commit(self) -> None:
        """Close the file and rename it into place (at least one table must have been written)."""
        if self._writer is None or self._file is None:
            raise RuntimeError("commit() needs a table written first")
        with writing(self.path):
            self._writer.close()
            self._writer = None
            self._file.commit()
            self._file = None

    def __exit__(self, *exc: object) -> None:
        try:
            if self._writer is not None:
                self._writer.close()
        except OSError:
            pass  # the file is discarded: the error that ended the writing is the one to report
        finally:
            if self._file is not None:
                self._file.discard()
