"""Fixed and open class sets."""

from __future__ import annotations

import pytest

import nbstream


def test_fixed_classes_are_sorted_and_unknown_labels_are_refused():
    model = nbstream.MultinomialNB().partial_fit([[1, 0]], ["b"], classes=["c", "a", "b"])
    assert model.classes_.tolist() == ["a", "b", "c"]
    assert model.class_count_.tolist() == [0.0, 1.0, 0.0]
    with pytest.raises(ValueError, match=r"\['z'\] not among the classes \['a', 'b', 'c'\]"):
        model.partial_fit([[1, 1]], ["z"])
    assert model.n_examples_seen_ == 1  # the refused batch left no trace


def test_open_classes_grow_by_first_appearance_without_reordering():
    model = nbstream.BernoulliNB()
    model.partial_fit([[1, 0], [0, 1]], [7, 3])
    first_columns = model.predict_proba([[1, 0]])
    model.partial_fit([[1, 1], [0, 0]], [5, 3])
    assert model.classes_.tolist() == [7, 3, 5]
    assert model.class_count_.tolist() == [1.0, 2.0, 1.0]
    assert model.feature_count_.tolist() == [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    assert model.predict_proba([[1, 0]]).shape == (1, 3)
    assert first_columns.shape == (1, 2)


def test_a_class_appearing_mid_stream_is_predicted():
    model = nbstream.MultinomialNB()
    model.partial_fit([[5, 0, 0], [4, 1, 0]], ["sport", "sport"])
    assert model.predict([[0, 0, 5]]).tolist() == ["sport"]
    model.partial_fit([[0, 0, 6], [0, 1, 5]], ["weather", "weather"])
    assert model.predict([[0, 0, 5], [5, 0, 0]]).tolist() == ["weather", "sport"]


def test_classes_given_again_must_match():
    model = nbstream.GaussianNB().partial_fit([[0.0]], [1], classes=[1, 2])
    model.partial_fit([[1.0]], [2], classes=[2, 1])  # same set, any order
    with pytest.raises(ValueError, match="differs from the classes"):
        model.partial_fit([[1.0]], [2], classes=[1, 2, 3])


def test_merge_refuses_classes_outside_a_fixed_set():
    fixed = nbstream.MultinomialNB().partial_fit([[1]], ["a"], classes=["a", "b"])
    other = nbstream.MultinomialNB().partial_fit([[1]], ["c"])
    with pytest.raises(ValueError, match=r"\['c'\] not among the fixed classes"):
        fixed.merge(other)


def test_merge_appends_the_other_models_new_classes():
    mine = nbstream.MultinomialNB().partial_fit([[1, 0]], ["x"])
    theirs = nbstream.MultinomialNB().partial_fit([[0, 2], [3, 0]], ["y", "x"])
    mine.merge(theirs)
    assert mine.classes_.tolist() == ["x", "y"]
    assert mine.feature_count_.tolist() == [[4.0, 0.0], [0.0, 2.0]]
    assert mine.n_examples_seen_ == 3


def test_labels_mixing_numbers_and_strings_are_refused():
    model = nbstream.MultinomialNB().partial_fit([[1]], [1])
    with pytest.raises(TypeError, match="mix numbers and strings"):
        model.partial_fit([[1]], ["one"])
