"""Parquet files a DataFrame reads as they are, read by the tasks themselves with pyarrow.

Spark hands a task its rows by decoding the Parquet in the JVM and converting the rows into
Arrow batches, and for arrays of numbers that conversion costs several times what learning
them does (600,000 MNIST rows: about 3.6 s of two cores, against 0.3 s of learning). When the
DataFrame is nothing but a scan of local Parquet files, ``plan`` cuts the files into pieces (runs
of row groups, in file order), and each task reads its piece with pyarrow: the same rows, in the
files' own order, with the same Arrow types as Spark's batches would have.

A DataFrame qualifies only when nothing could make pyarrow's rows differ from Spark's:

- it is ``spark.read.parquet(folder)`` or ``spark.read.parquet(*files)`` (by path or URI), with no
  option but ``mergeSchema``, optionally with some of its columns selected (Spark itself says so:
  ``sameSemantics``);
- every file is a ``file:`` URI that the driver can open (a path every executor then reads, as
  Spark's own tasks would), and no folder between the root and a file names a partition (``k=v``);
- every column read is in every file under its own name, with the Arrow type Spark would give.

Anything else (filters, joins, tables, other formats, object stores) gets ``None`` and keeps
Spark's path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .frames import arrow_schema, input_files
from .places import local_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

BATCH_ROWS = 10_000  # Spark's spark.sql.execution.arrow.maxRecordsPerBatch, unless the session sets it
MOST_PIECE_BYTES = 128 << 20  # Spark's spark.sql.files.maxPartitionBytes, unless the session sets it
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
    batch_rows: int = BATCH_ROWS

    def batches(self) -> Iterator[tuple[pa.RecordBatch, str, int]]:
        """(batch of ``columns``, its file's URI, the row in that file of its first row) of each
        batch of at most ``batch_rows`` rows, in order; PieceUnreadable when a file cannot be read."""
        import pyarrow.parquet as pq

        for span in self.spans:
            row = span.first_row
            try:
                with pq.ParquetFile(local_path(span.uri)) as parquet:
                    # one thread: a task has one core (docs/spark.md, "One core per task")
                    for batch in parquet.iter_batches(self.batch_rows, row_groups=list(span.row_groups),
                                                      columns=list(self.columns), use_threads=False):
                        yield batch.select(list(self.columns)), span.uri, row
                        row += batch.num_rows
            except (OSError, pa.ArrowException) as error:  # changed or gone since the driver read its footer
                raise PieceUnreadable(f"{local_path(span.uri)}: cannot be read on the executor: "
                                      f"{str(error).splitlines()[0] if str(error) else type(error).__name__}") from None


class PieceUnreadable(Exception):
    """A piece's file could not be read on the executor: its message names the file and why."""


def plan(df: DataFrame, columns: Sequence[str]) -> list[Piece] | None:
    """The pieces that read ``columns`` of every row of ``df`` in file order, or None when ``df``
    is not a plain scan of local Parquet files (see the module's docstring) or has no row group."""
    uris = input_files(df)
    if not uris or not all(uri.startswith("file:") for uri in uris):
        return None
    paths = [local_path(uri) for uri in uris]
    if not all(os.path.isfile(path) for path in paths) or _names_partitions(paths) \
            or not _reads_every_file(df.sparkSession):
        return None
    scanned = [(uri, path) for uri, path in zip(uris, paths, strict=True) if _is_scanned(path)]
    if not scanned or not _is_plain_scan(df, uris, paths, scanned[0][1]):
        return None
    wanted = arrow_schema(df.select(*columns).schema)
    if any(_holds_time(field.type) for field in wanted):  # Spark may rebase old dates and times
        return None
    groups = _row_groups(scanned, wanted)
    conf = df.sparkSession.conf
    most = _byte_size(conf.get("spark.sql.files.maxPartitionBytes", None)) or MOST_PIECE_BYTES
    rows = _positive(conf.get("spark.sql.execution.arrow.maxRecordsPerBatch", None)) or BATCH_ROWS
    return _packed(groups, tuple(columns), most, rows) if groups else None


def _is_scanned(path: str) -> bool:
    """Whether Spark's scan reads a file it lists: not when empty, nor named with a leading ``_``
    or ``.`` (``_metadata``, ``_common_metadata``, ``.crc`` files)."""
    return not os.path.basename(path).startswith(("_", ".")) and os.path.getsize(path) > 0


def _names_partitions(paths: list[str]) -> bool:
    """Whether a folder below the files' common folder looks like a partition (``key=value``),
    whose column Spark takes from the path, not the file."""
    root = os.path.commonpath([os.path.dirname(path) for path in paths])
    return any("=" in part for path in paths for part in os.path.relpath(os.path.dirname(path), root).split(os.sep))


def _reads_every_file(session: Any) -> bool:
    """Whether the session fails on a corrupt or vanished file rather than skipping it, as pyarrow would."""
    return all(str(session.conf.get(name, "false")).lower() != "true"
               for name in ("spark.sql.files.ignoreCorruptFiles", "spark.sql.files.ignoreMissingFiles"))


def _holds_time(kind: pa.DataType) -> bool:
    if pa.types.is_temporal(kind):
        return True
    return any(_holds_time(kind.field(index).type) for index in range(kind.num_fields))


def _is_plain_scan(df: DataFrame, uris: list[str], paths: list[str], example: str) -> bool:
    """Whether ``df`` is Spark's plain read of its files (by path or URI) or of their folder, with all its
    columns or some, with ``mergeSchema`` or without, as Spark's own ``sameSemantics`` judges.

    The reads compared are first given ``df``'s schema, which spares inferring one and matches a
    read of all the columns; only when ``df``'s columns are not those of the file at ``example``
    are reads that infer theirs compared too (a read of some columns, or in another order)."""
    from pyspark.errors import PySparkException

    folders = {os.path.dirname(path) for path in paths}
    sources = ([[folders.pop()]] if len(folders) == 1 else []) + [paths, uris]  # Spark tells a path from its URI
    session = df.sparkSession
    refusals: tuple[type[Exception], ...] = (PySparkException, *_java_errors())
    try:
        for schema in (df.schema, None) if _selects_columns(df, example) else (df.schema,):
            for source in sources:
                for options in ({}, {"mergeSchema": "true"}):
                    reader = session.read.options(**options)
                    plain = (reader.schema(schema) if schema is not None else reader).parquet(*source)
                    if df.sameSemantics(plain) or df.sameSemantics(plain.select(*df.columns)):
                        return True
    except refusals:  # a source Spark cannot read plainly is not a plain scan
        return False
    return False


def _selects_columns(df: DataFrame, path: str) -> bool:
    """Whether ``df`` has other columns than the file at ``path``, or in another order."""
    import pyarrow.parquet as pq

    try:
        return list(df.columns) != list(pq.read_schema(path).names)
    except (OSError, pa.ArrowException):
        return False


def _java_errors() -> tuple[type[Exception], ...]:
    """Py4J's error of a classic session (a Connect client may lack py4j)."""
    try:
        from py4j.protocol import Py4JError
    except ImportError:
        return ()
    return (Py4JError,)


@dataclass(frozen=True)
class _RowGroup:
    uri: str
    index: int
    first_row: int
    bytes: int  # compressed, of the columns read


def _row_groups(files: list[tuple[str, str]], wanted: pa.Schema) -> list[_RowGroup] | None:
    """Every file's row groups (from the footers; ``files``: (URI, local path) pairs), or None when
    a file lacks a column or holds it with another type than Spark's batches would have."""
    import pyarrow.parquet as pq

    groups = []
    for uri, path in files:
        try:
            with pq.ParquetFile(path) as parquet:
                metadata, schema = parquet.metadata, parquet.schema_arrow
        except (OSError, pa.ArrowException):
            return None
        if not all(_holds_as_spark_reads(schema, field) for field in wanted):
            return None
        first_row = 0
        for index in range(metadata.num_row_groups):
            group = metadata.row_group(index)
            chunks = [group.column(c) for c in range(group.num_columns)
                      if group.column(c).path_in_schema.split(".")[0] in wanted.names]
            if not all(_readable(chunk.compression) for chunk in chunks):
                return None
            groups.append(_RowGroup(uri, index, first_row, sum(chunk.total_compressed_size for chunk in chunks)))
            first_row += group.num_rows
    return groups


def _holds_as_spark_reads(schema: pa.Schema, wanted: pa.Field) -> bool:
    """Whether ``schema`` has the field under its own name (once), with the type Spark's batches have."""
    index = schema.get_field_index(wanted.name)  # -1 when missing or there twice
    return index >= 0 and bool(schema.field(index).type.equals(wanted.type))


def _readable(compression: str) -> bool:
    """Whether this pyarrow decompresses a column chunk of this codec (Spark may write LZO)."""
    try:
        return compression == "UNCOMPRESSED" or pa.Codec.is_available(compression.lower())
    except ValueError:
        return False


_SIZE = re.compile(r"(\d+)\s*([kmgtp]?)b?")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def _positive(setting: str | None) -> int | None:
    """A whole-number setting when it is one above 0 (Spark reads 0 or less as "no limit": then None)."""
    text = (setting or "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def _byte_size(setting: str | None) -> int | None:
    """A Spark size setting in bytes ("134217728b", "128MB", "512m", "1g"); None if unset, 0 or unreadable."""
    found = _SIZE.fullmatch((setting or "").strip().lower())
    return (int(found[1]) * _UNITS[found[2]] or None) if found else None


def _packed(groups: list[_RowGroup], columns: tuple[str, ...], most: int = MOST_PIECE_BYTES,
            batch_rows: int = BATCH_ROWS) -> list[Piece]:
    """Consecutive row groups packed into pieces of up to a target size: a 64th of the whole, but
    at least LEAST_PIECE_BYTES and at most ``most`` (a row group is never split)."""
    target = min(most, max(LEAST_PIECE_BYTES, sum(group.bytes for group in groups) // PIECES_WANTED))
    pieces: list[Piece] = []
    run: list[_RowGroup] = []
    size = 0
    for group in groups:
        if run and size + group.bytes > target:
            pieces.append(_piece(run, columns, batch_rows))
            run, size = [], 0
        run.append(group)
        size += group.bytes
    if run:
        pieces.append(_piece(run, columns, batch_rows))
    return pieces


def _piece(groups: list[_RowGroup], columns: tuple[str, ...], batch_rows: int) -> Piece:
    """One piece of consecutive row groups, a span per file."""
    by_file: dict[str, list[_RowGroup]] = {}
    for group in groups:
        by_file.setdefault(group.uri, []).append(group)
    return Piece(tuple(Span(uri, tuple(group.index for group in run), run[0].first_row)
                       for uri, run in by_file.items()), columns, batch_rows)


def pieces_frame(session: SparkSession, pieces: list[Piece]) -> DataFrame:
    """A DataFrame of one row per piece (``id``: its index), one piece a partition, in order."""
    return session.range(len(pieces), numPartitions=len(pieces))
