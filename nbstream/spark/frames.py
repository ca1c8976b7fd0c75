"""Between Spark's DataFrames and nbstream's Arrow side: schemas both ways, the feature spec a
DataFrame's columns call for, and each row's file and row number."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from ..arrow import FeatureSpec
from .places import FILE, ROW, local_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

TEXT_MODELS = ("bernoulli", "multinomial", "complement")


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema of the batches a task receives for a DataFrame of this Spark schema
    (Spark ML vectors arrive as their struct)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema)


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark schema of a DataFrame whose tasks yield batches of this Arrow schema."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def feature_spec(df: DataFrame, model_kind: str, features: str | Sequence[str] | FeatureSpec | None,
                 text: str | None, hash_bits: int, ngrams: int) -> FeatureSpec:
    """The spec ``fit``'s feature arguments declare: text, categorical columns, one column of
    arrays or ML vectors (a vector), or numeric columns. ValueError when they contradict."""
    if isinstance(features, FeatureSpec):
        return features
    columns = [features] if isinstance(features, str) else list(features or [])
    if bool(columns) == bool(text):
        raise ValueError("give either features= (columns) or text= (a column), exactly one.")
    if text:
        if model_kind not in TEXT_MODELS:
            raise ValueError(f"text needs a bernoulli, multinomial or complement model; got {model_kind}.")
        return FeatureSpec.text(text, hash_bits, ngrams)
    if model_kind == "categorical":
        return FeatureSpec.categorical(columns)
    if len(columns) == 1 and columns[0] in df.columns and holds_vectors(df, columns[0]):
        return FeatureSpec.vector(columns[0])
    return FeatureSpec.numeric_columns(columns)


def holds_vectors(df: DataFrame, column: str) -> bool:
    """Whether the column holds arrays or Spark ML vectors (one column of all the features)."""
    from pyspark.sql.types import ArrayType, UserDefinedType

    kind = df.schema[column].dataType
    return isinstance(kind, (ArrayType, UserDefinedType))


def with_places(df: DataFrame, columns: list[str]) -> DataFrame:
    """``columns`` with each row's file and row number in it (Spark's ``_metadata``: file sources only)."""
    from pyspark.sql import functions as F

    return df.select(*columns, F.col("_metadata.file_path").alias(FILE), F.col("_metadata.row_index").alias(ROW))


def input_files(df: DataFrame) -> list[str]:
    """The URIs of the files the DataFrame reads, in the order of their local paths (none: it reads no files)."""
    try:
        return sorted(df.inputFiles(), key=local_path)
    except Exception:  # noqa: BLE001 - a source Spark cannot list files of has none
        return []
