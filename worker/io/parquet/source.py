"""Parquet files, directories or globs, read as record batches of only the needed columns.

Memory is bounded by the batch size, not the dataset: files are read one after another,
row group by row group. A position (file index, row within the file) says where the next
unread row is, so a run restarted from a snapshot skips exactly what it already learned.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from nbstream.arrow import RowProblems

from ...errors import InvalidRowError, SourceError
from ..files import special_kind

_FORMAT = ds.ParquetFileFormat()
_LOCAL = pafs.LocalFileSystem()


@dataclass(frozen=True, order=True)
class Position:
    """The next unread row: row ``row`` of file ``file_index`` in the sorted file list."""
    file_index: int = 0
    row: int = 0

    def to_json(self) -> dict[str, int]:
        return {"file_index": self.file_index, "row": self.row}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Position:
        return cls(int(data["file_index"]), int(data["row"]))


@dataclass(frozen=True)
class Batch:
    """Rows [first_row, first_row + num_rows) of ``path``; ``end`` is the position after them."""
    data: pa.RecordBatch
    path: str
    first_row: int
    end: Position

    def first_invalid(self, problems: RowProblems, advice: str) -> InvalidRowError:
        """The error of the batch's first bad row among ``problems``, named by file, row and column."""
        row, column, message = problems.first()
        return InvalidRowError(f"{self.path}: row {self.first_row + row}, column {column!r}: {message}. {advice}")


def expand_paths(paths: list[str]) -> list[str]:
    """Files, directories (searched recursively) and globs, as one sorted list of files."""
    files: list[str] = []
    for path in paths:
        if any(char in path for char in "*?["):
            matches = sorted(glob.glob(path, recursive=True))
        elif Path(path).is_dir():
            matches = _files_under(path)
        else:
            matches = [path] if Path(path).exists() else []
        if not matches:
            raise SourceError(f"{path}: no such Parquet file, directory or matching glob.")
        for match in matches:
            _check_regular_file(match)
        files.extend(matches)
    return files


def _files_under(directory: str) -> list[str]:
    """Every file under ``directory``, sorted, but those whose name (or folder's) starts with "." or
    "_" (as Spark and Hive leave beside their parts: _SUCCESS, .crc files), as Arrow's datasets do.
    Nothing is opened here: each file is checked, then read, by name."""
    found = []
    for folder, folders, names in os.walk(directory):
        folders[:] = [name for name in folders if not name.startswith((".", "_"))]
        found += [os.path.join(folder, name) for name in names if not name.startswith((".", "_"))]
    return sorted(found)


def _check_regular_file(path: str) -> None:
    """Only regular files are read: a FIFO would block for ever, a device never ends."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        raise SourceError(f"{path}: cannot read ({error.strerror}).") from None
    kind = special_kind(mode)
    if kind is not None:
        raise SourceError(f"{path}: is {kind}, not a Parquet file.")


def open_file(path: str) -> ds.ParquetFileFragment:
    """One Parquet file as a dataset fragment (its footer read and checked)."""
    try:
        fragment = _FORMAT.make_fragment(str(Path(path).resolve()), filesystem=_LOCAL)
        fragment.ensure_complete_metadata()
        return fragment
    except (OSError, pa.ArrowException) as error:
        raise SourceError(f"{path}: cannot read as Parquet ({error}).") from None


def count_rows(files: list[str]) -> int:
    """Total rows, from the footers only."""
    return sum(open_file(path).metadata.num_rows for path in files)


def read_batches(files: list[str], columns: list[str], batch_size: int,
                 start: Position = Position(),
                 check_schema: Callable[[pa.Schema, str], None] | None = None) -> Iterator[Batch]:
    """Batches of ``columns`` from ``start`` on, in file and row order.

    check_schema(schema, path) is called once per file before its first batch (to raise a
    clear error for a missing or mistyped column). Row groups are decoded ahead on
    Arrow's threads while the caller works on the current batch.
    """
    for file_index in range(start.file_index, len(files)):
        path = files[file_index]
        fragment = open_file(path)
        if check_schema is not None:
            check_schema(fragment.physical_schema, path)
        skip = start.row if file_index == start.file_index else 0
        row_groups: list[int] = []
        first_row = 0
        for group in range(fragment.metadata.num_row_groups):
            group_rows = fragment.metadata.row_group(group).num_rows
            if first_row + group_rows > skip or row_groups:
                row_groups.append(group)
            else:
                first_row += group_rows
        if not row_groups:
            continue
        try:
            scan = fragment.subset(row_group_ids=row_groups)
            for batch in scan.to_batches(columns=columns, batch_size=batch_size):
                end = first_row + batch.num_rows
                if end > skip:
                    if first_row < skip:  # the start lies inside this batch
                        batch, first_row = batch.slice(skip - first_row), skip
                    yield Batch(batch, path, first_row, Position(file_index, end))
                first_row = end
        except (OSError, pa.ArrowException) as error:
            raise SourceError(f"{path}: cannot read row {first_row} onwards ({error}).") from None
