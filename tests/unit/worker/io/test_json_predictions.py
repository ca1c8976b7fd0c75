"""JSON prediction messages: assembled a column at a time, each exactly what serialising its own dict gives."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.io.json_exact import read_exactly
from worker.io.json_predictions import prediction_values


def _one_by_one(ids, classes, best, proba, version, topic, partitions, offsets):
    """The definition: one dict per message, serialised alone."""
    labels = [] if classes is None else [str(c) for c in classes.tolist()]
    return [orjson.dumps({"id": i, "prediction": None if classes is None else classes.tolist()[b],
                          "probabilities": {} if classes is None else dict(zip(labels, row, strict=True)),
                          "model_version": version, "topic": topic, "partition": p, "offset": o})
            for i, b, row, p, o in zip(ids, [0] * len(ids) if best is None else best.tolist(),
                                       [None] * len(ids) if proba is None else proba.tolist(), partitions, offsets,
                                       strict=True)]


HOSTILE_STRINGS = ["%", "50%b", "%%s", '},{"id":', '"}', "\\", '{"id":1}', "a,b", "ünï\u2028", "", "id", "],["]
IDS = st.one_of(st.none(), st.integers(-2**63, 2**64 - 1), st.sampled_from(HOSTILE_STRINGS), st.text(), st.booleans(),
                st.floats(allow_nan=False, allow_infinity=False),
                st.lists(st.integers(-5, 5), max_size=3),
                st.dictionaries(st.sampled_from(HOSTILE_STRINGS), st.integers(-2**63, 2**63 - 1), max_size=2))
PROBABILITIES = st.one_of(st.floats(0, 1),
                          st.sampled_from([0.0, 1.0, 5e-324, 1e-300, 0.1, 1 / 3, 2.2250738585072014e-308]))


@settings(max_examples=300, deadline=None)
@given(st.lists(IDS, max_size=12),
       st.one_of(st.lists(st.sampled_from(HOSTILE_STRINGS), min_size=1, max_size=4, unique=True),
                 st.lists(st.integers(-3, 3), min_size=1, max_size=4, unique=True)),
       st.data())
def test_each_value_is_what_serialising_its_own_dict_gives(ids, labels, data):
    n, k = len(ids), len(labels)
    classes = np.array(labels, dtype=object if isinstance(labels[0], str) else np.int64)
    proba = np.array(data.draw(st.lists(st.lists(PROBABILITIES, min_size=k, max_size=k), min_size=n, max_size=n)),
                     dtype=np.float64).reshape(n, k)
    best = np.array([data.draw(st.integers(0, k - 1)) for _ in range(n)], dtype=np.int64)
    arguments = (ids, classes, best, proba, 7, '},{"id":', list(range(n)), list(range(10, 10 + n)))
    values = prediction_values(*arguments)
    assert values == _one_by_one(*arguments)
    assert [orjson.loads(v)["offset"] for v in values] == list(range(10, 10 + n))


@pytest.mark.parametrize("n", [0, 1, 2, 500])
def test_a_model_without_classes_predicts_null_with_no_probabilities(n):
    values = prediction_values(list(range(n)), None, None, None, 0, "t", [0] * n, list(range(n)))
    assert [orjson.loads(v) for v in values] == [
        {"id": i, "prediction": None, "probabilities": {}, "model_version": 0, "topic": "t", "partition": 0,
         "offset": i} for i in range(n)]


def test_ids_whose_json_holds_commas_are_serialised_one_by_one():
    ids = [[{"a": 1}, {"id": 2}], {"x": 1, "y": 2}, "a,b", 5]
    classes, best, proba = np.array(["s"], dtype=object), np.zeros(4, np.int64), np.ones((4, 1))
    arguments = (ids, classes, best, proba, 1, "t", [0] * 4, [0, 1, 2, 3])
    assert prediction_values(*arguments) == _one_by_one(*arguments)
    assert [orjson.loads(v)["id"] for v in prediction_values(*arguments)] == ids


def test_a_column_of_probabilities_that_is_a_strided_view_is_read_row_by_row():
    proba = np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::2] / 10  # not C-contiguous
    classes, best = np.array([3, 1]), np.array([0, 1, 0])
    arguments = ([1, 2, 3], classes, best, proba, 1, "t", [0] * 3, [0, 1, 2])
    assert prediction_values(*arguments) == _one_by_one(*arguments)


def test_ids_orjson_cannot_write_come_back_exactly_as_sent():
    """Integers beyond 64 bits, and nesting deeper than orjson's 254 levels, written by the standard library."""
    deep: list = []
    for _ in range(300):
        deep = [deep]
    ids = [2**70, -2**70, {"k": [2**64]}, deep, 7, "x"]
    values = prediction_values(ids, None, None, None, 0, "t", [0] * 6, list(range(6)))
    assert [read_exactly(value)["id"] for value in values] == ids
    assert values[0].startswith(b'{"id":1180591620717411303424,"prediction":null,')
    assert values[4:] == _one_by_one(ids[4:], None, None, None, 0, "t", [0] * 2, [4, 5])


def test_a_named_model_and_its_challengers_end_each_prediction():
    from worker.io.json_predictions import ModelPredictions, ServedBy, named_prediction_values

    classes, proba = np.array(["ham", "spam"]), np.array([[0.75, 0.25], [np.nan, np.nan]])
    served = ModelPredictions(classes, np.array([0, 0]), proba, np.array([4, 5]))
    challenger = ModelPredictions(np.array(["spam", "ham"]), np.array([1, 0]), np.array([[0.4, 0.6], [0.9, 0.1]]),
                                  np.array([4, 5]))
    shown = ServedBy("main", {"cnb": challenger, "new": ModelPredictions(None, None, None, 0)})
    values = named_prediction_values(["a", "b"], served, "in", [0, 0], [7, 8], shown)
    first, second = (orjson.loads(value) for value in values)
    assert first == {"id": "a", "prediction": "ham", "probabilities": {"ham": 0.75, "spam": 0.25}, "model_version": 4,
                     "topic": "in", "partition": 0, "offset": 7, "model": "main",
                     "challengers": {"cnb": {"prediction": "ham", "probabilities": {"spam": 0.4, "ham": 0.6},
                                             "model_version": 4},
                                     "new": {"prediction": None, "probabilities": {}, "model_version": 0}}}
    assert second["prediction"] is None and second["challengers"]["cnb"]["prediction"] == "spam"
    unnamed = named_prediction_values(["a", "b"], served, "in", [0, 0], [7, 8])
    assert unnamed == prediction_values(["a", "b"], classes, np.array([0, 0]), proba, np.array([4, 5]), "in", [0, 0],
                                        [7, 8])
    one = ModelPredictions(classes, np.array([0]), proba[:1], np.array([4]))
    only_named = orjson.loads(named_prediction_values(["a"], one, "in", [0], [7], ServedBy("main"))[0])
    assert only_named["model"] == "main" and "challengers" not in only_named
