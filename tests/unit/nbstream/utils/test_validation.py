"""Bad input gets an error that names what was expected and what came."""

from __future__ import annotations

import numpy as np
import pytest

import nbstream

ALL = [nbstream.BernoulliNB, nbstream.MultinomialNB, nbstream.ComplementNB,
       nbstream.GaussianNB, nbstream.CategoricalNB]


@pytest.mark.parametrize("family", ALL, ids=lambda f: f.__name__)
def test_wrong_feature_count(family):
    model = family().partial_fit(np.ones((2, 3)), [0, 1])
    with pytest.raises(ValueError, match="X has 4 features, but .* is expecting 3 features"):
        model.partial_fit(np.ones((2, 4)), [0, 1])
    with pytest.raises(ValueError, match="X has 2 features, but .* is expecting 3 features"):
        model.predict(np.ones((1, 2)))


@pytest.mark.parametrize("family", ALL, ids=lambda f: f.__name__)
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_and_infinity(family, bad):
    X = np.ones((3, 2))
    X[1, 1] = bad
    with pytest.raises(ValueError, match=r"NaN or infinity \(first at row 1, feature 1\)"):
        family().partial_fit(X, [0, 1, 0])


@pytest.mark.parametrize("family", [nbstream.MultinomialNB, nbstream.ComplementNB, nbstream.CategoricalNB],
                         ids=lambda f: f.__name__)
def test_negative_values_for_count_models(family):
    with pytest.raises(ValueError, match="Negative values in data"):
        family().partial_fit(np.array([[1, -2]]), [0])


@pytest.mark.parametrize("family", ALL, ids=lambda f: f.__name__)
def test_predict_before_fit(family):
    with pytest.raises(nbstream.NotFittedError, match="is not fitted yet"):
        family().predict(np.ones((1, 2)))
    with pytest.raises(AttributeError):
        _ = family().classes_


@pytest.mark.parametrize("family", ALL, ids=lambda f: f.__name__)
def test_labels_and_rows_disagree(family):
    with pytest.raises(ValueError, match="X has 3 rows but y has 2 labels"):
        family().partial_fit(np.ones((3, 2)), [0, 1])


@pytest.mark.parametrize("family", ALL, ids=lambda f: f.__name__)
def test_one_dimensional_X_and_text_dtype(family):
    with pytest.raises(ValueError, match=r"2-D array.*shape \(3,\)"):
        family().partial_fit(np.ones(3), [0, 1, 2])
    with pytest.raises(TypeError, match="numeric features"):
        family().partial_fit(np.array([["a", "b"]]), [0])


@pytest.mark.parametrize("make, message", [
    (lambda: nbstream.MultinomialNB(alpha=-1), "alpha must be a finite number >= 0"),
    (lambda: nbstream.MultinomialNB(alpha=[1.0, 2.0, 3.0]), r"one value per feature \(2\); got shape \(3,\)"),
    (lambda: nbstream.MultinomialNB(class_prior=[0.5, 0.2]), "sum to 1"),
    (lambda: nbstream.MultinomialNB(half_life=0), "half_life must be None or a finite number > 0"),
    (lambda: nbstream.GaussianNB(var_smoothing=-1), "var_smoothing must be a finite number >= 0"),
    (lambda: nbstream.GaussianNB(priors=[0.7, 0.7]), "priors must be None or non-negative numbers that sum to 1"),
    (lambda: nbstream.CategoricalNB(alpha=[1.0, 1.0]), r"alpha must be a finite number >= 0 \(one value, not an"),
    (lambda: nbstream.CategoricalNB(min_categories=0),
     "min_categories must be None or an integer >= 1 and <= 16777216, or one per"),
])
def test_invalid_parameters(make, message):
    with pytest.raises(ValueError, match=message):
        make().fit(np.array([[1, 2], [2, 1]]), [0, 1]).predict_proba([[1, 1]])


def test_class_prior_length_must_match_the_classes():
    with pytest.raises(ValueError, match=r"class_prior has 2 entries for 3 classes"):
        nbstream.BernoulliNB(class_prior=[0.5, 0.5]).fit([[1], [0], [1]], ["a", "b", "c"])


def test_class_prior_length_of_an_open_class_set_is_checked_when_the_tables_refresh():
    model = nbstream.BernoulliNB(class_prior=[0.5, 0.5]).partial_fit([[1], [0], [1]], ["a", "b", "c"])
    with pytest.raises(ValueError, match=r"class_prior has 2 entries but the model has 3 classes"):
        model.predict([[1]])


def test_categorical_needs_integer_codes():
    with pytest.raises(ValueError, match="integer category codes"):
        nbstream.CategoricalNB().partial_fit(np.array([[0.5, 1.0]]), [0])


def test_missing_labels():
    with pytest.raises(ValueError, match="y contains None"):
        nbstream.MultinomialNB().partial_fit([[1], [2]], ["a", None])
    with pytest.raises(ValueError, match="y contains NaN"):
        nbstream.MultinomialNB().partial_fit([[1], [2]], [1.0, np.nan])


def test_bad_sample_weight():
    with pytest.raises(ValueError, match=r"sample_weight must have shape \(2,\); got \(3,\)"):
        nbstream.MultinomialNB().partial_fit([[1], [2]], [0, 1], sample_weight=[1, 1, 1])
    with pytest.raises(ValueError, match="finite and non-negative"):
        nbstream.MultinomialNB().partial_fit([[1], [2]], [0, 1], sample_weight=[1, -1])


def test_merge_refuses_other_kinds_parameters_and_feature_counts():
    base = nbstream.MultinomialNB().fit([[1, 2]], [0])
    with pytest.raises(TypeError, match="cannot merge a BernoulliNB into a MultinomialNB"):
        base.merge(nbstream.BernoulliNB().fit([[1, 2]], [0]))
    with pytest.raises(ValueError, match=r"parameters differ: \['alpha'\]"):
        base.merge(nbstream.MultinomialNB(alpha=0.5).fit([[1, 2]], [0]))
    with pytest.raises(ValueError, match="this model has 2 features, the other 3"):
        base.merge(nbstream.MultinomialNB().fit([[1, 2, 3]], [0]))


def test_tiny_alpha_is_floored_with_a_warning_unless_forced():
    X, y = np.array([[1, 0], [0, 1]]), [0, 1]
    with pytest.warns(UserWarning, match="alpha too small"):
        floored = nbstream.MultinomialNB(alpha=0.0, force_alpha=False).fit(X, y).feature_log_prob_
    assert np.isfinite(floored).all()
    with np.errstate(divide="ignore"):
        forced = nbstream.MultinomialNB(alpha=0.0, force_alpha=True).fit(X, y).feature_log_prob_
    assert np.isneginf(forced).any()


@pytest.mark.parametrize("model", [
    lambda: nbstream.MultinomialNB(alpha=float("inf")), lambda: nbstream.MultinomialNB(alpha=float("nan")),
    lambda: nbstream.BernoulliNB(binarize=float("nan")), lambda: nbstream.BernoulliNB(binarize=float("inf")),
    lambda: nbstream.GaussianNB(var_smoothing=float("inf")), lambda: nbstream.ComplementNB(half_life=float("inf")),
    lambda: nbstream.CategoricalNB(alpha=1e309),
], ids=["alpha inf", "alpha nan", "binarize nan", "binarize inf", "var_smoothing inf", "half_life inf",
        "categorical alpha 1e309"])
def test_non_finite_parameters_are_refused_before_learning(model):
    with pytest.raises(ValueError, match="finite"):
        model().check_params()
    with pytest.raises(ValueError, match="finite"):
        model().partial_fit([[1, 2]], [0])


@pytest.mark.parametrize("family", [nbstream.MultinomialNB, nbstream.GaussianNB, nbstream.ComplementNB])
def test_values_whose_statistics_would_overflow_are_refused_and_the_model_is_unchanged(family):
    model = family().partial_fit([[1.0, 2.0], [3.0, 1.0]], [0, 1])
    before = model.predict_proba([[1.0, 1.0]])
    with pytest.raises(ValueError, match="beyond"):
        model.partial_fit([[1e308, 1.0]], [0])
    np.testing.assert_array_equal(model.predict_proba([[1.0, 1.0]]), before)
    assert np.isfinite(before).all()


def test_recoding_needs_one_array_of_distinct_codes_per_feature():
    model = nbstream.CategoricalNB().fit([[0, 1], [1, 0]], [0, 1])
    with pytest.raises(ValueError, match="1 arrays of new codes for 2 features"):
        model.recode_categories([np.array([1, 0])])  # would have dropped the second feature's counts
    for codes in ([1, 1], [0, -1]):
        with pytest.raises(ValueError, match="distinct non-negative integers"):
            model.recode_categories([np.array(codes), np.array([0, 1])])
    assert [table.shape for table in model.category_count_] == [(2, 2), (2, 2)]
    model.recode_categories([np.array([1, 0]), np.array([0, 1])])
    assert model.category_count_[0].tolist() == [[0.0, 1.0], [1.0, 0.0]]


def test_complex_sample_weights_are_refused_not_cut_to_their_real_part():
    with pytest.raises(ValueError, match="Complex data not supported"):
        nbstream.MultinomialNB().fit([[1], [2]], [0, 1], sample_weight=np.array([1 + 1j, 1.0]))
    with pytest.raises(ValueError, match="Complex data not supported"):
        nbstream.MultinomialNB().fit([[1], [2]], [0, 1], sample_weight=2j)
