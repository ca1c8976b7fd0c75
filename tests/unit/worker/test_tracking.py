"""worker.tracking without a server: what is printed of a URI, and what is checked before the work."""

from __future__ import annotations

import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from nbstream.optional import MissingDependency
from worker import tracking


def test_a_uri_is_shown_without_its_credentials():
    assert tracking.shown_uri("https://alice:s3cret@mlflow.example:8443/base") == "https://mlflow.example:8443/base"
    assert tracking.shown_uri("http://127.0.0.1:5000") == "http://127.0.0.1:5000"


def test_without_mlflow_installed_the_check_names_the_extra_before_any_work(monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if not installed
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")

    with pytest.raises(MissingDependency, match=r"pip install 'nbstream\[mlflow\]'$"):
        tracking.check_server()


def test_the_input_example_is_the_first_rows_of_the_feature_columns(tmp_path):
    pq.write_table(pa.table({"text": [f"message {i}" for i in range(20)], "label": ["ham"] * 20}),
                   tmp_path / "rows.parquet")

    example = tracking.input_example([str(tmp_path / "rows.parquet")], ["text"])

    assert example.columns.tolist() == ["text"] and example["text"].tolist() == [f"message {i}" for i in range(5)]
    assert tracking.input_example(["hdfs://cluster/data"], ["text"]) is None  # what only Spark reads
