"""Parquet files a DataFrame reads as they are, read by the tasks themselves with pyarrow.

Spark hands a task its rows by decoding the Parquet in the JVM and converting the rows into
Arrow batches, and for arrays of numbers that conversion costs several times what learning
them does (600,000 MNIST rows: about 3.6 s of two cores, against 0.3 s of learning). When the
DataFrame is nothing but a scan of local Parquet files, ``plan`` cuts the files into pieces (runs
of row groups, in file order), and each task reads its piece with pyarrow: the same rows, in the
files' own order, with the same Arrow types as Spark's batches would have.

A DataFrame qualifies only when nothing could make pyarrow's rows differ from Spark's:

- it is ``spark.read.parquet(folder)`` or ``spark.read.parquet(*files)`` without options,
  optionally with some of its columns selected (Spark itself says so: ``sameSemantics``);
- every file is a ``file:`` URI that the driver can open (a path every executor then reads, as
  Spark's own tasks would), and no folder between the root and a file names a partition (``k=v``);
- every column read is in every file under its own name, with the Arrow type Spark would give.

Anything else (filters, joins, tables, other formats, object stores) gets ``None`` and keeps
Spark's path.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .frames import arrow_schema
from .tasks import local_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

BATCH_ROWS = 10_000  # Spark's spark.sql.execution.arrow.maxRecordsPerBatch
MOST_PIECE_BYTES = 128 << 20  # Spark's spark.sql.files.maxPartitionBytes
LEAST_PIECE_BYTES = 4 << 20  # Spark's spark.sql.files.openCostInBytes
PIECES_WANTED = 64  # fewer, larger pieces than this only once they reach LEAST_PIECE_BYTES


@dataclass(frozen=True)
class Span:
    """Some row groups of one file: ``first_row`` is the row (in the file) where the first begins."""
    uri: str
    row_groups: tuple[int, ...]
    first_row: int


@dataclass(frozen=True)
class Piece:
    """What one task reads: spans of one or more files, in file order."""
    spans: tuple[Span, ...]
    columns: tuple[str, ...]

    def batches(self) -> Iterator[tuple[pa.RecordBatch, str, int]]:
        """(batch of ``columns``, its file's URI, the row in that file of its first row) of each
        batch of at most BATCH_ROWS rows, in order."""
        import pyarrow.parquet as pq

        for span in self.spans:
            row = span.first_row
            with pq.ParquetFile(local_path(span.uri)) as parquet:
                # one thread: a task has one core (docs/spark.md, "One core per task")
                for batch in parquet.iter_batches(BATCH_ROWS, row_groups=list(span.row_groups),
                                                  columns=list(self.columns), use_threads=False):
                    yield batch.select(list(self.columns)), span.uri, row
                    row += batch.num_rows


def plan(df: DataFrame, columns: Sequence[str]) -> list[Piece] | None:
    """The pieces that read ``columns`` of every row of ``df`` in file order, or None when ``df``
    is not a plain scan of local Parquet files (see the module's docstring)."""
    uris = _input_files(df)
    if not uris or not all(uri.startswith("file:") for uri in uris):
        return None
    paths = [local_path(uri) for uri in uris]
    if not all(os.path.isfile(path) for path in paths) or _names_partitions(paths) \
            or not _is_plain_scan(df, uris, paths):
        return None
    wanted = arrow_schema(df.select(*columns).schema)
    groups = _row_groups(uris, paths, wanted)
    return None if groups is None else _packed(groups, tuple(columns))


def _input_files(df: DataFrame) -> list[str]:
    try:
        return sorted(df.inputFiles())
    except Exception:  # noqa: BLE001 - a source Spark cannot list files of has none
        return []


def _names_partitions(paths: list[str]) -> bool:
    """Whether a folder below the files' common folder looks like a partition (``key=value``),
    whose column Spark takes from the path, not the file."""
    root = os.path.commonpath([os.path.dirname(path) for path in paths])
    return any("=" in part for path in paths for part in os.path.relpath(os.path.dirname(path), root).split(os.sep))


def _is_plain_scan(df: DataFrame, uris: list[str], paths: list[str]) -> bool:
    """Whether ``df`` is Spark's plain read of its folder or of its list of files (all columns or
    some), as Spark's own ``sameSemantics`` judges."""
    reader = df.sparkSession.read
    root = os.path.commonpath([os.path.dirname(path) for path in paths])

    def plain_reads() -> Iterator[DataFrame]:  # one at a time: each read infers a schema
        yield reader.parquet(root)
        yield reader.parquet(*uris)

    try:
        for plain in plain_reads():
            if df.sameSemantics(plain) or df.sameSemantics(plain.select(*df.columns)):
                return True
    except Exception:  # noqa: BLE001 - a folder Spark cannot read plainly is not a plain scan
        return False
    return False


@dataclass(frozen=True)
class _RowGroup:
    uri: str
    index: int
    first_row: int
    rows: int
    bytes: int  # compressed, of the columns read


def _row_groups(uris: list[str], paths: list[str], wanted: pa.Schema) -> list[_RowGroup] | None:
    """Every file's row groups (from the footers), or None when a file lacks a column or holds
    it with another type than Spark's batches would have."""
    import pyarrow.parquet as pq

    groups = []
    for uri, path in zip(uris, paths, strict=True):
        try:
            with pq.ParquetFile(path) as parquet:
                metadata, schema = parquet.metadata, parquet.schema_arrow
        except (OSError, pa.ArrowException):
            return None
        if any(schema.get_field_index(field.name) < 0 or not schema.field(field.name).type.equals(field.type)
               for field in wanted):
            return None
        first_row = 0
        for index in range(metadata.num_row_groups):
            group = metadata.row_group(index)
            chunks = [group.column(c) for c in range(group.num_columns)
                      if group.column(c).path_in_schema.split(".")[0] in wanted.names]
            if not all(_readable(chunk.compression) for chunk in chunks):
                return None
            groups.append(_RowGroup(uri, index, first_row, group.num_rows,
                                    sum(chunk.total_compressed_size for chunk in chunks)))
            first_row += group.num_rows
    return groups


def _readable(compression: str) -> bool:
    """Whether this pyarrow decompresses a column chunk of this codec (Spark may write LZO)."""
    try:
        return compression == "UNCOMPRESSED" or pa.Codec.is_available(compression.lower())
    except ValueError:
        return False


def _packed(groups: list[_RowGroup], columns: tuple[str, ...]) -> list[Piece]:
    """Consecutive row groups packed into pieces of up to a target size: a 64th of the whole, but
    at least LEAST_PIECE_BYTES and at most MOST_PIECE_BYTES (a row group is never split)."""
    target = min(MOST_PIECE_BYTES, max(LEAST_PIECE_BYTES, sum(group.bytes for group in groups) // PIECES_WANTED))
    pieces: list[Piece] = []
    run: list[_RowGroup] = []
    for group in groups:
        if run and sum(member.bytes for member in run) + group.bytes > target:
            pieces.append(_piece(run, columns))
            run = []
        run.append(group)
    if run:
        pieces.append(_piece(run, columns))
    return pieces


def _piece(groups: list[_RowGroup], columns: tuple[str, ...]) -> Piece:
    """One piece of consecutive row groups, a span per file."""
    spans: list[Span] = []
    for group in groups:
        if spans and spans[-1].uri == group.uri:
            spans[-1] = Span(group.uri, (*spans[-1].row_groups, group.index), spans[-1].first_row)
        else:
            spans.append(Span(group.uri, (group.index,), group.first_row))
    return Piece(tuple(spans), columns)


def pieces_frame(df: DataFrame, pieces: list[Piece]) -> Any:
    """A DataFrame of one row per piece (``id``: its index), one piece a partition, in order."""
    return df.sparkSession.range(len(pieces), numPartitions=len(pieces))
