"""The library's matrix products run on one BLAS thread, and leave the user's setting as it was."""

import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import nbstream
from nbstream.utils.threads import one_blas_thread

FAMILIES = [nbstream.BernoulliNB, nbstream.MultinomialNB, nbstream.ComplementNB, nbstream.GaussianNB,
            nbstream.CategoricalNB]
USERS = 3  # a setting of the user's own, neither the default nor ours


def blas_threads() -> list[int]:
    return [library["num_threads"] for library in threadpool_info() if library["user_api"] == "blas"]


@pytest.fixture
def users_setting():
    """The user's own BLAS setting, for the test's length."""
    with threadpool_limits(limits=USERS, user_api="blas"):
        assert set(blas_threads()) == {USERS}
        yield


def every_call(family, X, y):
    """Each public call of a model that learns, scores, merges or moves its state."""
    model = family()
    yield lambda: model.fit(X, y)
    yield lambda: model.partial_fit(X, y)
    yield lambda: model.predict(X)
    yield lambda: model.predict_proba(X)
    yield lambda: model.predict_log_proba(X)
    yield lambda: model.predict_joint_log_proba(X)
    yield lambda: model.score(X, y)
    yield lambda: model.predict_proba_prequential(X, y)
    yield lambda: model.predict_then_learn(X, y)
    yield lambda: model.merge(family().fit(X, y))
    yield lambda: family.from_state(model.export_state())
    yield lambda: nbstream.loads(nbstream.dumps(model))


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_the_users_setting_is_as_it_was_after_every_call(family, users_setting, rng):
    X, y = rng.integers(0, 4, (300, 20)), rng.integers(0, 3, 300)
    for call in every_call(family, X, y):
        call()
        assert set(blas_threads()) == {USERS}


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_scoring_runs_on_one_thread(family, users_setting, monkeypatch, rng):
    seen = []
    scores = family._joint_log_likelihood
    prequential = family._prequential_joint_log_likelihood

    def scoring(*args, **kwargs):
        seen.append(set(blas_threads()))
        return scores(*args, **kwargs)

    def prequential_scoring(*args, **kwargs):
        seen.append(set(blas_threads()))
        return prequential(*args, **kwargs)

    monkeypatch.setattr(family, "_joint_log_likelihood", scoring)
    monkeypatch.setattr(family, "_prequential_joint_log_likelihood", prequential_scoring)
    X, y = rng.integers(0, 4, (50, 6)), rng.integers(0, 3, 50)
    model = family().fit(X, y)
    model.predict_proba(X)
    model.predict_then_learn(X, y)
    assert seen == [{1}, {1}]
    assert set(blas_threads()) == {USERS}


def test_calls_nest_and_an_error_restores_the_setting(users_setting):
    with one_blas_thread():
        with one_blas_thread():
            assert set(blas_threads()) == {1}
        assert set(blas_threads()) == {1}
    with pytest.raises(ValueError, match="X has 3 features"):
        nbstream.GaussianNB().fit(np.ones((4, 2)), [0, 1, 0, 1]).predict_proba(np.ones((2, 3)))
    assert set(blas_threads()) == {USERS}


def test_calls_on_several_threads_at_once_leave_the_setting_as_it_was(users_setting, rng):
    X, y = rng.normal(size=(2_000, 50)), rng.integers(0, 5, 2_000)
    model = nbstream.GaussianNB().fit(X, y)
    errors = []

    def score_often():
        try:
            for _ in range(30):
                model.predict_proba(X)
        except Exception as error:  # noqa: BLE001 - reported below, on the test's thread
            errors.append(error)

    workers = [threading.Thread(target=score_often) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == [] and set(blas_threads()) == {USERS}
