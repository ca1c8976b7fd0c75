"""worker.tracking without a server: what is printed of a URI, and what is checked before the work."""

from __future__ import annotations

import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from nbstream.utils.optional import MissingDependency
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


def test_work_that_outlives_its_deadline_is_given_up_at_the_deadline():
    started = time.monotonic()
    with pytest.raises(tracking.DeadlinePassed, match=r"^no complete answer within 0.3 s$"):
        tracking.within(0.3, lambda: time.sleep(10))  # a daemon thread: it ends with the process
    assert time.monotonic() - started < 2

    assert tracking.within(5, lambda: 42) == 42
    with pytest.raises(KeyError):
        tracking.within(5, lambda: {}["missing"])  # what the work raises, raised here


def test_mlflow_requests_are_bounded_while_a_run_is_logged_unless_the_user_bounded_them(monkeypatch):
    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_TIMEOUT", raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "5")

    settings = tracking._client_settings(timeout=4.5)

    assert settings["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "5"  # whole seconds, as MLflow reads it
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in settings  # the user's own
    assert tracking._client_settings(timeout=600)["MLFLOW_HTTP_REQUEST_TIMEOUT"] == str(tracking.REQUEST_SECONDS)
