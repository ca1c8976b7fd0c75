"""CategoricalNB refuses tables past its documented bounds (min_categories at most 2**24, 2**28
(class, category) cells in all) with a ValueError naming the cause, before allocating them, and a
refused batch leaves the model as it was."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import nbstream
from nbstream.naive_bayes.categorical import MOST_CATEGORIES
from nbstream.stats.counts import MOST_CATEGORY_CELLS


def refused_within(limit_bytes: int, learn) -> str:
    """The ValueError's message of ``learn()``, which must allocate less than ``limit_bytes`` on its way."""
    tracemalloc.start()
    try:
        with pytest.raises(ValueError) as refused:
            learn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < limit_bytes, f"{peak:,} bytes allocated before the refusal"
    return str(refused.value)


@pytest.mark.parametrize("min_categories", [10**9, MOST_CATEGORIES + 1, np.array([3, 10**9])])
def test_min_categories_past_its_bound_is_refused_by_name(min_categories):
    message = refused_within(1 << 20, lambda: nbstream.CategoricalNB(min_categories=min_categories).fit(
        [[0, 1], [1, 0]], [0, 1]))
    assert message.startswith("min_categories must be") and str(MOST_CATEGORIES) in message


def test_the_rule_says_the_bound():
    rule = nbstream.CategoricalNB.parameter_rules()["min_categories"]
    assert rule.problem(10**9, {}) == ("min_categories must be None or an integer >= 1 and <= 16777216, or one per "
                                      "feature; got 1000000000.")


def test_min_categories_too_many_for_the_classes_is_refused_before_allocating():
    classes = 2 * MOST_CATEGORY_CELLS // MOST_CATEGORIES  # each class a table of 2**24 cells: twice the bound
    message = refused_within(1 << 20, lambda: nbstream.CategoricalNB(min_categories=MOST_CATEGORIES).fit(
        np.zeros((classes, 1), dtype=int), np.arange(classes)))
    assert f"{classes} classes x 16,777,216 categories" in message
    assert "lower min_categories (16777216) or learn fewer classes" in message


def test_a_category_code_past_the_bound_is_refused_and_the_model_kept():
    model = nbstream.CategoricalNB().partial_fit([[0, 1], [1, 0]], ["a", "b"])
    before = model.predict_proba([[0, 1]])

    message = refused_within(1 << 20, lambda: model.partial_fit([[0, 10**9]], ["c"]))

    assert "CategoricalNB's tables would hold 3,000,000,009 (class, category) cells" in message
    assert "feature 1 has 1,000,000,001" in message and "min_categories" in message
    assert model.classes_.tolist() == ["a", "b"]  # the new label was not learned either
    np.testing.assert_array_equal(model.predict_proba([[0, 1]]), before)
    model.partial_fit([[1, 1]], ["c"])  # and it goes on
    assert model.classes_.tolist() == ["a", "b", "c"]


def test_new_classes_past_the_bound_are_refused_and_the_model_kept():
    width = MOST_CATEGORY_CELLS // 4
    model = nbstream.CategoricalNB(window=100, window_buckets=4).partial_fit([[0], [3]], [0, 1])
    model.partial_fit([[0]], [2])  # three classes of width 4: well within

    with pytest.raises(ValueError, match="would hold"):
        model.partial_fit(np.array([[width - 1]] * 2), [3, 4])  # 5 classes x 2**26 categories
    assert model.classes_.tolist() == [0, 1, 2]
    assert [table.shape for table in model.category_count_] == [(3, 4)]
