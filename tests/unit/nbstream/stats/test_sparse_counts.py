"""Sparse counts (``counts="sparse"``): the (class, feature) pairs seen give the numbers of the dense
table and of scikit-learn, learn, merge and persist as the dense table does, and take memory and
snapshot bytes in proportion to the pairs, not to n_classes x n_features."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import naive_bayes as reference
from sklearn.utils.estimator_checks import parametrize_with_checks

import nbstream
from nbstream.naive_bayes.discrete import SPARSE_FROM_FEATURES
from nbstream.persistence.snapshot import SnapshotError
from tests.unit.nbstream.persistence.test_snapshot_hostile import entry, refused, seal, split

FAMILIES = [nbstream.BernoulliNB, nbstream.MultinomialNB, nbstream.ComplementNB]
PRIOR = [0.2, 0.3, 0.5]  # for the classes a, b, c

# Each family with the parameter sets whose numbers sparse counts must reproduce.
CASES = [
    *[(family, params) for family in FAMILIES for params in (
        {}, {"alpha": 0.01}, {"alpha": 2.5}, {"alpha": 0.0, "force_alpha": False}, {"fit_prior": False},
        {"class_prior": PRIOR}, {"half_life": 7.0})],
    (nbstream.ComplementNB, {"norm": True}),
    (nbstream.ComplementNB, {"norm": True, "alpha": 0.01}),
    (nbstream.ComplementNB, {"norm": True, "alpha": 2.5, "class_prior": PRIOR}),
    (nbstream.BernoulliNB, {"binarize": 0.5}),
    (nbstream.BernoulliNB, {"binarize": None}),
    (nbstream.BernoulliNB, {"binarize": 0.5, "alpha": 0.01, "fit_prior": False}),
]

# A complement with alpha 1e-10 (0, not forced) whose classes hold every count of a feature has
# complement counts that cancel to 1e-10: there the layouts round differently (see
# test_a_complement_of_almost_no_smoothing_matches_the_dense_table_where_counts_cancel).
STREAMED_CASES = [case for case in CASES if case != (nbstream.ComplementNB, {"alpha": 0.0, "force_alpha": False})]


def case_id(case) -> str:
    family, params = case
    return f"{family.__name__}({', '.join(f'{k}={v}' for k, v in params.items())})"


def dense_table(value) -> np.ndarray:
    return value.toarray() if scipy.sparse.issparse(value) else np.asarray(value)


def close(mine, theirs, what: str) -> None:
    np.testing.assert_allclose(dense_table(mine), dense_table(theirs), rtol=1e-12, atol=1e-9, err_msg=what)


def stream(rng: np.random.Generator, n_rows: int = 40, n_features: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """Counts, most of them 0, with some rows of no feature at all; labels a, b, c in order of
    first appearance, so that an open class set orders them as scikit-learn does."""
    X = rng.integers(0, 4, size=(n_rows, n_features)) * (rng.random((n_rows, n_features)) < 0.3)
    X[[3, 4, n_rows - 1]] = 0
    y = rng.choice(["a", "b", "c"], size=n_rows)
    y[:3] = ["a", "b", "c"]
    return X.astype(np.float64) / 2, y  # halves: some values at the binarize threshold 0.5


def valid_for(params: dict, X: np.ndarray) -> np.ndarray:
    """X as the model expects it: binarize=None takes values of at most 1 (a Bernoulli count above
    its class's count is a probability above 1: refused, as scikit-learn gives NaN)."""
    return np.minimum(X, 1) if "binarize" in params and params["binarize"] is None else X


def learned(model, X, y, chunks, weights=None, classes=None):
    """The model after partial_fit on X, y cut at ``chunks`` (row indices)."""
    for start, stop in itertools.pairwise([0, *chunks, len(y)]):
        if stop > start:
            model.partial_fit(X[start:stop], y[start:stop], classes=classes,
                              sample_weight=None if weights is None else weights[start:stop])
    return model


def scikit_learn_model(family, params: dict, X, y, weights=None, classes=None):
    """scikit-learn's model of the same rows; forgetting becomes the weights it gives."""
    params = dict(params)
    half_life = params.pop("half_life", None)
    if half_life is not None:
        decay = 0.5 ** (np.arange(len(y) - 1, -1, -1) / half_life)
        weights = decay if weights is None else weights * decay
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # alpha too small
        return getattr(reference, family.__name__)(**params).partial_fit(
            X, y, classes=np.unique(y) if classes is None else classes, sample_weight=weights)


def assert_same_numbers(sparse, dense, theirs, X) -> None:
    """Sparse counts give the dense table's numbers and scikit-learn's, for every fitted
    attribute that has them and for predictions."""
    assert sparse.sparse_counts_ and not dense.sparse_counts_
    assert isinstance(sparse.feature_count_, scipy.sparse.csr_array)
    assert isinstance(sparse.feature_log_prob_, np.ndarray)
    assert sparse.classes_.tolist() == dense.classes_.tolist() == theirs.classes_.tolist()
    np.testing.assert_allclose(sparse.predict_joint_log_proba(X), dense.predict_joint_log_proba(X), rtol=0,
                               atol=1e-9)
    for ours in (sparse, dense):
        close(ours.predict_joint_log_proba(X), theirs.predict_joint_log_proba(X), "predict_joint_log_proba")
        close(ours.predict_proba(X), theirs.predict_proba(X), "predict_proba")
        close(ours.feature_log_prob_, theirs.feature_log_prob_, "feature_log_prob_")
        close(ours.class_count_, theirs.class_count_, "class_count_")
        close(ours.feature_count_, theirs.feature_count_, "feature_count_")
        close(ours.class_log_prior_, theirs.class_log_prior_, "class_log_prior_")
        if isinstance(ours, nbstream.ComplementNB):
            assert isinstance(ours.feature_all_, np.ndarray)
            close(ours.feature_all_, theirs.feature_all_, "feature_all_")


# ---- the numbers of the dense table and of scikit-learn ------------------------------------

@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("as_csr", [False, True], ids=["dense input", "CSR input"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_sparse_counts_give_the_numbers_of_the_dense_table_and_of_scikit_learn(case, as_csr, weighted):
    family, params = case
    X, y = stream(np.random.default_rng(1))
    X = valid_for(params, X)
    weights = np.random.default_rng(2).uniform(0.1, 3.0, size=len(y)) if weighted else None
    data = scipy.sparse.csr_array(X) if as_csr else X
    theirs = scikit_learn_model(family, params, data, y, weights)
    whole = family(counts="sparse", **params).partial_fit(data, y, sample_weight=weights)
    row_by_row = learned(family(counts="sparse", **params), data, y, range(1, len(y)), weights)
    dense = family(counts="dense", **params).partial_fit(data, y, sample_weight=weights)
    assert_same_numbers(whole, dense, theirs, data)
    assert_same_numbers(row_by_row, dense, theirs, X)


@st.composite
def streams(draw):
    """(X, y, weights or None, chunk boundaries): a few rows of a few features, some empty."""
    n_rows = draw(st.integers(3, 25))
    n_features = draw(st.integers(2, 9))  # see test_a_complement_of_one_feature_is_refused_in_either_layout
    values = draw(st.lists(st.sampled_from([0, 0, 0, 1, 2, 3]), min_size=n_rows * n_features,
                           max_size=n_rows * n_features))
    X = np.array(values, dtype=np.float64).reshape(n_rows, n_features)
    labels = draw(st.lists(st.sampled_from("abc"), min_size=n_rows - 3, max_size=n_rows - 3))
    y = np.array(["a", "b", "c", *labels])
    weights = draw(st.none() | st.lists(st.sampled_from([0.25, 1.0, 3.0]), min_size=n_rows, max_size=n_rows))
    chunks = sorted(set(draw(st.lists(st.integers(1, n_rows - 1), max_size=n_rows))))
    return X, y, None if weights is None else np.array(weights), chunks


INPUTS = {"float64": lambda X: X, "uint8": lambda X: X.astype(np.uint8), "halves": lambda X: X / 2,
          "csr_array": scipy.sparse.csr_array, "csr_matrix": scipy.sparse.csr_matrix}


@settings(max_examples=120, deadline=None)
@given(data=streams(), case=st.sampled_from(STREAMED_CASES), make_input=st.sampled_from(sorted(INPUTS)))
def test_any_chunking_of_any_stream_gives_the_numbers_of_the_dense_table_and_of_scikit_learn(data, case, make_input):
    X, y, weights, chunks = data
    family, params = case
    X = INPUTS[make_input](valid_for(params, X))
    sparse = learned(family(counts="sparse", **params), X, y, chunks, weights)
    dense = learned(family(counts="dense", **params), X, y, chunks, weights)
    assert_same_numbers(sparse, dense, scikit_learn_model(family, params, X, y, weights), X)


def test_a_complement_of_almost_no_smoothing_is_exact_where_the_dense_table_loses_digits():
    """Class c holds every count of feature 1: its complement counts are 1e-10 for both features,
    so it scores row 2 log(2) exactly. The dense table (and scikit-learn) computes (1 + 1e-10) - 1
    for feature 1 and loses seven digits of it; sparse counts add the other classes' totals
    instead of subtracting from the whole, and keep them. Elsewhere both layouts agree."""
    X, y = np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 1.0]]), np.array(["a", "b", "c"])
    params = {"alpha": 0.0, "force_alpha": False}
    sparse = nbstream.ComplementNB(counts="sparse", **params).fit(X, y).predict_joint_log_proba(X)
    dense = nbstream.ComplementNB(counts="dense", **params).fit(X, y).predict_joint_log_proba(X)
    reference_scores = scikit_learn_model(nbstream.ComplementNB, params, X, y).predict_joint_log_proba(X)
    assert sparse[2, 2] == pytest.approx(np.log(2), rel=0, abs=1e-12)
    assert abs(dense[2, 2] - np.log(2)) > 1e-9  # what the dense sum loses
    np.testing.assert_allclose(dense, reference_scores, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sparse, dense, rtol=0, atol=1e-7)


def test_predictions_between_batches_follow_every_batch():
    """Tables kept between batches are refreshed after each (a sparse batch touching few features)."""
    X, y = stream(np.random.default_rng(3), n_rows=60)
    X = scipy.sparse.csr_array(X)
    for family in FAMILIES:
        sparse, dense = family(counts="sparse"), family(counts="dense")
        for start in range(0, 60, 7):
            for model in (sparse, dense):
                model.partial_fit(X[start:start + 7], y[start:start + 7])
            np.testing.assert_allclose(sparse.predict_joint_log_proba(X), dense.predict_joint_log_proba(X),
                                       rtol=0, atol=1e-9)


def test_a_complement_of_one_feature_is_refused_in_either_layout():
    """norm divides by the sum of a class's log weights, 0 for a single feature: scikit-learn gives NaN."""
    X, y = np.array([[1.0], [0.0], [2.0]]), ["a", "b", "c"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.isnan(reference.ComplementNB(norm=True).fit(X, y).feature_log_prob_).all()
        for counts in ("sparse", "dense"):
            model = nbstream.ComplementNB(norm=True, counts=counts).fit(X, y)
            with pytest.raises(ValueError, match="overflow float64"):
                model.predict_joint_log_proba(X)


# ---- an open class set and a fixed one -------------------------------------------------------

@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_classes_met_mid_stream_are_added_as_the_dense_table_adds_them(family):
    X, _ = stream(np.random.default_rng(4), n_rows=30)
    y = np.array(["c"] * 8 + ["c", "a"] * 5 + ["b", "d", "a"] * 4)
    sparse, dense = family(counts="sparse"), family(counts="dense")
    for start in (0, 8, 18):  # c; then a; then b and d
        stop = {0: 8, 8: 18, 18: 30}[start]
        for model in (sparse, dense):
            model.partial_fit(X[start:stop], y[start:stop])
        assert sparse.classes_.tolist() == dense.classes_.tolist() == list(dict.fromkeys(y[:stop]))
        np.testing.assert_allclose(sparse.predict_joint_log_proba(X), dense.predict_joint_log_proba(X), rtol=0,
                                   atol=1e-9)
        close(sparse.feature_count_, dense.feature_count_, "feature_count_")
        close(sparse.feature_log_prob_, dense.feature_log_prob_, "feature_log_prob_")


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_a_fixed_class_list_with_a_class_never_seen_gives_scikit_learn_s_numbers(family):
    X, y = stream(np.random.default_rng(5))
    classes = ["a", "b", "c", "z"]
    sparse = learned(family(counts="sparse"), X, y, [10, 11, 25], classes=classes)
    dense = learned(family(counts="dense"), X, y, [10, 11, 25], classes=classes)
    assert_same_numbers(sparse, dense, scikit_learn_model(family, {}, X, y, classes=classes), X)
    with pytest.raises(ValueError):
        sparse.partial_fit(X[:1], ["new"])


# ---- merge ---------------------------------------------------------------------------------

def two_halves(seed: int):
    """Two parts of a stream; the second meets a class the first has not."""
    X, y = stream(np.random.default_rng(seed), n_rows=50)
    y[40:] = "d"
    return (X[:25], y[:25]), (X[25:], y[25:]), (X, y)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("into, other", [("sparse", "sparse"), ("sparse", "dense"), ("dense", "sparse")])
def test_merging_across_layouts_gives_the_model_of_the_concatenation(family, into, other):
    first, second, (X, y) = two_halves(6)
    merged = family(counts=into).partial_fit(*first).merge(family(counts=other).partial_fit(*second))
    whole = family(counts="dense").partial_fit(X, y)
    assert merged.sparse_counts_ == (into == "sparse")
    assert merged.classes_.tolist() == whole.classes_.tolist() == ["a", "b", "c", "d"]
    assert merged.n_examples_seen_ == 50
    np.testing.assert_allclose(merged.predict_joint_log_proba(X), whole.predict_joint_log_proba(X), rtol=0,
                               atol=1e-9)
    close(merged.class_count_, whole.class_count_, "class_count_")
    close(merged.feature_count_, whole.feature_count_, "feature_count_")


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("into, other", [("sparse", "sparse"), ("sparse", "dense"), ("dense", "sparse")])
def test_a_model_that_has_not_learned_takes_the_merged_counts_in_its_own_layout(family, into, other):
    first, _, _ = two_halves(7)
    fitted = family(counts=other).partial_fit(*first)
    merged = family(counts=into).merge(fitted)
    assert merged.sparse_counts_ == (into == "sparse")
    assert merged.classes_.tolist() == fitted.classes_.tolist()
    np.testing.assert_allclose(merged.predict_joint_log_proba(first[0]), fitted.predict_joint_log_proba(first[0]),
                               rtol=0, atol=1e-9)
    merged.partial_fit(*first)  # and learns on in its layout: twice the counts
    close(merged.feature_count_, 2 * dense_table(fitted.feature_count_), "feature_count_")


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_a_sparse_model_merged_into_itself_doubles(family):
    first, _, _ = two_halves(8)
    model = family(counts="sparse").partial_fit(*first)
    once = dense_table(model.feature_count_)
    model.merge(model)
    close(model.feature_count_, 2 * once, "feature_count_")


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_the_layout_is_no_parameter_of_the_model_when_merging(family):
    sparse, dense = family(counts="sparse"), family(counts="dense", alpha=0.5)
    assert sparse.differing_params(family(counts="dense")) == []
    assert sparse.differing_params(family(counts="auto")) == []
    assert sparse.differing_params(dense) == ["alpha"]
    first, second, _ = two_halves(9)
    with pytest.raises(ValueError, match=r"parameters differ: \['alpha'\]"):
        sparse.partial_fit(*first).merge(dense.partial_fit(*second))


# ---- snapshots -----------------------------------------------------------------------------

def sparse_model(family, seed: int = 10):
    X, y = stream(np.random.default_rng(seed), n_rows=50)
    weights = np.random.default_rng(seed).uniform(0.5, 2.0, size=50)
    return family(counts="sparse").partial_fit(X[:30], y[:30], sample_weight=weights[:30]), X, y


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("route", ["save/load", "dumps/loads", "save/load without tables"])
def test_a_snapshot_of_sparse_counts_predicts_and_learns_on_bit_for_bit(family, route, tmp_path):
    model, X, y = sparse_model(family)
    if route == "dumps/loads":
        restored = nbstream.loads(nbstream.dumps(model))[0]
    else:
        restored = nbstream.load(nbstream.save(model, tmp_path / "m.nbs", tables=route == "save/load"))
    assert restored.sparse_counts_
    assert restored.get_params() == model.get_params()
    assert (restored.feature_count_ != model.feature_count_).nnz == 0
    assert np.array_equal(restored.predict_joint_log_proba(X), model.predict_joint_log_proba(X))
    assert np.array_equal(restored.predict_proba(X), model.predict_proba(X))
    for learner in (model, restored):
        learner.partial_fit(X[30:], y[30:])
        learner.partial_fit(X[:2], ["new", "a"])
    assert restored.classes_.tolist() == model.classes_.tolist()
    assert np.array_equal(restored.predict_joint_log_proba(X), model.predict_joint_log_proba(X))


def hashed_text_model(family, n_features: int, n_classes: int = 200, n_rows: int = 300):
    """One nonzero feature per row, spread over n_features, labels cycling over n_classes."""
    rng = np.random.default_rng(11)
    X = scipy.sparse.csr_array((np.ones(n_rows), (np.arange(n_rows), rng.integers(0, n_features, n_rows))),
                               shape=(n_rows, n_features))
    return family().fit(X, np.arange(n_rows) % n_classes)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_a_snapshot_grows_with_the_pairs_seen_not_with_classes_times_features(family):
    model = hashed_text_model(family, 1 << 22)
    assert model.sparse_counts_
    n_pairs, n_classes = model.feature_count_.nnz, 200
    assert n_pairs == 300
    with_tables, without = len(nbstream.dumps(model)), len(nbstream.dumps(model, tables=False))
    # 16 bytes a pair of counts and 8 to 16 of tables; 8 a class for each per-class array
    assert without < 16 * n_pairs + 16 * n_classes + 4096
    assert with_tables < 32 * n_pairs + 48 * n_classes + 4096
    assert with_tables < 24 * 1024
    narrower = hashed_text_model(family, 1 << 20)
    assert abs(len(nbstream.dumps(narrower)) - with_tables) < 8  # only the digits of n_features differ


# Forged statistics, from the genuine ones (class_count, pair_feature, pair_class, pair_count of a
# model of 3 classes and 12 features): what each changes, and a word of the one-line refusal.
def _set(name: str, index: int, value, dtype=None):
    def change(arrays: dict) -> dict:
        array = arrays[name].astype(dtype or arrays[name].dtype)
        array[index] = value
        return {name: array}
    return change


def _repeat_first_pair(arrays: dict) -> dict:
    features, classes = arrays["pair_feature"].copy(), arrays["pair_class"].copy()
    features[1], classes[1] = features[0], classes[0]
    return {"pair_feature": features, "pair_class": classes}


FORGED_STATISTICS = {
    "pairs not sorted": (lambda a: {"pair_feature": a["pair_feature"][::-1].copy(),
                                    "pair_class": a["pair_class"][::-1].copy()}, "sorted"),
    "a pair repeated": (_repeat_first_pair, "distinct"),
    "a feature index of n_features": (_set("pair_feature", -1, 12), "beyond the model's 12 features"),
    "a feature index of 2**31": (_set("pair_feature", -1, 2**31, "<i8"), "outside 0..2147483647"),
    "a feature index of 2**40": (_set("pair_feature", -1, 2**40, "<i8"), "outside 0..2147483647"),
    "a negative feature index": (_set("pair_feature", 0, -1), "outside 0..2147483647"),
    "a negative class index": (_set("pair_class", 0, -1), "outside 0..2147483647"),
    "a class index of n_classes": (_set("pair_class", -1, 3), "3 classes"),
    "feature indices as floats": (lambda a: {"pair_feature": a["pair_feature"].astype("<f4")}, "integers"),
    "class indices as floats": (lambda a: {"pair_class": a["pair_class"].astype("<f8")}, "integers"),
    "feature indices as bools": (lambda a: {"pair_feature": a["pair_feature"] > 0}, "integers"),
    "feature indices of two axes": (lambda a: {"pair_feature": a["pair_feature"][:, None].copy()}, "integers"),
    "a negative count": (_set("pair_count", 0, -1.0), "negative"),
    "a NaN count": (_set("pair_count", 2, np.nan), "NaN"),
    "an infinite count": (_set("pair_count", 2, np.inf), "infinite"),
    "counts as float32": (lambda a: {"pair_count": a["pair_count"].astype("<f4")}, "float64"),
    "counts as integers": (lambda a: {"pair_count": a["pair_count"].astype("<i8")}, "float64"),
    "one count fewer": (lambda a: {"pair_count": a["pair_count"][:-1].copy()}, "one value per pair"),
    "one class index more": (lambda a: {"pair_class": np.r_[a["pair_class"], 2].astype("<i4")},
                             "one value per pair"),
    "a negative class count": (_set("class_count", 0, -1.0), "negative"),
    "a class count too few": (lambda a: {"class_count": a["class_count"][:2].copy()}, "class_count"),
}


@pytest.fixture
def genuine_sparse(tmp_path):
    """A sparse multinomial model of 3 classes and 12 features, its state, and its snapshot
    (header, payload) without tables, so that forged statistics meet their own checks."""
    X, y = stream(np.random.default_rng(12))
    model = nbstream.MultinomialNB(counts="sparse").fit(X, y)
    state = model.export_state(tables=False)
    assert sorted(state.statistics) == ["class_count", "pair_class", "pair_count", "pair_feature"]
    assert state.statistics["pair_feature"].dtype == state.statistics["pair_class"].dtype == np.int32
    return state, split(nbstream.save(model, tmp_path / "m.nbs", tables=False).read_bytes())


def with_statistics(header: dict, payload: bytes, arrays: dict) -> bytes:
    """The snapshot re-sealed with these statistics in place of its own (appended to its payload)."""
    header, payload = copy.deepcopy(header), bytearray(payload)
    for name, array in arrays.items():
        payload += b"\x00" * (-len(payload) % 8)
        described = entry(header, f"stats.{name}")
        described.pop("nonzero", None)
        described.update(dtype=array.dtype.str, shape=list(array.shape), offset=len(payload))
        payload += np.ascontiguousarray(array).tobytes()
    return seal(header, bytes(payload))


@pytest.mark.parametrize("forgery", FORGED_STATISTICS)
def test_forged_pairs_in_a_snapshot_are_refused_in_one_line(tmp_path, genuine_sparse, forgery):
    state, (header, payload) = genuine_sparse
    change, word = FORGED_STATISTICS[forgery]
    message = refused(tmp_path, with_statistics(header, payload, change(state.statistics)))
    assert word in message and "\n" not in message


@pytest.mark.parametrize("forgery", FORGED_STATISTICS)
def test_forged_pairs_in_a_state_are_refused_with_a_value_error(genuine_sparse, forgery):
    state, _ = genuine_sparse
    change, word = FORGED_STATISTICS[forgery]
    forged = dataclasses.replace(state, statistics={**state.statistics, **change(state.statistics)})
    with pytest.raises(ValueError, match=word) as caught:
        nbstream.MultinomialNB.from_state(forged)
    assert "\n" not in str(caught.value)


def test_a_pair_statistic_missing_or_beside_a_dense_table_is_refused(tmp_path, genuine_sparse):
    state, (header, payload) = genuine_sparse
    missing = copy.deepcopy(header)
    missing["arrays"] = [e for e in missing["arrays"] if e["name"] != "stats.pair_count"]
    assert "the statistics are" in refused(tmp_path, seal(missing, payload))
    mixed = {**state.statistics, "feature_count": np.zeros((3, 12))}
    with pytest.raises(ValueError, match="the statistics are"):
        nbstream.MultinomialNB.from_state(dataclasses.replace(state, statistics=mixed))


def test_sparse_counts_of_more_features_than_training_allows_are_refused(tmp_path, genuine_sparse):
    """Training refuses sparse counts of more than 2**31 features; a snapshot claiming them is forged."""
    _, (header, payload) = genuine_sparse
    with pytest.raises(ValueError, match="at most 2147483648 features"):
        nbstream.MultinomialNB(counts="sparse").fit(scipy.sparse.csr_array((1, 2**31 + 1)), ["a"])
    refused(tmp_path, seal({**header, "n_features": 2**40}, payload))


# ---- alpha that sparse counts cannot hold, however the model came to hold them -----------------

UNHOLDABLE_ALPHA = {"alpha per feature": {"alpha": np.ones(SPARSE_FROM_FEATURES)},
                    "alpha 0, forced": {"alpha": 0.0, "force_alpha": True}}


def auto_sparse(family):
    """A model that chose sparse counts by itself: counts='auto' and 2**16 features."""
    X = scipy.sparse.csr_array(([1.0, 2.0, 1.0], ([0, 1, 2], [5, 9, 5])), shape=(3, SPARSE_FROM_FEATURES))
    model = family().fit(X, ["a", "b", "a"])
    assert model.sparse_counts_
    return model, X


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("alpha", UNHOLDABLE_ALPHA)
def test_set_params_to_an_alpha_sparse_counts_cannot_hold_is_refused_in_one_line(family, alpha):
    model, X = auto_sparse(family)
    model.set_params(**UNHOLDABLE_ALPHA[alpha])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(ValueError, match="alpha") as caught:
            model.predict_joint_log_proba(X)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("alpha", UNHOLDABLE_ALPHA)
@pytest.mark.parametrize("counts", ["auto", "dense"])
def test_a_state_of_sparse_counts_with_an_alpha_they_cannot_hold_is_refused(alpha, counts):
    """As a model saved after such set_params would be (its counts parameter says nothing of the
    layout it holds: set_params may have changed that too)."""
    model, _ = auto_sparse(nbstream.MultinomialNB)
    state = model.export_state(tables=False)
    params = {**state.params, **UNHOLDABLE_ALPHA[alpha], "counts": counts}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(ValueError, match="alpha"):
            nbstream.MultinomialNB.from_state(dataclasses.replace(state, params=params))
        with pytest.raises(SnapshotError, match="alpha"):
            nbstream.loads(resealed(model, params))


def resealed(model, params: dict) -> bytes:
    """The model's snapshot (without tables) with these parameters in its header."""
    header, payload = split(nbstream.dumps(model, tables=False))
    for name, value in params.items():
        if isinstance(value, np.ndarray):  # an array parameter: appended to the payload
            payload += b"\x00" * (-len(payload) % 8)
            header["arrays"].append({"name": f"param.{name}", "dtype": value.dtype.str, "shape": list(value.shape),
                                     "offset": len(payload)})
            payload += value.tobytes()
            header["params"][name] = {"array": f"param.{name}"}
        else:
            header["params"][name] = value
    return seal(header, payload)


# ---- the counts parameter ------------------------------------------------------------------

def csr_of_width(n_features: int):
    return scipy.sparse.csr_array(([1.0, 3.0, 2.0], ([0, 1, 2], [0, n_features - 1, 1])), shape=(3, n_features))


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_counts_must_be_one_of_the_layouts(family):
    with pytest.raises(ValueError, match="counts must be one of auto, dense, sparse; got 'bogus'") as caught:
        family(counts="bogus").fit([[1, 0]], ["a"])
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("params", [{"alpha": [1.0, 2.0]}, {"alpha": np.array([1.0, 2.0]), "force_alpha": False},
                                    {"alpha": 0.0}],
                         ids=["alpha per feature", "alpha per feature, unforced", "alpha 0"])
def test_sparse_counts_need_a_single_positive_alpha(family, params):
    with pytest.raises(ValueError, match="counts='sparse' needs one alpha > 0") as caught:
        family(counts="sparse", **params).fit([[1, 0], [0, 2]], ["a", "b"])
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_auto_is_sparse_from_2_to_the_16_features_on_when_alpha_allows(family):
    assert SPARSE_FROM_FEATURES == 2**16
    narrow, wide = csr_of_width(SPARSE_FROM_FEATURES - 1), csr_of_width(SPARSE_FROM_FEATURES)
    y = ["a", "b", "a"]
    assert not family().fit(narrow, y).sparse_counts_
    assert family().fit(wide, y).sparse_counts_
    assert family().partial_fit(wide, y).sparse_counts_
    assert family(alpha=0.0, force_alpha=False).fit(wide, y).sparse_counts_  # alpha becomes 1e-10
    assert not family(alpha=np.ones(SPARSE_FROM_FEATURES)).fit(wide, y).sparse_counts_
    assert not family(alpha=0.0).fit(wide, y).sparse_counts_
    assert not family(counts="dense").fit(wide, y).sparse_counts_
    assert family(counts="sparse").fit(narrow, y).sparse_counts_
    with pytest.raises(nbstream.NotFittedError):
        assert family().sparse_counts_


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_a_refit_chooses_the_layout_again(family):
    model = family().fit(csr_of_width(SPARSE_FROM_FEATURES), ["a", "b", "a"])
    assert model.sparse_counts_
    assert not model.fit(csr_of_width(10), ["a", "b", "a"]).sparse_counts_
    assert model.set_params(counts="sparse").fit(csr_of_width(10), ["a", "b", "a"]).sparse_counts_


# ---- scikit-learn's estimator checks ---------------------------------------------------------

with warnings.catch_warnings():  # the models speak the protocol without inheriting from BaseEstimator
    warnings.filterwarnings("ignore", message="Estimator .* does not inherit from")
    _SPARSE_ESTIMATOR_CHECKS = parametrize_with_checks([family(counts="sparse") for family in FAMILIES])


@_SPARSE_ESTIMATOR_CHECKS
def test_scikit_learn_estimator_checks_with_sparse_counts(estimator, check):
    check(estimator)


# ---- memory --------------------------------------------------------------------------------

def test_statistics_take_memory_in_proportion_to_the_pairs_seen():
    """2**22 features and 1000 classes would be 32 GiB as a dense table."""
    rng = np.random.default_rng(13)
    n_rows, per_row, n_features, n_classes = 3000, 20, 1 << 22, 1000
    X = scipy.sparse.csr_array((rng.integers(1, 4, n_rows * per_row).astype(np.float64),
                                rng.integers(0, n_features, n_rows * per_row),
                                np.arange(0, n_rows * per_row + 1, per_row)), shape=(n_rows, n_features))
    X.sum_duplicates()
    y = np.arange(n_rows) % n_classes
    tracemalloc.start()
    model = nbstream.MultinomialNB().partial_fit(X[:1500], y[:1500], classes=np.arange(n_classes))
    model.partial_fit(X[1500:], y[1500:])
    scores = model.predict_joint_log_proba(X[:50])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert model.sparse_counts_ and scores.shape == (50, n_classes) and np.isfinite(scores).all()
    rows, columns = X.nonzero()
    n_pairs = len(np.unique(y[rows].astype(np.int64) << 32 | columns))
    assert model.feature_count_.nnz == n_pairs > 50_000
    state = model.export_state()
    statistics = sum(array.nbytes for array in state.statistics.values())
    assert 16 * n_pairs <= statistics <= 16 * n_pairs + 8 * n_classes
    tables = sum(np.asarray(value).nbytes for value in state.tables.values())
    assert tables <= 8 * n_pairs + 8 * 3 * n_classes
    assert peak < 64 * 2**20  # of which 16 MiB map the 2**22 features onto those seen


@pytest.mark.parametrize("weights", [None, "fractional"])
def test_pairs_folded_by_the_hash_table_equal_those_folded_by_sorting(monkeypatch, weights):
    from nbstream.utils import compiled
    from nbstream.utils.compiled import SWITCH

    pytest.importorskip("numba")
    monkeypatch.setattr(compiled, "SMALLEST_BATCH", 0)  # the hash table for these few keys too
    rng = np.random.default_rng(8)
    X = scipy.sparse.random(300, 5000, density=0.01, random_state=1, format="csr")
    X.data = np.ceil(X.data * 20)  # whole counts up to 20: beyond the repeated keys of the sorting path too
    y = rng.integers(0, 4, size=300)
    sample_weight = rng.uniform(0.5, 2.0, size=300) if weights else None
    fitted = {}
    for flag in ("1", "0"):
        monkeypatch.setenv(SWITCH, flag)
        model = nbstream.MultinomialNB(counts="sparse")
        for start in range(0, 300, 100):
            part = slice(start, start + 100)
            model.partial_fit(X[part], y[part], classes=np.arange(4),
                              sample_weight=None if sample_weight is None else sample_weight[part])
        fitted[flag] = model
    counts = [fitted[flag].feature_count_ for flag in ("1", "0")]
    counts = [c.toarray() if scipy.sparse.issparse(c) else c for c in counts]
    assert counts[0].sum() > 0
    np.testing.assert_allclose(counts[0], counts[1], rtol=1e-15)
    np.testing.assert_array_equal(fitted["1"].predict_proba(X), fitted["0"].predict_proba(X))
