"""scikit-learn's own estimator checks, and the drop-in behaviours they do not cover."""

import warnings

import numpy as np
import pytest
import sklearn
import sklearn.exceptions
from sklearn import naive_bayes as reference
from sklearn.datasets import load_digits
from sklearn.model_selection import cross_val_score
from sklearn.utils.estimator_checks import parametrize_with_checks

import nbstream

ALL = [nbstream.BernoulliNB, nbstream.MultinomialNB, nbstream.ComplementNB, nbstream.GaussianNB,
       nbstream.CategoricalNB]

# The deliberate deviations from scikit-learn, each with the reason docs/library.md gives for it in
# "Deviations from scikit-learn"; the tests of this module show them against scikit-learn.
FRACTIONAL_CODES = ("CategoricalNB refuses fractional category codes; scikit-learn truncates them "
                    "silently (0.7 becomes category 0). The check feeds uniform floats.")
DEVIATIONS = {
    "CategoricalNB: a category code unseen in training": "one new category should not stop a stream",
    "CategoricalNB: fractional codes": FRACTIONAL_CODES,
    "BernoulliNB: per-feature alpha": "each feature smoothed with its own alpha",
    "GaussianNB: var_smoothing times the variance of all data seen, not of the latest batch":
        "any chunking gives the model of one `fit`",
    "GaussianNB: var_smoothing times the weighted variance":
        "the smoothing follows the distribution the weights describe",
    "GaussianNB: no feature has varied yet": "smooths relative to a unit scale",
    "partial_fit without classes on the first call": "streams meet new labels",
    "the smoothed tables are computed when read after a change": "a stream learns far more often than it is read",
    "a refused fit": "A `fit` that is refused leaves the model it would have replaced as it was.",
    "GaussianNB: scores of float16 or float32 input are float64":
        "scores are computed from the float64 statistics: a float32 stream loses no digits to them",
    "GaussianNB: long double input": "its attributes are float64, as its statistics: long double differs from "
                                     "platform to platform",
    "a classes argument listing a class twice, for every model and every partial_fit":
        "a class listed twice is a mistake in the list, whichever the model and the call",
    "a class_prior that does not sum to 1":
        "a prior is a probability distribution (scikit-learn refuses such GaussianNB priors too)",
    "smoothing that overflows float64 is a ValueError, not NaN probabilities":
        "NaN probabilities would pass unnoticed downstream",
}
# scikit-learn's estimator checks that fail for one of the deviations above.
ESTIMATOR_CHECK_DEVIATIONS = {
    "CategoricalNB": {"check_sample_weight_equivalence_on_dense_data": FRACTIONAL_CODES,
                      "check_classifiers_one_label_sample_weights": FRACTIONAL_CODES},
}


def _expected_failures(estimator) -> dict[str, str]:
    return ESTIMATOR_CHECK_DEVIATIONS.get(type(estimator).__name__, {})


with warnings.catch_warnings():  # the models speak the protocol without inheriting from BaseEstimator
    warnings.filterwarnings("ignore", message="Estimator .* does not inherit from")
    _ESTIMATOR_CHECKS = parametrize_with_checks([family() for family in ALL],
                                                expected_failed_checks=_expected_failures)


@_ESTIMATOR_CHECKS
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


def test_documented_deviations_are_in_the_library_docs():
    from pathlib import Path
    page = " ".join((Path(__file__).resolve().parents[4] / "docs" / "library.md").read_text().split())
    reasons = [*DEVIATIONS.values(), *(r for checks in ESTIMATOR_CHECK_DEVIATIONS.values() for r in checks.values())]
    assert [reason for reason in reasons if " ".join(reason.split()) not in page] == []


# ---- GaussianNB scores exactly --------------------------------------------------------------

def test_gaussian_near_constant_classes_match_scikit_learn():
    """Two classes exactly 1.0 beside a large class near 0: a tiny variance magnifies any
    cancellation in the score by about 1e9."""
    rng = np.random.default_rng(0)
    n_features = 200
    X = np.vstack([np.ones((20, n_features)), np.ones((20, n_features)),
                   rng.normal(0, 1e-3, (100_000, n_features))])
    y = np.repeat([0, 1, 2], [20, 20, 100_000])
    ours, theirs = nbstream.GaussianNB().fit(X, y), reference.GaussianNB().fit(X, y)
    probe = np.vstack([X[:40], X[-40:]])
    np.testing.assert_allclose(ours.predict_proba(probe), theirs.predict_proba(probe), rtol=0, atol=1e-9)
    assert (ours.predict(probe) == theirs.predict(probe)).all()


def test_gaussian_digits_log_probabilities_match_scikit_learn():
    X, y = load_digits(return_X_y=True)
    ours, theirs = nbstream.GaussianNB().fit(X, y), reference.GaussianNB().fit(X, y)
    mine, expected = ours.predict_log_proba(X), theirs.predict_log_proba(X)
    meaningful = expected > -700  # below, exp underflows and both are rounding noise
    assert meaningful.sum() > 2 * len(X)
    np.testing.assert_allclose(mine[meaningful], expected[meaningful], rtol=0, atol=1e-9)
    assert (ours.predict(X) == theirs.predict(X)).all()


def test_gaussian_far_from_the_origin_still_matches():
    rng = np.random.default_rng(1)
    X = 1e6 + rng.normal(size=(300, 5))
    y = rng.integers(0, 3, 300)
    ours, theirs = nbstream.GaussianNB().fit(X, y), reference.GaussianNB().fit(X, y)
    np.testing.assert_allclose(ours.predict_log_proba(X), theirs.predict_log_proba(X), rtol=0, atol=1e-7)


def test_gaussian_smoothing_uses_the_weighted_variance():
    """A documented deviation: epsilon_ follows the data as weighted."""
    rng = np.random.default_rng(2)
    X, y = rng.normal(size=(50, 3)), rng.integers(0, 2, 50)
    weights = rng.uniform(0.1, 3.0, 50)
    model = nbstream.GaussianNB(var_smoothing=0.1).fit(X, y, sample_weight=weights)
    weighted_mean = weights @ X / weights.sum()
    weighted_variance = weights @ (X - weighted_mean) ** 2 / weights.sum()
    assert model.epsilon_ == pytest.approx(0.1 * weighted_variance.max(), rel=1e-12)
    unweighted = nbstream.GaussianNB(var_smoothing=0.1).fit(X, y)
    assert unweighted.epsilon_ == pytest.approx(0.1 * X.var(axis=0).max(), rel=1e-12)


# ---- errors and refusals ----------------------------------------------------------------------

@pytest.mark.parametrize("family", ALL, ids=lambda f: f.__name__)
def test_not_fitted_error_is_scikit_learns(family):
    with pytest.raises(sklearn.exceptions.NotFittedError):
        family().predict([[1, 0]])
    with pytest.raises(nbstream.NotFittedError) as raised:
        family().predict_proba([[1, 0]])
    import pickle  # joblib carries errors from its workers this way
    again = pickle.loads(pickle.dumps(raised.value))
    assert isinstance(again, sklearn.exceptions.NotFittedError) and str(again) == str(raised.value)


def test_negative_binarize_threshold_is_refused():
    with pytest.raises(ValueError, match="binarize must be None or a finite number >= 0"):
        nbstream.BernoulliNB(binarize=-0.5).fit([[0, 1], [1, 0]], [0, 1])


@pytest.mark.parametrize("make, message", [
    (lambda: nbstream.MultinomialNB(class_prior=[1.0]), "Number of priors must match number of classes"),
    (lambda: nbstream.GaussianNB(priors=[0.2, 0.3, 0.5]), "Number of priors must match number of classes"),
    (lambda: nbstream.MultinomialNB(alpha=[1.0, 1.0, 1.0]), "one value per feature"),
    (lambda: nbstream.BernoulliNB(alpha=[1.0, -1.0]), "alpha must be finite and >= 0"),
    (lambda: nbstream.CategoricalNB(min_categories=[2, 2, 2]), "min_categories"),
])
def test_parameters_that_do_not_fit_the_data_fail_in_fit(make, message):
    with pytest.raises(ValueError, match=message):
        make().fit([[1, 0], [0, 1]], [0, 1])


@pytest.mark.parametrize("family", ALL, ids=lambda f: f.__name__)
def test_a_refused_fit_keeps_the_fitted_model(family):
    model = family().fit([[1, 0], [0, 1], [1, 1]], [0, 1, 1])
    before = model.predict_proba([[1, 0]])
    for X, y in [([[1, 0], [0, 1]], [0.5, 1.5]), ([[1, np.nan]], [0]), ([[1, 0, 1]], None)]:
        with pytest.raises(ValueError):
            model.fit(X, y)
        np.testing.assert_array_equal(model.predict_proba([[1, 0]]), before)
    assert model.n_features_in_ == 2


@pytest.mark.parametrize("family", ALL, ids=lambda f: f.__name__)
@pytest.mark.parametrize("X, y, weights, message", [
    ([[1, 0], [0, 1]], [0, 1], [0.0, 0.0], "at least one non-zero"),
    (np.zeros((0, 2)), [], None, "0 sample"),
    (np.zeros((3, 0)), [0, 1, 0], None, "0 feature"),
    ([[1, 0], [0, 1]], [0.5, 1.5], None, "Unknown label type: continuous"),
    ([[1, 0], [0, 1]], [0.0, np.inf], None, "Input y contains infinity"),
    ([[1, 0], [0, 1]], [0.0, np.nan], None, "Input y contains NaN"),
    ([[1, 0], [0, 1]], None, None, "requires y to be passed"),
])
def test_inputs_with_nothing_to_learn_are_refused(family, X, y, weights, message):
    with pytest.raises(ValueError, match=message):
        family().fit(X, y, sample_weight=weights)
    with pytest.raises(ValueError, match=message):
        family().partial_fit(X, y, sample_weight=weights)


def test_a_column_vector_y_is_flattened_with_a_warning():
    with pytest.warns(sklearn.exceptions.DataConversionWarning):
        model = nbstream.BernoulliNB().fit([[1, 0], [0, 1]], [[0], [1]])
    assert model.classes_.tolist() == [0, 1]


@pytest.mark.parametrize("family", ALL, ids=lambda f: f.__name__)
def test_object_arrays_of_numbers_are_numbers(family):
    X = np.array([[1, 0], [0, 2], [1, 1]])
    y = [0, 1, 1]
    np.testing.assert_array_equal(family().fit(X.astype(object), y).predict_proba(X),
                                  family().fit(X, y).predict_proba(X))
    with pytest.raises(TypeError, match="numeric features"):
        family().fit(np.array([[1, {"a": 1}]], dtype=object), [0])


def test_integral_float_category_codes_match_scikit_learn():
    X = np.array([[0.0, 2.0], [1.0, 0.0], [2.0, 1.0], [1.0, 2.0]])
    y = [0, 1, 1, 0]
    ours, theirs = nbstream.CategoricalNB().fit(X, y), reference.CategoricalNB().fit(X, y)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), rtol=1e-12)


def test_a_later_classes_argument_may_list_an_open_set_in_any_order():
    model = nbstream.MultinomialNB().partial_fit([[1, 0], [0, 1]], ["spam", "ham"])
    model.partial_fit([[1, 1]], ["ham"], classes=["ham", "spam"])
    assert sorted(model.classes_.tolist()) == ["ham", "spam"]
    with pytest.raises(ValueError, match="differs"):
        model.partial_fit([[1, 1]], ["ham"], classes=["ham", "spam", "eggs"])


# ---- data frames and metadata routing ----------------------------------------------------------

@pytest.mark.parametrize("family", ALL, ids=lambda f: f.__name__)
def test_feature_names_are_remembered_and_enforced(family, tmp_path):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": [1, 0, 1, 2], "b": [0, 1, 1, 0]})
    model = family().fit(frame, [0, 1, 1, 0])
    assert model.feature_names_in_.tolist() == ["a", "b"]
    with pytest.raises(ValueError, match="feature names should match"):
        model.predict(frame[["b", "a"]])
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        model.predict(frame.to_numpy())
    restored = nbstream.load(nbstream.save(model, tmp_path / "m.nbs"))
    assert restored.feature_names_in_.tolist() == ["a", "b"]
    assert not hasattr(family().fit(frame.to_numpy(), [0, 1, 1, 0]), "feature_names_in_")


@pytest.mark.parametrize("family", ALL, ids=lambda f: f.__name__)
def test_nullable_integer_frames_are_accepted(family):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": pd.array([1, 0, 1], dtype="Int64"), "b": pd.array([0, 1, 1], dtype="Int64")})
    expected = family().fit(frame.to_numpy(dtype=np.int64), [0, 1, 1]).predict_proba([[1, 0]])
    np.testing.assert_allclose(family().fit(frame, [0, 1, 1]).predict_proba(
        pd.DataFrame({"a": [1], "b": [0]})), expected)
    with pytest.raises(ValueError, match="NaN"):
        family().fit(pd.DataFrame({"a": pd.array([1, None], dtype="Int64")}), [0, 1])


def test_sample_weight_is_routed_by_meta_estimators():
    X, y = load_digits(return_X_y=True)
    weights = np.where(y == 3, 5.0, 1.0)
    with sklearn.config_context(enable_metadata_routing=True):
        model = nbstream.MultinomialNB().set_fit_request(sample_weight=True).set_score_request(sample_weight=False)
        routed = cross_val_score(model, X, y, cv=3, params={"sample_weight": weights})
        expected = cross_val_score(reference.MultinomialNB().set_fit_request(sample_weight=True)
                                   .set_score_request(sample_weight=False), X, y, cv=3,
                                   params={"sample_weight": weights})
        unweighted = cross_val_score(nbstream.MultinomialNB(), X, y, cv=3)
        with pytest.raises(Exception, match="sample_weight"):  # passed but not requested
            cross_val_score(nbstream.MultinomialNB(), X, y, cv=3, params={"sample_weight": weights})
    np.testing.assert_allclose(routed, expected)
    assert not np.allclose(routed, unweighted)


def test_importing_nbstream_does_not_import_scikit_learn():
    import subprocess
    import sys
    code = "import sys, nbstream; print('sklearn' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"


def test_predicting_leaves_the_estimator_state_unchanged():
    model = nbstream.GaussianNB().fit([[0.0], [1.0], [5.0]], [0, 0, 1])
    before = dict(vars(model))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.predict_proba([[0.5]])
    assert vars(model) == before


# ---- what scikit-learn's own test_naive_bayes.py asks, where nbstream used to differ ------------

DISCRETE = [nbstream.BernoulliNB, nbstream.MultinomialNB, nbstream.ComplementNB, nbstream.CategoricalNB]


@pytest.mark.parametrize("family", DISCRETE, ids=lambda f: f.__name__)
def test_a_class_listed_twice_is_refused_as_scikit_learn_refuses_it(family):
    X, y = np.array([[0, 1], [1, 0]]), [0, 1]
    with pytest.raises(ValueError) as theirs:
        getattr(reference, family.__name__)().partial_fit(X, y, classes=[0, 1, 1])
    with pytest.raises(type(theirs.value), match=r"classes must list each class once; got \[0, 1, 1\]"):
        family().partial_fit(X, y, classes=[0, 1, 1])


@pytest.mark.parametrize("family", ALL, ids=lambda f: f.__name__)
def test_a_class_listed_twice_is_refused_by_every_model_and_every_call(family):
    """A deviation: scikit-learn's GaussianNB and its later partial_fit calls accept the repeat."""
    X, y = np.array([[0, 1], [1, 0]]), [0, 1]
    model = family().partial_fit(X, y, classes=[0, 1])
    with pytest.raises(ValueError, match="each class once"):
        model.partial_fit(X, y, classes=[1, 0, 0])
    with pytest.raises(ValueError, match="each class once"):
        family().partial_fit(X, y, classes=np.array([1, 1]))
    assert model.class_count_.tolist() == [1.0, 1.0]  # the refused calls learned nothing


FITTED_ATTRIBUTES = ["class_count_", "class_log_prior_", "feature_count_", "feature_log_prob_", "feature_all_",
                     "category_count_", "n_categories_", "theta_", "var_", "class_prior_", "epsilon_"]


def _fitted_dtypes(model) -> dict[str, np.dtype]:
    dtypes = {}
    for name in FITTED_ATTRIBUTES:
        if hasattr(model, name):
            value = getattr(model, name)
            dtypes[name] = (value[0] if isinstance(value, list) else np.asarray(value)).dtype
    return dtypes


@pytest.mark.parametrize("family", ALL, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int64, np.uint8, np.bool_],
                         ids=lambda d: np.dtype(d).name)
def test_fitted_attributes_have_scikit_learn_s_dtypes(family, dtype, rng):
    X = rng.integers(0, 4, size=(40, 3)).astype(dtype)
    y = rng.integers(0, 2, 40)
    theirs = getattr(reference, family.__name__)().fit(X, y)
    mine, streamed = family().fit(X, y), family().partial_fit(X[:20], y[:20]).partial_fit(X[20:], y[20:])
    assert _fitted_dtypes(mine) == _fitted_dtypes(theirs) == _fitted_dtypes(streamed)
    assert isinstance(mine.epsilon_, type(theirs.epsilon_)) if family is nbstream.GaussianNB else True
    for name in ("theta_", "var_", "class_prior_", "feature_log_prob_", "class_log_prior_"):
        if hasattr(theirs, name) and not isinstance(getattr(theirs, name), list):
            np.testing.assert_allclose(getattr(mine, name), getattr(theirs, name), rtol=5e-3 if dtype == np.float16
                                       else 1e-6, err_msg=name)


def test_a_gaussian_keeps_the_dtype_of_its_first_batch_as_scikit_learn_does(rng):
    X, y = rng.normal(size=(40, 3)), rng.integers(0, 2, 40)
    ours = nbstream.GaussianNB().partial_fit(X[:20].astype(np.float32), y[:20]).partial_fit(X[20:], y[20:])
    theirs = reference.GaussianNB().partial_fit(X[:20].astype(np.float32), y[:20], classes=[0, 1]).partial_fit(
        X[20:], y[20:])
    assert ours.theta_.dtype == theirs.theta_.dtype == ours.var_.dtype == theirs.var_.dtype == np.float32
    assert ours.predict_proba(X).dtype == np.float64  # a deviation: scores from float64 statistics
    assert nbstream.GaussianNB().fit(X.astype(np.longdouble), y).theta_.dtype == np.float64  # a deviation too


def _alpha_warnings(call) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [w for w in caught if "alpha too small" in str(w.message)]


@pytest.mark.parametrize("family", DISCRETE, ids=lambda f: f.__name__)
def test_the_alpha_warning_comes_from_fit_and_partial_fit_as_in_scikit_learn(family):
    X, y = np.array([[1, 0], [1, 1]]), np.array([0, 1])
    model = family(alpha=0.0, force_alpha=False)
    theirs = getattr(reference, family.__name__)(alpha=0.0, force_alpha=False)
    calls = [(lambda: model.fit(X, y), lambda: theirs.fit(X, y)),
             (lambda: model.partial_fit(X, y), lambda: theirs.partial_fit(X, y, classes=[0, 1]))]
    for learn, learn_theirs in calls:
        mine, expected = _alpha_warnings(learn), _alpha_warnings(learn_theirs)
        assert [(w.category, str(w.message)) for w in mine] == [(w.category, str(w.message)) for w in expected]
        assert [w.filename for w in mine] == [__file__]  # the caller's line, not the library's
    assert _alpha_warnings(lambda: (model.predict_proba(X), model.feature_log_prob_)) == []
    np.testing.assert_allclose(model.predict_proba(X), theirs.predict_proba(X))


def test_a_refused_input_does_not_warn_about_alpha():
    model = nbstream.MultinomialNB(alpha=0.0, force_alpha=False)
    with pytest.raises(ValueError):
        assert _alpha_warnings(lambda: model.fit([[1, -1]], [0])) == []


def test_a_class_prior_that_is_not_a_distribution_is_refused():
    """A deviation: scikit-learn's discrete models accept it (and a negative one gives NaN)."""
    X, y = np.array([[1, 0], [0, 1], [1, 1]]), [0, 1, 1]
    assert np.isnan(reference.MultinomialNB(class_prior=[2.0, -1.0]).fit(X, y).predict_proba(X)).all()
    for prior in ([0.5, 0.2], [2.0, -1.0]):
        with pytest.raises(ValueError, match="class_prior must be None or non-negative numbers that sum to 1, one per"):
            nbstream.MultinomialNB(class_prior=prior).fit(X, y)


def test_smoothing_that_overflows_is_an_error_not_nan():
    X, y = np.array([[1, 0], [0, 1], [1, 1]]), [0, 1, 1]
    assert np.isnan(reference.MultinomialNB(alpha=1e308).fit(X, y).predict_proba(X)).all()
    with pytest.raises(ValueError, match="overflow float64"):
        nbstream.MultinomialNB(alpha=1e308).fit(X, y).predict_proba(X)


def test_float32_input_gives_no_overflow_warning_from_the_input_checks():
    X = np.array([[1.0, 2.0], [3.0, 5.0]], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nbstream.GaussianNB().fit(X, [0, 1]).predict_proba(X)


@pytest.mark.parametrize("family", [nbstream.MultinomialNB, nbstream.ComplementNB, nbstream.CategoricalNB],
                         ids=lambda f: f.__name__)
def test_negative_counts_are_refused_in_scikit_learn_s_words(family):
    message = rf"Negative values in data passed to {family.__name__} \(input X\)"
    with pytest.raises(ValueError, match=message):
        getattr(reference, family.__name__)().fit([[1, -1]], [0])
    with pytest.raises(ValueError, match=message):
        family().fit([[1, -1]], [0])


def test_min_categories_of_the_wrong_shape_are_refused_in_scikit_learn_s_words():
    X, y, minimum = np.array([[0, 1], [1, 0]]), [0, 1], np.array([[3, 2], [2, 4]])
    with pytest.raises(ValueError, match="'min_categories' should have shape"):
        reference.CategoricalNB(min_categories=minimum).fit(X, y)
    with pytest.raises(ValueError, match=r"'min_categories' should have shape \(2,\)"):
        nbstream.CategoricalNB(min_categories=minimum).fit(X, y)
