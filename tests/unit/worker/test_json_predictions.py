"""JSON prediction messages: serialised all at once, each exactly as if serialised alone."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.io.json_predictions import prediction_values


def _one_by_one(ids, predictions, probabilities, classes, version, topic, partitions, offsets):
    labels = [str(c) for c in classes] if classes is not None else []
    return [orjson.dumps({"id": i, "prediction": p, "probabilities": dict(zip(labels, row)) if probabilities is not None
                          else {}, "model_version": version, "topic": topic, "partition": pa, "offset": o})
            for i, p, row, pa, o in zip(ids, predictions, probabilities.tolist() if probabilities is not None
                                        else [None] * len(ids), partitions, offsets)]


HOSTILE_STRINGS = ['},{"id":', '"}', "\\", '{"id":1}', "ünï\u2028", "", "id"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1), st.sampled_from(HOSTILE_STRINGS), st.text(),
                          st.booleans(), st.floats(allow_nan=False, allow_infinity=False),
                          st.lists(st.sampled_from(HOSTILE_STRINGS), max_size=2),
                          st.dictionaries(st.sampled_from(HOSTILE_STRINGS), st.integers(-2**63, 2**63 - 1), max_size=2)),
                max_size=12),
       st.lists(st.sampled_from(HOSTILE_STRINGS), min_size=1, max_size=3, unique=True))
def test_each_value_is_what_serialising_its_object_alone_gives(ids, classes):
    n = len(ids)
    rng = np.random.default_rng(n)
    probabilities = rng.random((n, len(classes)))
    predictions = [classes[i % len(classes)] for i in range(n)]
    arguments = (ids, predictions, probabilities, classes, 7, '},{"id":', list(range(n)), list(range(10, 10 + n)))
    values = prediction_values(*arguments)
    assert values == _one_by_one(*arguments)
    assert [orjson.loads(v)["offset"] for v in values] == list(range(10, 10 + n))


@pytest.mark.parametrize("n", [0, 1, 2, 500])
def test_a_model_without_classes_predicts_null_with_no_probabilities(n):
    values = prediction_values(list(range(n)), [None] * n, None, None, 0, "t", [0] * n, list(range(n)))
    assert [orjson.loads(v) for v in values] == [
        {"id": i, "prediction": None, "probabilities": {}, "model_version": 0, "topic": "t", "partition": 0,
         "offset": i} for i in range(n)]


def test_an_id_holding_objects_keyed_id_is_not_cut_apart():
    ids = [[{"a": 1}, {"id": 2}], {"x": {"id": 3}}, 5]
    arguments = (ids, ["s"] * 3, np.ones((3, 1)), ["s"], 1, "t", [0] * 3, [0, 1, 2])
    assert prediction_values(*arguments) == _one_by_one(*arguments)
