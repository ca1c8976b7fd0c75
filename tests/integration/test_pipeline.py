"""A worker snapshot used from Python: the recorded feature spec applied to raw rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import nbstream
from nbstream.arrow import FeatureError, load_pipeline
from tests.helpers.cli import invoke
from tests.helpers.paths import SMS


@pytest.fixture(scope="module")
def spam_snapshot(tmp_path_factory):
    out = tmp_path_factory.mktemp("spam") / "spam.nbs"
    result = invoke("train", SMS / "train.parquet", "--text", "text", "--label", "label", "--out", out,
                    "--no-progress")
    assert result.exit_code == 0, result.output
    return out


def test_texts_are_predicted_as_worker_predict_does(spam_snapshot, tmp_path):
    pipeline = load_pipeline(spam_snapshot)
    test = pq.read_table(SMS / "test.parquet")
    texts = test.column("text").to_pylist()
    result = invoke("predict", spam_snapshot, SMS / "test.parquet", "--out", tmp_path / "p.parquet", "--no-progress")
    assert result.exit_code == 0, result.output
    expected = pq.read_table(tmp_path / "p.parquet").column("prediction").to_pylist()
    assert pipeline.predict(texts).tolist() == expected
    assert pipeline.predict({"text": texts}).tolist() == expected
    assert pipeline.predict(test).tolist() == expected
    proba = pipeline.predict_proba(["WINNER!! Claim your free prize now, call 09061701461", "see you at 6"])
    assert proba.shape == (2, 2) and np.allclose(proba.sum(axis=1), 1)
    assert pipeline.classes_[proba.argmax(axis=1)].tolist() == ["spam", "ham"]


def test_an_unusable_row_is_named(spam_snapshot):
    pipeline = load_pipeline(spam_snapshot)
    with pytest.raises(FeatureError, match=r"row 1, column 'text': null value \(1 of 2 rows unusable\)"):
        pipeline.predict(["hello", None])
    with pytest.raises(FeatureError, match="column 'text' not found"):
        pipeline.predict({"body": ["hello"]})


def test_a_plain_model_file_has_no_feature_spec(tmp_path):
    path = nbstream.save(nbstream.MultinomialNB().fit([[1, 0]], [0]), tmp_path / "plain.nbs")
    with pytest.raises(nbstream.SnapshotError, match="has no feature spec"):
        load_pipeline(path)


def test_numeric_columns_and_categories(tmp_path):
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"colour": ["red", "blue", "red", "green"], "size": ["s", "l", "s", "l"],
                             "label": [1, 0, 1, 0]}), path)
    result = invoke("train", path, "--features", "colour,size", "--model", "categorical", "--label", "label",
                    "--out", tmp_path / "c.nbs", "--no-progress")
    assert result.exit_code == 0, result.output
    pipeline = load_pipeline(tmp_path / "c.nbs")
    assert pipeline.predict({"colour": ["red", "blue", "purple"], "size": ["s", "l", "s"]}).tolist() == [1, 0, 1]
