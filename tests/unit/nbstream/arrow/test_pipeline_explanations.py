"""Pipeline.explain: the model's explanations of raw rows, each feature named as the encoder read it."""

from __future__ import annotations

import json
import re

import numpy as np
import pyarrow as pa
import pytest

import nbstream
from nbstream.arrow import FeatureError, FeatureSpec, Pipeline, PipelineLearner
from nbstream.arrow.hashing import hash_tokens, hashed_counts


def learned(spec: FeatureSpec, model, batch: pa.RecordBatch) -> Pipeline:
    pipeline = Pipeline(model, spec.encoder(), label="label")
    PipelineLearner(pipeline).learn(batch)
    return pipeline


def named_features(row: dict) -> list[object]:
    return [entry["feature"] for entry in row["features"]]


def test_numeric_columns_are_named_by_column_and_the_rows_are_the_models(rng):
    x, z = rng.normal(size=60), rng.normal(size=60)
    labels = np.where(x + 0.3 * z > 0, "up", "down")
    pipeline = learned(FeatureSpec.numeric_columns(["x", "z"]), nbstream.GaussianNB(),
                       pa.record_batch({"x": x, "z": z, "label": labels}))
    rows = {"x": [2.0, -1.0], "z": [0.0, 3.0]}
    explained = pipeline.explanations(rows, top=None)
    arrays = pipeline.model.explain(pipeline.transform(rows), top=None)
    np.testing.assert_array_equal(explained.arrays.features, arrays.features)
    np.testing.assert_array_equal(explained.arrays.contributions, arrays.contributions)
    assert explained.rows == pipeline.explain(rows, top=None) == arrays.rows(["x", "z"])
    assert explained.rows[0]["class"] == "up" and set(named_features(explained.rows[0])) == {"x", "z"}
    json.dumps(explained.rows, allow_nan=False)


def test_a_list_column_names_its_elements_by_place(rng):
    pixels = rng.integers(0, 4, size=(40, 6))
    labels = np.where(pixels[:, 2] > pixels[:, 4], "a", "b")
    batch = pa.record_batch({"pixels": pa.array(pixels.tolist(), pa.list_(pa.int64())), "label": labels})
    pipeline = learned(FeatureSpec.vector("pixels"), nbstream.MultinomialNB(), batch)
    explained = pipeline.explanations({"pixels": [[0, 0, 3, 0, 1, 0]]}, top=None)
    assert named_features(explained.rows[0]) == [f"pixels[{i}]" for i in explained.arrays.features[0]]
    assert set(named_features(explained.rows[0])) == {"pixels[2]", "pixels[4]"}  # the row's only nonzero elements


def test_categorical_columns_name_the_rows_value_and_an_unseen_value_adds_nothing():
    batch = pa.record_batch({"colour": ["red", "blue", "red", "green", "blue", "red"],
                             "size": [1, 3, 1, 2, 3, 2], "sale": [True, False, True, True, False, False],
                             "label": ["y", "n", "y", "n", "n", "y"]})
    pipeline = learned(FeatureSpec.categorical(["colour", "size", "sale"]), nbstream.CategoricalNB(), batch)
    rows = pipeline.explain({"colour": ["red", "purple"], "size": [3, 1], "sale": [True, False]}, top=None)
    assert set(named_features(rows[0])) == {"colour=red", "size=3", "sale=True"}
    assert set(named_features(rows[1])) == {"size=1", "sale=False"}  # purple was never seen


TEXTS = ["WINNER! Claim your free prize now", "Free entry: win a prize", "see you at six, café?",
         "lunch at noon", "Are you free for lunch?", "claim the prize, winner"]
LABELS = ["spam", "spam", "ham", "ham", "ham", "spam"]


@pytest.mark.parametrize("hash_bits, ngram_max", [(20, 1), (20, 2), (3, 2)])
def test_hashed_text_is_named_by_the_rows_words_and_ngrams_that_hash_there(hash_bits, ngram_max):
    pipeline = learned(FeatureSpec.text("text", hash_bits=hash_bits, ngram_max=ngram_max), nbstream.MultinomialNB(),
                       pa.record_batch({"text": TEXTS, "label": LABELS}))
    texts = ["Free prize for the winner: your café lunch", "Ünïcode ÉTÉ winner!"]
    explained = pipeline.explanations(texts, top=None)
    X = hashed_counts(pa.array(texts), hash_bits, ngram_max)
    for i, row in enumerate(explained.rows):
        assert len(row["features"]) == np.count_nonzero(explained.arrays.contributions[i])
        words = [word for word in re.findall(r"\w+", texts[i].lower()) if len(word) > 1]
        grams = {" ".join(words[start:start + n]) for n in range(1, ngram_max + 1) for start in range(len(words))}
        for entry, column in zip(row["features"], explained.arrays.features[i].tolist(), strict=False):
            assert column in X.indices[X.indptr[i]:X.indptr[i + 1]]
            for gram in entry["feature"].split("|"):
                assert gram in grams
                assert column in hashed_counts(pa.array([gram]), hash_bits, ngram_max).indices
                if " " not in gram:
                    assert int(hash_tokens(pa.array([gram]))[0]) & ((1 << hash_bits) - 1) == column
    if hash_bits == 3:  # eight columns for a dozen words and bigrams: some collide
        assert any("|" in name for row in explained.rows for name in named_features(row))
    assert "ünïcode" in {part for name in named_features(explained.rows[1]) for part in name.split("|")}


def test_a_bernoulli_text_pipeline_names_a_column_the_row_has_no_word_of_by_its_index():
    pipeline = learned(FeatureSpec.text("text", hash_bits=6), nbstream.BernoulliNB(),
                       pa.record_batch({"text": TEXTS, "label": LABELS}))
    row = pipeline.explain(["free prize"], top=None)[0]
    names = named_features(row)
    assert len(names) > 10 and "free" in names and "prize" in names
    assert all(name in ("free", "prize") or name.startswith("text[") for name in names)
    arrays = pipeline.explanations(["free prize"], top=None).arrays
    total = arrays.prior[0] + arrays.contributions[0].sum()
    assert total == pytest.approx(arrays.log_odds[0], rel=1e-9)


def test_rows_the_encoder_cannot_use_are_refused_as_predict_refuses_them():
    pipeline = learned(FeatureSpec.text("text", hash_bits=8), nbstream.MultinomialNB(),
                       pa.record_batch({"text": TEXTS, "label": LABELS}))
    with pytest.raises(FeatureError, match="null value"):
        pipeline.explain(["fine", None])
    with pytest.raises(ValueError, match="top must be"):
        pipeline.explain(["fine"], top=0)
