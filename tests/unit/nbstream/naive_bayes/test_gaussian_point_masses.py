"""GaussianNB with var_smoothing=0: a variance of 0 is a point mass (the limit as var_smoothing tends
to 0), never NaN; scikit-learn's numbers wherever its own are finite; snapshots and ONNX follow."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.naive_bayes import GaussianNB as SklearnGaussianNB

import nbstream
from nbstream.interop.sklearn import to_sklearn


@pytest.fixture
def constant_column(rng):
    """Rows of three varying features and a fourth always 5, three classes; rows to score whose
    fourth feature is 5 or not."""
    X = rng.normal(size=(90, 3)) + np.repeat(np.arange(3), 30)[:, None]
    y = np.repeat(["a", "b", "c"], 30)
    scored = rng.normal(size=(20, 3)) * 2
    with_constant = np.hstack([X, np.full((90, 1), 5.0)])
    scored_with_constant = np.hstack([scored, np.where(np.arange(20) % 2, 5.0, -3.0)[:, None]])
    return X, y, scored, with_constant, scored_with_constant


def test_a_constant_feature_leaves_the_predictions_of_the_other_features(constant_column):
    X, y, scored, with_constant, scored_with_constant = constant_column
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning either
        model = nbstream.GaussianNB(var_smoothing=0).fit(with_constant, y)
        proba = model.predict_proba(scored_with_constant)

    assert model.var_[:, 3].tolist() == [0.0, 0.0, 0.0]  # var_ is scikit-learn's
    reference = SklearnGaussianNB(var_smoothing=0).fit(X, y)  # finite: every variance is positive
    np.testing.assert_allclose(proba, reference.predict_proba(scored), rtol=0, atol=1e-12)
    assert model.predict(scored_with_constant).tolist() == reference.predict(scored).tolist()


def test_without_a_variance_of_0_it_is_scikit_learn_s_model(constant_column):
    X, y, scored, _, _ = constant_column
    model = nbstream.GaussianNB(var_smoothing=0).fit(X, y)
    reference = SklearnGaussianNB(var_smoothing=0).fit(X, y)
    np.testing.assert_allclose(model.predict_joint_log_proba(scored), reference.predict_joint_log_proba(scored),
                               rtol=1e-12)


def test_point_masses_are_the_limit_of_a_vanishing_smoothing():
    # Feature 1 is constant within class 0 (at 0) and class 2 is one example: point masses.
    X = np.array([[1.0, 0.0], [2.0, 0.0], [3.0, 1.0], [4.0, 3.0], [9.0, 7.0]])
    y = [0, 0, 1, 1, 2]
    scored = np.array([[1.5, 0.0], [1.5, 0.5], [9.0, 7.0], [3.5, 2.0], [1.5, 1e-3]])
    limit = nbstream.GaussianNB(var_smoothing=0).fit(X, y).predict_proba(scored)

    assert np.isfinite(limit).all()
    assert limit.round(12).tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 1, 0], [0, 1, 0]]
    nearly = nbstream.GaussianNB(var_smoothing=1e-13).fit(X, y).predict_proba(scored)
    np.testing.assert_allclose(nearly, limit, atol=1e-6)


def test_test_then_train_scores_point_masses_as_predict_does(rng):
    X = np.hstack([rng.normal(size=(40, 2)), np.full((40, 1), 2.0)])
    y = rng.choice([0, 1], size=40)
    streamed = nbstream.GaussianNB(var_smoothing=0).predict_proba_then_learn(X, y, classes=[0, 1])

    one_by_one = nbstream.GaussianNB(var_smoothing=0).partial_fit(X[:1], y[:1], classes=[0, 1])
    for i in range(1, 40):
        np.testing.assert_allclose(streamed.proba[i], one_by_one.predict_proba(X[i:i + 1])[0], atol=1e-9)
        one_by_one.partial_fit(X[i:i + 1], y[i:i + 1])
    assert np.isfinite(streamed.proba[1:]).all()


def test_a_snapshot_of_point_masses_loads_and_predicts_the_same(tmp_path, constant_column):
    _, y, _, with_constant, scored_with_constant = constant_column
    model = nbstream.GaussianNB(var_smoothing=0).fit(with_constant, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        path = nbstream.save(model, tmp_path / "model.nbs")
        loaded = nbstream.load(path)

    np.testing.assert_array_equal(loaded.predict_proba(scored_with_constant), model.predict_proba(scored_with_constant))


def test_onnx_scores_point_masses_as_the_model_does(constant_column):
    onnxruntime = pytest.importorskip("onnxruntime")
    from nbstream.onnx import to_onnx

    _, y, _, with_constant, scored_with_constant = constant_column
    with_constant[:30, 0] = 1.0  # class a: a point mass of its own
    scored_with_constant[:5, 0] = 1.0
    model = nbstream.GaussianNB(var_smoothing=0).fit(with_constant, y)
    session = onnxruntime.InferenceSession(to_onnx(model).SerializeToString(), providers=["CPUExecutionProvider"])
    labels, proba = session.run(None, {"X": scored_with_constant})

    np.testing.assert_allclose(proba, model.predict_proba(scored_with_constant), rtol=0, atol=1e-12)
    assert labels.tolist() == model.predict(scored_with_constant).tolist()
    assert labels[:5].tolist() == ["a"] * 5


def test_scikit_learn_which_would_predict_nan_is_not_given_point_masses(constant_column):
    _, y, _, with_constant, _ = constant_column
    with pytest.raises(ValueError, match="var_smoothing > 0"):
        to_sklearn(nbstream.GaussianNB(var_smoothing=0).fit(with_constant, y))
