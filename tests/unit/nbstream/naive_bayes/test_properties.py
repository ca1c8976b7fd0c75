"""Laws of the statistics, checked on generated streams (hypothesis)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbstream

FAMILIES = [nbstream.BernoulliNB, nbstream.MultinomialNB, nbstream.ComplementNB,
            nbstream.GaussianNB, nbstream.CategoricalNB]


@st.composite
def streams(draw, min_rows=1, max_rows=40):
    n = draw(st.integers(min_rows, max_rows))
    values = draw(st.lists(st.integers(0, 4), min_size=n * 3, max_size=n * 3))
    labels = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=n, max_size=n))
    return np.array(values, dtype=np.uint8).reshape(n, 3), np.array(labels)


def cuts(n):
    return st.lists(st.integers(0, n), max_size=5).map(lambda c: sorted(set(c)))


def learn(model, X, y, boundaries=(), weights=None):
    edges = [0, *boundaries, len(y)]
    for start, stop in itertools.pairwise(edges):
        if stop > start:
            model.partial_fit(X[start:stop], y[start:stop],
                              sample_weight=None if weights is None else weights[start:stop])
    return model


def by_label(model) -> dict[str, np.ndarray]:
    """The statistics with classes in label order, so differently ordered models compare;
    categorical tables one per feature."""
    order = np.argsort(model.classes_)
    arrays = {"class_count": model.class_count_[order]}
    if isinstance(model, nbstream.CategoricalNB):
        arrays.update({f"category_count.{i}": table[order] for i, table in enumerate(model.category_count_)})
    else:
        arrays.update({name: array[order] for name, array in model._stats.arrays().items()})
    return arrays


def assert_same_statistics(a, b, rtol=1e-12):
    assert sorted(a.classes_.tolist()) == sorted(b.classes_.tolist())
    left, right = by_label(a), by_label(b)
    for name in left:
        np.testing.assert_allclose(left[name], right[name], rtol=rtol, atol=1e-12, err_msg=name)
    assert a.n_examples_seen_ == b.n_examples_seen_


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_any_chunking_gives_the_same_statistics(family, data):
    X, y = data.draw(streams())
    whole = learn(family(), X, y)
    chunked = learn(family(), X, y, data.draw(cuts(len(y))))
    assert chunked.classes_.tolist() == whole.classes_.tolist()  # first-appearance order
    assert_same_statistics(chunked, whole)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
@settings(max_examples=30, deadline=None)
@given(a=streams(), b=streams(), c=streams())
def test_merge_is_associative_commutative_and_equals_training_on_the_union(family, a, b, c):
    def part(stream):
        return learn(family(), *stream)

    union = learn(family(), np.concatenate([a[0], b[0], c[0]]), np.concatenate([a[1], b[1], c[1]]))
    left = part(a).merge(part(b)).merge(part(c))
    right = part(a).merge(part(b).merge(part(c)))
    swapped = part(c).merge(part(b)).merge(part(a))
    assert left.classes_.tolist() == union.classes_.tolist()
    assert_same_statistics(left, union)
    assert_same_statistics(right, union)
    assert_same_statistics(swapped, union)
    X = np.concatenate([a[0], c[0]])
    order = np.argsort(left.classes_)
    np.testing.assert_allclose(left.predict_log_proba(X)[:, order],
                               union.predict_log_proba(X)[:, np.argsort(union.classes_)], atol=1e-9)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
@settings(max_examples=30, deadline=None)
@given(stream=streams(), repeats=st.lists(st.integers(0, 3), min_size=40, max_size=40))
def test_integer_sample_weights_equal_repeated_rows(family, stream, repeats):
    X, y = stream
    counts = np.array(repeats[:len(y)])
    if counts.sum() == 0:
        counts[0] = 1
    weighted = family().partial_fit(X, y, sample_weight=counts)
    repeated = family().partial_fit(np.repeat(X, counts, axis=0), np.repeat(y, counts))
    left, right = by_label(weighted), by_label(repeated)
    kept = np.isin(np.sort(weighted.classes_), repeated.classes_)  # zero-weight classes drop out
    for name in right:
        mine = left[name][kept]
        width = right[name].shape[1] if mine.ndim == 2 else None
        if width is not None:  # codes seen only in zero-weight rows widen a table with zeros
            assert not mine[:, width:].any()
            mine = mine[:, :width]
        np.testing.assert_allclose(mine, right[name], rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
@settings(max_examples=30, deadline=None)
@given(data=st.data(), half_life=st.floats(0.5, 50))
def test_forgetting_does_not_depend_on_chunking(family, data, half_life):
    X, y = data.draw(streams())
    whole = learn(family(half_life=half_life), X, y)
    chunked = learn(family(half_life=half_life), X, y, data.draw(cuts(len(y))))
    assert_same_statistics(chunked, whole, rtol=1e-9)


def test_forgetting_halves_an_example_every_half_life_examples():
    model = nbstream.MultinomialNB(half_life=2)
    model.partial_fit([[4, 0]], ["old"])
    model.partial_fit([[0, 1], [0, 1]], ["new", "new"])  # two newer examples: one half-life
    np.testing.assert_allclose(model.feature_count_[0], [2.0, 0.0])
    np.testing.assert_allclose(model.class_count_, [0.5, 0.5 ** 0.5 + 1.0])
