"""What `--engine spark` reads: local paths checked before Spark starts, and Parquet files read as
one DataFrame even where their column types differ as the local engine allows.

Spark reads a folder of Parquet with the schema of one file and fails part way when another
file's column has another type. The local engine reads each file as it is, so files that mix
``array<int>`` and ``array<double>`` features, or int and bigint labels, train there. Here the
files' schemas are merged first (``mergeSchema``: one job over the footers); where Spark cannot
merge them, each file's schema is read, numbers are widened to the type that holds them all
(integers to the widest integer, anything with a fraction to double, arrays element by element),
and the files are read group by group and put together (``unionByName``). A column the command
needs that holds numbers in one file and strings in another is refused in one line naming both.
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from ..errors import SourceError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

METADATA = "_metadata"  # Spark's hidden column of each row's file and row, kept through the union


def check_local_paths(paths: list[str]) -> None:
    """SourceError (the local engine's line) for a local path, directory or glob that matches
    nothing: found out before Spark takes its seconds to start. Paths with a scheme other than
    file: (hdfs://, s3a://) are Spark's to resolve."""
    for path in paths:
        scheme = urlparse(path).scheme
        if scheme not in ("", "file"):
            continue
        local = urlparse(path).path if scheme else path
        found = glob.glob(local) if glob.has_magic(local) else Path(local).exists()
        if not found:
            raise SourceError(f"{path}: no such Parquet file, directory or matching glob.")


def read_parquet(spark: SparkSession, paths: list[str], needed: list[str], label: str | None) -> DataFrame:
    """The rows of the Parquet files at ``paths``, every file's columns in one type each.

    needed : the columns the command reads (a conflict in another column only drops it)
    label : the label column, whose numbers-and-strings conflict is named as the local engine names it
    """
    from pyspark.errors import PySparkException

    try:
        return _analysed(spark.read.option("mergeSchema", "true").parquet(*paths))
    except Exception as error:  # noqa: BLE001 - classic sessions raise a schema conflict as a Py4J error
        if "CANNOT_MERGE" in str(error):
            return _read_by_schema(spark, paths, needed, label)
        if isinstance(error, PySparkException):  # a path that is not there, a file that is not Parquet
            raise SourceError(first_line(error)) from None
        raise


def read_table(spark: SparkSession, name: str) -> DataFrame:
    """A catalog table (Hive, Delta, Iceberg), or SourceError in one line."""
    from pyspark.errors import PySparkException

    try:
        return _analysed(spark.table(name))
    except PySparkException as error:
        raise SourceError(first_line(error)) from None


def _analysed(df: DataFrame) -> DataFrame:
    """The DataFrame with its schema resolved, so that a path or table that is not there fails
    here (a Spark Connect session resolves nothing until asked)."""
    df.schema  # noqa: B018 - the resolution is the point
    return df


def _read_by_schema(spark: SparkSession, paths: list[str], needed: list[str], label: str | None) -> DataFrame:
    """The files read in groups of one schema each, cast to the common types and put together."""
    from pyspark.sql import functions as F

    files = sorted(spark.read.parquet(*paths).inputFiles())
    schemas = {file: spark.read.parquet(file).schema for file in files}
    common = _common_types(schemas, needed, label)
    groups: dict[str, list[str]] = {}
    for file, schema in schemas.items():
        groups.setdefault(schema.json(), []).append(file)
    frames = []
    for group in groups.values():
        own = schemas[group[0]]
        columns = [F.col(name).cast(kind).alias(name) for name, kind in common.items() if name in own.names]
        frames.append(spark.read.parquet(*group).select(*columns, F.col(METADATA)))
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame, allowMissingColumns=True)
    return union


def _common_types(schemas: dict[str, Any], needed: list[str], label: str | None) -> dict[str, Any]:
    """Each column's type that all the files' values fit (columns in order of first appearance);
    a needed column without one is refused, any other left out."""
    seen: dict[str, tuple[Any, str]] = {}  # column -> (its common type so far, the first file that had it)
    refused: set[str] = set()
    for file, schema in schemas.items():
        for field in schema.fields:
            name = field.name
            if name in refused:
                continue
            if name not in seen:
                seen[name] = (field.dataType, file)
                continue
            kind, first = seen[name]
            common = widened(kind, field.dataType)
            if common is not None:
                seen[name] = (common, first)
            elif name in needed:
                raise SourceError(_conflict(name, label, file, field.dataType, first, kind))
            else:
                refused.add(name)
    return {name: kind for name, (kind, _) in seen.items() if name not in refused}


def widened(one: Any, other: Any) -> Any | None:
    """The Spark type that holds the values of both, or None: the same type; the wider of two
    integer types; double for numbers with a fraction; arrays of such element types."""
    from pyspark.sql.types import ArrayType, ByteType, DoubleType, IntegerType, LongType, NumericType, ShortType

    if one == other:
        return one
    integers = (ByteType, ShortType, IntegerType, LongType)
    if isinstance(one, integers) and isinstance(other, integers):
        return max(one, other, key=lambda kind: integers.index(type(kind)))
    if isinstance(one, NumericType) and isinstance(other, NumericType):
        return DoubleType()
    if isinstance(one, ArrayType) and isinstance(other, ArrayType):
        element = widened(one.elementType, other.elementType)
        return None if element is None else ArrayType(element, one.containsNull or other.containsNull)
    return None


def _conflict(name: str, label: str | None, file: str, kind: Any, first: str, first_kind: Any) -> str:
    from pyspark.sql.types import NumericType, StringType

    from nbstream.spark.places import local_path

    here, there = kind.simpleString(), f"{first_kind.simpleString()} in {local_path(first)}"
    if name == label and {type(kind), type(first_kind)} & {StringType} and \
            (isinstance(kind, NumericType) or isinstance(first_kind, NumericType)):
        return f"{local_path(file)}: column {name!r}: labels mix numbers and strings ({here} here, {there})."
    return f"{local_path(file)}: column {name!r} is {here} here and {there}; the files must agree."


def first_line(error: Exception) -> str:
    """The first line of an error's message (Spark's go on with its stack)."""
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
