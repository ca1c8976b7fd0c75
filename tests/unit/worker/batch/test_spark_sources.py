"""The types Parquet files may disagree on under --engine spark, and local paths checked before Spark starts."""

from __future__ import annotations

import pytest

from worker.batch.spark_sources import check_local_paths, widened
from worker.errors import SourceError

types = pytest.importorskip("pyspark.sql.types")


@pytest.mark.parametrize(("one", "other", "common"), [
    (types.IntegerType(), types.LongType(), types.LongType()),
    (types.ShortType(), types.IntegerType(), types.IntegerType()),
    (types.LongType(), types.DoubleType(), types.DoubleType()),
    (types.FloatType(), types.DoubleType(), types.DoubleType()),
    (types.ArrayType(types.IntegerType()), types.ArrayType(types.DoubleType()), types.ArrayType(types.DoubleType())),
    (types.StringType(), types.StringType(), types.StringType()),
])
def test_numbers_widen_to_the_type_that_holds_both(one, other, common):
    assert widened(one, other) == common == widened(other, one)


@pytest.mark.parametrize(("one", "other"), [(types.LongType(), types.StringType()),
                                            (types.ArrayType(types.IntegerType()), types.IntegerType()),
                                            (types.ArrayType(types.LongType()), types.ArrayType(types.StringType()))])
def test_numbers_and_strings_have_no_common_type(one, other):
    assert widened(one, other) is None


def test_a_local_path_glob_or_file_uri_that_matches_nothing_is_refused(tmp_path):
    (tmp_path / "a.parquet").write_bytes(b"")
    check_local_paths([str(tmp_path / "a.parquet"), str(tmp_path / "*.parquet"), f"file://{tmp_path}",
                       "s3a://bucket/anything", "hdfs://nn/data"])
    for missing in (str(tmp_path / "b.parquet"), str(tmp_path / "*.csv"), f"file://{tmp_path}/none"):
        with pytest.raises(SourceError, match="no such Parquet file, directory or matching glob"):
            check_local_paths([missing])
