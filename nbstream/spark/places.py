"""Where a row came from on Spark: the columns that carry each row's file and row number through
a task, and the file URIs Spark gives as local paths."""

from __future__ import annotations

from urllib.parse import unquote, urlparse

FILE, ROW = "__nbstream_file", "__nbstream_row"  # a row's file URI and its row in that file


def local_path(uri: str) -> str:
    """A file URI as Spark gives it, as a local path where it is one ("file:///data/a.parquet" is
    "/data/a.parquet"); any other URI (hdfs://, s3a://) as it is."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri
