"""The real data: MNIST through every family, against scikit-learn and the textbook result."""

from __future__ import annotations

import numpy as np
import pytest
import sklearn.naive_bayes as reference

import nbstream

CHUNK = 7_000  # deliberately not a divisor of 60,000


def chunked_fit(model, X, y, classes=None):
    for start in range(0, len(y), CHUNK):
        model.partial_fit(X[start:start + CHUNK], y[start:start + CHUNK], classes=classes)
    return model


def test_bernoulli_scores_the_textbook_0_8427(mnist):
    model = chunked_fit(nbstream.BernoulliNB(alpha=1.0, binarize=127.5),
                        mnist["train_images"], mnist["train_labels"])
    assert model.n_examples_seen_ == 60_000
    assert model.score(mnist["test_images"], mnist["test_labels"]) == pytest.approx(0.8427, abs=5e-5)


@pytest.mark.parametrize("family, params", [
    ("BernoulliNB", {"binarize": 127.5}),
    ("MultinomialNB", {}),
    ("ComplementNB", {}),
    ("MultinomialNB", {"alpha": 0.1, "fit_prior": False}),
])
def test_discrete_families_match_scikit_learn_on_mnist(mnist, family, params):
    X, y = mnist["train_images"], mnist["train_labels"]
    ours = chunked_fit(getattr(nbstream, family)(**params), X, y, classes=np.arange(10))
    theirs = getattr(reference, family)(**params).fit(X, y)
    test = mnist["test_images"]
    np.testing.assert_allclose(ours.predict_log_proba(test), theirs.predict_log_proba(test), rtol=0, atol=1e-9)
    np.testing.assert_array_equal(ours.predict(test), theirs.predict(test))


def test_categorical_matches_scikit_learn_on_mnist(mnist):
    X, y = mnist["train_images"], mnist["train_labels"]
    ours = chunked_fit(nbstream.CategoricalNB(), X, y, classes=np.arange(10))
    theirs = reference.CategoricalNB().fit(X, y)
    seen = X[:3000]  # scikit-learn cannot score pixel values it never saw; these it has
    np.testing.assert_allclose(ours.predict_log_proba(seen), theirs.predict_log_proba(seen), rtol=0, atol=1e-9)
    # Test images hold pixel values some feature never took in training: no error here.
    assert ours.score(mnist["test_images"], mnist["test_labels"]) > 0.6


def test_gaussian_matches_scikit_learn_fit_on_mnist(mnist):
    X, y = mnist["train_images"], mnist["train_labels"]
    ours = chunked_fit(nbstream.GaussianNB(), X, y, classes=np.arange(10))
    theirs = reference.GaussianNB().fit(X, y)
    test = mnist["test_images"]
    np.testing.assert_allclose(ours.var_, theirs.var_, rtol=1e-9)
    np.testing.assert_allclose(ours.theta_, theirs.theta_, rtol=1e-12, atol=1e-12)
    jll = theirs.predict_joint_log_proba(test)
    np.testing.assert_allclose(ours.predict_joint_log_proba(test), jll, rtol=1e-9)
    # Pixels that never vary within a class have variance epsilon_ (about 1e-5), so joint
    # log-likelihoods reach 1e10: log-posteriors agree to 1e-9 of that scale.
    scale = np.abs(jll).max(axis=1, keepdims=True)
    error = np.abs(ours.predict_log_proba(test) - theirs.predict_log_proba(test))
    assert (error <= 1e-9 * scale).all()
    np.testing.assert_array_equal(ours.predict(test), theirs.predict(test))
