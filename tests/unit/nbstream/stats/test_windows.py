"""Sliding windows (``window=N``, ``window_buckets=K``): a windowed model is exactly the model of
the examples in its window, for every family, layout, input and chunking; the window keeps
between N - ceil(N/K) + 1 and N examples; it persists, merges and is validated like any state."""

from __future__ import annotations

import dataclasses
import math
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
from tests.unit.nbstream.persistence.test_snapshot_hostile import entry, refused, seal, split

COUNT_FAMILIES = [nbstream.BernoulliNB, nbstream.MultinomialNB, nbstream.ComplementNB]
FAMILIES = [*COUNT_FAMILIES, nbstream.GaussianNB, nbstream.CategoricalNB]

# Each family with the layouts and inputs it takes: (family, extra parameters, CSR input or not).
CASES = [
    *[(family, {"counts": counts}, csr) for family in COUNT_FAMILIES for counts in ("dense", "sparse")
      for csr in (False, True)],
    (nbstream.BernoulliNB, {"binarize": 1.0, "alpha": 0.5}, False),
    (nbstream.MultinomialNB, {"fit_prior": False}, True),
    (nbstream.ComplementNB, {"norm": True}, False),
    (nbstream.GaussianNB, {}, False),
    (nbstream.GaussianNB, {"var_smoothing": 1e-3}, False),
    (nbstream.CategoricalNB, {}, False),
    (nbstream.CategoricalNB, {"min_categories": 6}, False),
]


def case_id(case) -> str:
    family, params, csr = case
    settings_ = ", ".join(f"{name}={value}" for name, value in params.items())
    return f"{family.__name__}({settings_}){' CSR' if csr else ''}"


def examples_in_window(window: int, n_buckets: int, n_seen: int) -> int:
    """The examples a window holds after n_seen, computed from the definition: bucket j holds
    window // n_buckets examples, one more when j % n_buckets < window % n_buckets; the window is
    the newest bucket (the one the last example went to) and the n_buckets - 1 before it."""
    ends, end, j = [], 0, 0
    while end < n_seen:
        end += window // n_buckets + (j % n_buckets < window % n_buckets)
        ends.append(end)
        j += 1
    first_kept = len(ends) - n_buckets  # the bucket before the oldest kept one ends where the window begins
    return n_seen - (ends[first_kept - 1] if first_kept > 0 else 0)


def data_for(family, rng: np.random.Generator, n_rows: int, n_features: int = 7) -> np.ndarray:
    if family is nbstream.GaussianNB:
        return rng.normal(size=(n_rows, n_features)) * rng.uniform(0.5, 3.0, n_features)
    X = rng.integers(0, 4, size=(n_rows, n_features)) * (rng.random((n_rows, n_features)) < 0.5)
    return X.astype(np.uint8)


def learned(model, X, y, cuts, weights=None):
    """The model after partial_fit on X, y cut at ``cuts`` (sorted row positions)."""
    bounds = [0, *cuts, len(y)]
    for start, stop in zip(bounds, bounds[1:], strict=False):
        if stop > start:
            model.partial_fit(X[start:stop], y[start:stop],
                              sample_weight=None if weights is None else weights[start:stop])
    return model


def fresh_on_last(model, X, y, n_rows: int, weights=None):
    """A model of the same parameters, without window, fitted on the last n_rows rows, with the
    windowed model's classes (so classes whose examples all left are there with count 0)."""
    params = {**model.get_params(), "window": None}
    fresh = type(model)(**params)
    return fresh.partial_fit(X[-n_rows:], y[-n_rows:], classes=model.classes_,
                             sample_weight=None if weights is None else weights[-n_rows:])


def statistics(model) -> dict[str, np.ndarray]:
    """Every statistic a fitted model shows, dense, rows in the order of ``model.classes_``."""
    shown = {"class_count_": model.class_count_}
    if isinstance(model, nbstream.GaussianNB):
        shown.update(theta_=model.theta_, var_=model.var_)
    elif isinstance(model, nbstream.CategoricalNB):
        shown.update({f"category_count_{i}": table for i, table in enumerate(model.category_count_)})
    else:
        counts = model.feature_count_
        shown["feature_count_"] = counts.toarray() if scipy.sparse.issparse(counts) else counts
    return shown


def assert_same_model(windowed, fresh, X) -> None:
    """Same classes in the same rows, the same counts (exactly; Gaussian moments to 1e-9), the same
    joint log-probabilities to 1e-9."""
    order = np.searchsorted(fresh.classes_, windowed.classes_)  # fresh: sorted; windowed: first appearance
    np.testing.assert_array_equal(fresh.classes_[order], windowed.classes_)
    mine, theirs = statistics(windowed), statistics(fresh)
    for name, value in mine.items():
        if name in ("theta_", "var_"):
            np.testing.assert_allclose(value, theirs[name][order], rtol=1e-9, atol=1e-12, err_msg=name)
        else:
            np.testing.assert_array_equal(value, theirs[name][order], err_msg=name)
    np.testing.assert_allclose(windowed.predict_joint_log_proba(X), fresh.predict_joint_log_proba(X)[:, order],
                               rtol=1e-9, atol=1e-9)


@st.composite
def streams(draw):
    """A window, its buckets, a stream of labels met in any order, cuts and maybe weights."""
    n_buckets = draw(st.integers(1, 6))
    window = draw(st.integers(n_buckets, 40))
    n_rows = draw(st.integers(1, 120))
    labels = draw(st.lists(st.sampled_from("abcd"), min_size=n_rows, max_size=n_rows))
    cuts = sorted(draw(st.lists(st.integers(1, max(1, n_rows - 1)), max_size=12)))
    weights = draw(st.none() | st.lists(st.integers(1, 8).map(lambda k: k / 4), min_size=n_rows,
                                         max_size=n_rows))
    return window, n_buckets, np.array(labels), cuts, None if weights is None else np.array(weights)


@settings(max_examples=150, deadline=None)
@given(data=streams(), case=st.sampled_from(CASES), seed=st.integers(0, 2**16))
def test_a_windowed_model_is_a_fresh_fit_on_exactly_the_rows_in_its_window(data, case, seed):
    window, n_buckets, y, cuts, weights = data
    family, params, csr = case
    X = data_for(family, np.random.default_rng(seed), len(y))
    model = learned(family(window=window, window_buckets=n_buckets, **params),
                    scipy.sparse.csr_matrix(X) if csr else X, y, cuts, weights)
    n_kept = model.n_examples_in_window_
    assert n_kept == examples_in_window(window, n_buckets, len(y))
    assert min(len(y), window - math.ceil(window / n_buckets) + 1) <= n_kept <= window
    assert model.n_examples_seen_ == len(y)
    assert_same_model(model, fresh_on_last(model, X, y, n_kept, weights), X)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_one_batch_across_many_buckets_and_fit_keep_only_the_window(case, rng):
    family, params, csr = case
    X, y = data_for(family, rng, 500), rng.choice(["x", "y", "z"], 500)
    Xin = scipy.sparse.csr_matrix(X) if csr else X
    model = family(window=47, window_buckets=5, **params).partial_fit(Xin[:3], y[:3]).partial_fit(Xin[3:], y[3:])
    assert model.n_examples_in_window_ == examples_in_window(47, 5, 500)
    assert_same_model(model, fresh_on_last(model, X, y, model.n_examples_in_window_), X)
    refit = family(window=47, window_buckets=5, **params).fit(Xin, y)
    assert refit.n_examples_in_window_ == examples_in_window(47, 5, 500)
    np.testing.assert_array_equal(refit.predict_joint_log_proba(X), model.predict_joint_log_proba(X))


@pytest.mark.parametrize("window, n_buckets", [(100, 10), (25, 10), (19, 10), (7, 7), (10, 1)])
def test_the_window_stays_between_n_less_a_bucket_and_n(window, n_buckets, rng):
    X, y = rng.integers(0, 3, (1_000, 4)), rng.integers(0, 2, 1_000)
    model = nbstream.MultinomialNB(window=window, window_buckets=n_buckets)
    low = window - math.ceil(window / n_buckets) + 1
    sizes = []
    for start in range(0, 1_000, 3):
        model.partial_fit(X[start:start + 3], y[start:start + 3])
        sizes.append(model.n_examples_in_window_)
        assert sizes[-1] == examples_in_window(window, n_buckets, min(start + 3, 1_000))
    assert min(sizes[window // 3 + 1:]) >= low >= window - window / n_buckets
    assert max(sizes) == window  # reached whenever a bucket fills


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_a_class_whose_examples_all_left_keeps_its_place_with_count_0(family, rng):
    X = data_for(family, rng, 60)
    y = np.array(["gone"] * 10 + ["b", "c"] * 25)
    model = family(window=20, window_buckets=4).partial_fit(X[:10], y[:10])
    for start in range(10, 60, 7):
        model.partial_fit(X[start:start + 7], y[start:start + 7])
    assert model.classes_.tolist() == ["gone", "b", "c"]
    assert model.class_count_.tolist()[0] == 0 and model.class_count_.sum() == model.n_examples_in_window_
    if family is not nbstream.ComplementNB:  # whose scores leave the priors aside, as scikit-learn's do
        assert (model.predict_proba(X)[:, 0] == 0).all()  # a prior of 0, as scikit-learn's for a count of 0
    assert_same_model(model, fresh_on_last(model, X, y, model.n_examples_in_window_), X)


@pytest.mark.parametrize("family, theirs", [(nbstream.MultinomialNB, reference.MultinomialNB),
                                            (nbstream.BernoulliNB, reference.BernoulliNB),
                                            (nbstream.GaussianNB, reference.GaussianNB)])
def test_a_class_of_count_0_gets_scikit_learn_s_numbers(family, theirs, rng):
    X = data_for(family, rng, 80)
    y = np.array([0] * 30 + [1, 2] * 25)
    model = learned(family(window=40, window_buckets=4), X, y, [30, 45, 61])
    n_kept = model.n_examples_in_window_
    with np.errstate(divide="ignore"):  # scikit-learn takes the log of a prior of 0
        sklearn_model = theirs().partial_fit(X[-n_kept:], y[-n_kept:], classes=[0, 1, 2])
        expected = sklearn_model.predict_log_proba(X)
    np.testing.assert_array_equal(model.class_count_, sklearn_model.class_count_)
    np.testing.assert_allclose(model.predict_log_proba(X), expected, rtol=1e-9, atol=1e-9)


# ---- persistence ---------------------------------------------------------------------------------

def windowed_model(family, rng, n_rows: int = 137, **params):
    X, y = data_for(family, rng, n_rows), rng.choice(["a", "b", "c"], n_rows)
    model = learned(family(window=30, window_buckets=4, **params), X, y, [5, 17, 60, 61, 100])
    return model, X, y


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("route", ["save/load", "dumps/loads", "save/load without tables", "state"])
def test_a_snapshot_keeps_the_buckets_and_learns_on_bit_for_bit(family, route, rng, tmp_path):
    model, X, y = windowed_model(family, rng)
    if route == "save/load":
        loaded = nbstream.load(nbstream.save(model, tmp_path / "w.nbs"))
    elif route == "dumps/loads":
        loaded = nbstream.loads(nbstream.dumps(model))[0]
    elif route == "save/load without tables":
        loaded = nbstream.load(nbstream.save(model, tmp_path / "w.nbs", tables=False))
    else:
        loaded = family.from_state(model.export_state())
    assert loaded.get_params() == model.get_params()
    assert (loaded.n_examples_in_window_, loaded.n_examples_seen_) == (model.n_examples_in_window_, 137)
    np.testing.assert_array_equal(loaded.predict_joint_log_proba(X), model.predict_joint_log_proba(X))
    more_X, more_y = data_for(family, rng, 23), rng.choice(["a", "b", "d"], 23)
    for start in range(0, 23, 4):  # across bucket boundaries, with a new class
        for each in (model, loaded):
            each.partial_fit(more_X[start:start + 4], more_y[start:start + 4])
        assert loaded.n_examples_in_window_ == model.n_examples_in_window_
        np.testing.assert_array_equal(loaded.predict_joint_log_proba(X), model.predict_joint_log_proba(X))


@pytest.mark.parametrize("family", COUNT_FAMILIES, ids=lambda f: f.__name__)
def test_a_snapshot_of_a_windowed_text_model_keeps_sparse_counts_sparse(family, rng, tmp_path):
    X = scipy.sparse.random(400, 1 << 17, density=2e-5, format="csr", random_state=2, dtype=np.float64)
    X.data[:] = 1.0
    y = rng.choice(["spam", "ham"], 400)
    model = family(window=100, window_buckets=5).partial_fit(X, y)
    assert model.sparse_counts_
    path = nbstream.save(model, tmp_path / "text.nbs", tables=False)
    assert path.stat().st_size < 40_000  # five buckets of a few hundred pairs, not 5 x 2 x 2^17 counts
    loaded = nbstream.load(path)
    assert loaded.sparse_counts_
    np.testing.assert_array_equal(loaded.predict_joint_log_proba(X[:50]), model.predict_joint_log_proba(X[:50]))


def forged(raw: bytes, array: str | None = None, value=None, header=None) -> bytes:
    """A re-sealed snapshot with one int64 array's values replaced (same length) or its header changed."""
    head, payload = split(raw)
    if array is not None:
        place = entry(head, array)
        replaced = np.asarray(value, dtype="<i8").tobytes()
        payload = payload[:place["offset"]] + replaced + payload[place["offset"] + len(replaced):]
    if header is not None:
        header(head)
    return seal(head, payload)


def with_entry(array: str, **changes):
    return lambda head: entry(head, array).update(**changes)


FORGED_WINDOWS = {
    "a bucket of more examples than its size": dict(array="stats.window.examples", value=[8, 8, 8, 9],
                                                    match="holds 9 examples"),
    "a bucket of no example": dict(array="stats.window.examples", value=[8, 0, 8, 2], match="holds 0 examples"),
    "more examples than seen": dict(header=lambda head: head.update(examples_seen=10), match="more than the 10"),
    "more buckets than the window has": dict(header=lambda head: head["params"].update(window_buckets=2),
                                             match="holds 1 to 2; got 4"),
    "a smaller window": dict(header=lambda head: head["params"].update(window=12), match="holds 8 examples"),
    "no window at all": dict(header=lambda head: head["params"].update(window=None), match="the statistics are"),
    "a place in the cycle beyond it": dict(array="stats.window.cycle", value=[4], match="window.cycle"),
    "no stream": dict(array="stats.window.streams", value=[0], match="window.streams"),
    "a bucket of another shape": dict(header=with_entry("stats.bucket1.class_count", shape=[2]),
                                      match="class_count has shape"),
    "a bucket missing": dict(header=lambda head: head.update(arrays=[e for e in head["arrays"]
                                                                     if not e["name"].startswith("stats.bucket3.")]),
                             match="the statistics are"),
    "a bucket beyond the window's": dict(header=with_entry("stats.bucket3.class_count",
                                                           name="stats.bucket4.class_count"),
                                         match="belong to no bucket"),
    "examples of another dtype": dict(header=with_entry("stats.window.examples", dtype="<f8"),
                                      match="window.examples must be a list of integers"),
}


@pytest.mark.parametrize("forgery", sorted(FORGED_WINDOWS))
@pytest.mark.parametrize("family", [nbstream.MultinomialNB, nbstream.GaussianNB], ids=lambda f: f.__name__)
def test_a_forged_window_is_refused_in_one_line(forgery, family, rng, tmp_path):
    X, y = data_for(family, rng, 58), rng.choice(["a", "b", "c"], 58)
    model = learned(family(window=32, window_buckets=4), X, y, [13, 40])
    assert model.export_state().statistics["window.examples"].tolist() == [8, 8, 8, 2]
    spec = dict(FORGED_WINDOWS[forgery])
    match = spec.pop("match")
    message = refused(tmp_path, forged(nbstream.dumps(model, tables=False), **spec))
    assert match in message and "\n" not in message


def test_a_forged_state_is_refused_by_from_state(rng):
    model, _, _ = windowed_model(nbstream.MultinomialNB, rng)
    state = model.export_state(tables=False)
    too_many = {**state.statistics, "window.examples": np.array([8, 8, 8, 8, 8])}
    with pytest.raises(ValueError, match="a window of 4 buckets holds 1 to 4; got 5"):
        nbstream.MultinomialNB.from_state(dataclasses.replace(state, statistics=too_many))
    other_shape = {**state.statistics, "bucket1.feature_count": np.zeros((3, 5))}
    with pytest.raises(ValueError, match=r"feature_count has shape \(3, 5\); expected \(3, 7\)"):
        nbstream.MultinomialNB.from_state(dataclasses.replace(state, statistics=other_shape))
    buckets_of_two_layouts = {name: array for name, array in state.statistics.items() if name.startswith("window.")}
    for i in range(4):
        bucket = nbstream.MultinomialNB(counts="sparse" if i == 2 else "dense").fit(
            np.eye(7, dtype=int)[:3], ["a", "b", "c"]).export_state().statistics
        buckets_of_two_layouts.update({f"bucket{i}.{name}": array for name, array in bucket.items()})
    with pytest.raises(ValueError, match="one layout"):
        nbstream.MultinomialNB.from_state(dataclasses.replace(state, statistics=buckets_of_two_layouts))


def test_a_windowed_snapshot_needs_no_new_format_version(rng):
    model, _, _ = windowed_model(nbstream.MultinomialNB, rng)
    raw = nbstream.dumps(model)
    assert raw[7] == 2
    head, _ = split(raw)
    assert {"stats.window.examples", "stats.bucket0.class_count", "stats.bucket3.feature_count"} <= {
        e["name"] for e in head["arrays"]}


@pytest.mark.parametrize("counts", ["dense", "sparse"])
def test_a_window_holds_k_plus_1_statistics_however_long_the_stream(counts):
    n_features, n_buckets = 40_000, 4
    table = 3 * n_features * 8  # bytes of one dense (n_classes, n_features) table
    X = scipy.sparse.random(2_000, n_features, density=5e-4, format="csr", random_state=3)
    y = np.arange(2_000) % 3
    model = nbstream.MultinomialNB(window=1_000, window_buckets=n_buckets, counts=counts)
    held = []
    tracemalloc.start()
    for _ in range(3):  # the same rows again and again: the window never holds more
        for start in range(0, 2_000, 250):
            model.partial_fit(X[start:start + 250], y[start:start + 250])
            model.predict(X[:5])
        held.append(tracemalloc.get_traced_memory()[0])
    tracemalloc.stop()
    assert max(held) < held[0] * 1.1
    if counts == "dense":  # K buckets, their merge, and the two tables a dense model predicts with
        assert held[-1] < (n_buckets + 1 + 2) * table * 1.05
    else:  # a bucket of 250 rows holds some 5,000 pairs, not a table
        assert held[-1] < 2 * table


# ---- merge ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_merged_windows_are_the_model_of_the_union_of_both_windows(case, rng):
    family, params, csr = case
    as_input = scipy.sparse.csr_matrix if csr else np.asarray
    X1, y1 = data_for(family, rng, 90), rng.choice(["a", "b"], 90)
    X2, y2 = data_for(family, rng, 57), rng.choice(["b", "c"], 57)
    first = learned(family(window=30, window_buckets=4, **params), as_input(X1), y1, [11, 50])
    second = learned(family(window=30, window_buckets=4, **params), as_input(X2), y2, [20])
    n1, n2 = first.n_examples_in_window_, second.n_examples_in_window_
    merged = first.merge(second)
    assert merged.n_examples_in_window_ == n1 + n2 and merged.n_examples_seen_ == 147
    X, y = np.vstack([X1[-n1:], X2[-n2:]]), np.r_[y1[-n1:], y2[-n2:]]
    assert_same_model(merged, fresh_on_last(merged, X, y, len(y)), X)
    # learning on, the merged buckets leave the window one by one (new buckets follow the sizes of
    # the model merged into): after a window of new examples, the model is theirs alone
    X3, y3 = data_for(family, rng, 40), rng.choice(["a", "c"], 40)
    learned(merged, as_input(X3), y3, [9, 10, 33])
    assert merged.n_examples_in_window_ == examples_in_window(30, 4, 90 + 40)
    assert_same_model(merged, fresh_on_last(merged, X3, y3, merged.n_examples_in_window_), X3)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_a_window_merged_into_a_model_that_has_not_learned_is_that_window(family, rng):
    model, X, _ = windowed_model(family, rng)
    merged = family(window=30, window_buckets=4).merge(model)
    assert merged.n_examples_in_window_ == model.n_examples_in_window_
    np.testing.assert_array_equal(merged.predict_joint_log_proba(X), model.predict_joint_log_proba(X))
    doubled = family.from_state(model.export_state()).merge(model)
    assert doubled.n_examples_in_window_ == 2 * model.n_examples_in_window_
    np.testing.assert_array_equal(doubled.class_count_, 2 * model.class_count_)
    assert nbstream.loads(nbstream.dumps(doubled))[0].n_examples_in_window_ == doubled.n_examples_in_window_


@pytest.mark.parametrize("other", [{"window": None}, {"window": 31}, {"window_buckets": 5}],
                         ids=["no window", "another N", "another K"])
def test_windows_of_other_parameters_or_none_are_not_merged(other, rng):
    model, X, y = windowed_model(nbstream.MultinomialNB, rng)
    theirs = nbstream.MultinomialNB(**{**model.get_params(), **other}).fit(X, y)
    for into, merged in ((model, theirs), (theirs, model)):
        with pytest.raises(ValueError, match="parameters differ"):
            into.merge(merged)


def test_windows_of_dense_and_sparse_counts_are_not_merged_and_nothing_changes(rng):
    dense, X, _ = windowed_model(nbstream.MultinomialNB, rng, counts="dense")
    sparse, _, _ = windowed_model(nbstream.MultinomialNB, rng, counts="sparse")
    sparse.partial_fit(X[:2], ["new", "new"])
    before = dense.predict_joint_log_proba(X)
    with pytest.raises(ValueError, match="held differently .*same counts") as caught:
        dense.merge(sparse)
    assert "\n" not in str(caught.value)
    assert "new" not in dense.classes_  # refused before the other's classes were added
    np.testing.assert_array_equal(dense.predict_joint_log_proba(X), before)
    # a window that holds nothing takes the other's layout
    assert nbstream.MultinomialNB(window=30, window_buckets=4, counts="dense").merge(sparse).sparse_counts_


# ---- keep_newest ---------------------------------------------------------------------------------

def buckets_in_window(window: int, n_buckets: int, n_seen: int) -> list[int]:
    """The examples of each bucket a window holds after n_seen, oldest first, from the definition
    (as ``examples_in_window``)."""
    sizes, seen, j = [], 0, 0
    while seen < n_seen:
        size = min(window // n_buckets + (j % n_buckets < window % n_buckets), n_seen - seen)
        sizes.append(size)
        seen, j = seen + size, j + 1
    return sizes[-n_buckets:]


def examples_kept(sizes: list[int], n_examples: int) -> int:
    """The examples of the buckets holding any of the newest n_examples (the newest bucket always)."""
    kept = sizes[-1]
    for size in reversed(sizes[:-1]):
        if kept >= n_examples:
            break
        kept += size
    return kept


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_keep_newest_leaves_a_fresh_fit_on_the_buckets_kept(case, rng):
    family, params, csr = case
    as_input = scipy.sparse.csr_matrix if csr else np.asarray
    X, y, weights = data_for(family, rng, 137), rng.choice(["a", "b", "c"], 137), rng.integers(1, 9, 137) / 4
    sizes = buckets_in_window(30, 4, 137)
    for n_examples in (0, 1, sizes[-1], sizes[-1] + 1, 17, 29, 30, 1_000):
        model = learned(family(window=30, window_buckets=4, **params), as_input(X), y, [5, 17, 60, 61, 100],
                        weights)
        model.predict(X[:3])  # the tables the model had must not outlive the buckets dropped
        assert model.keep_newest(n_examples) is model
        kept = examples_kept(sizes, n_examples)
        assert model.n_examples_in_window_ == kept and model.n_examples_seen_ == 137
        assert n_examples <= kept < n_examples + max(sizes) or kept == sum(sizes)
        assert_same_model(model, fresh_on_last(model, X, y, kept, weights), X)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_a_window_kept_to_its_newest_learns_on_and_persists_as_any(family, rng, tmp_path):
    model, X, y = windowed_model(family, rng)
    model.keep_newest(0)
    loaded = nbstream.loads(nbstream.dumps(model))[0]
    assert loaded.n_examples_in_window_ == model.n_examples_in_window_ == buckets_in_window(30, 4, 137)[-1]
    np.testing.assert_array_equal(loaded.predict_joint_log_proba(X), model.predict_joint_log_proba(X))
    more_X, more_y = data_for(family, rng, 45), rng.choice(["a", "b"], 45)
    for each in (model, loaded):
        learned(each, more_X, more_y, [3, 20])
    # the buckets kept leave the window as new ones fill it: then it holds new examples alone
    assert model.n_examples_in_window_ == loaded.n_examples_in_window_ == examples_in_window(30, 4, 137 + 45)
    assert_same_model(model, fresh_on_last(model, more_X, more_y, model.n_examples_in_window_), more_X)
    np.testing.assert_array_equal(loaded.predict_joint_log_proba(X), model.predict_joint_log_proba(X))


def test_keep_newest_on_a_merged_window_keeps_the_newest_buckets_of_both(rng):
    first, X1, y1 = windowed_model(nbstream.GaussianNB, rng)
    X2, y2 = data_for(nbstream.GaussianNB, rng, 50), rng.choice(["b", "d"], 50)
    second = learned(nbstream.GaussianNB(window=30, window_buckets=4), X2, y2, [20])
    newest1, newest2 = buckets_in_window(30, 4, 137)[-1], buckets_in_window(30, 4, 50)[-1]
    merged = first.merge(second).keep_newest(1)
    assert merged.n_examples_in_window_ == newest1 + newest2
    X, y = np.vstack([X1[-newest1:], X2[-newest2:]]), np.r_[y1[-newest1:], y2[-newest2:]]
    assert_same_model(merged, fresh_on_last(merged, X, y, len(y)), X)


def test_keep_newest_needs_a_window_and_a_count(rng):
    X, y = rng.integers(0, 3, (40, 4)), rng.integers(0, 2, 40)
    with pytest.raises(ValueError, match="keep_newest needs a model with a window; .* window=None") as caught:
        nbstream.MultinomialNB().fit(X, y).keep_newest(10)
    assert "\n" not in str(caught.value)
    windowed = nbstream.MultinomialNB(window=20, window_buckets=4).fit(X, y)
    for bad in (-1, 2.0, True, "3", None):
        with pytest.raises(ValueError, match="keep_newest takes an integer >= 0"):
            windowed.keep_newest(bad)
    assert windowed.n_examples_in_window_ == 20
    assert windowed.keep_newest(np.int64(6)).n_examples_in_window_ == 10
    unfitted = nbstream.MultinomialNB(window=20, window_buckets=4)
    assert unfitted.keep_newest(5) is unfitted and not unfitted.is_fitted


# ---- parameters ------------------------------------------------------------------------------------

@pytest.mark.parametrize("params, match", [
    ({"window": 10, "half_life": 50.0}, "half_life and window cannot be used together"),
    ({"window": 5}, r"window must be None or an integer >= window_buckets \(10\); got 5"),
    ({"window": 100.0}, "window must be None or an integer"),
    ({"window": True, "window_buckets": 1}, "window must be None or an integer"),
    ({"window": "100"}, "window must be None or an integer"),
    ({"window": 100, "window_buckets": 0}, "window_buckets must be an integer >= 1"),
    ({"window": 100, "window_buckets": 2.5}, "window_buckets must be an integer >= 1"),
    ({"window_buckets": None}, "window_buckets must be an integer >= 1"),
])
@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_invalid_window_parameters_are_refused_in_one_line(family, params, match, rng):
    X, y = data_for(family, rng, 10), rng.choice(["a", "b"], 10)
    with pytest.raises(ValueError, match=match) as caught:
        family(**params).partial_fit(X, y)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_the_window_parameters_are_in_every_signature_and_accept_numpy_integers(family, rng):
    names = family.param_names()
    assert names.index("window") == names.index("half_life") + 1
    assert names.index("window_buckets") == names.index("window") + 1
    assert family().get_params()["window"] is None and family().get_params()["window_buckets"] == 10
    X, y = data_for(family, rng, 30), rng.choice(["a", "b"], 30)
    assert family(window=np.int64(12), window_buckets=np.int32(3)).fit(X, y).n_examples_in_window_ == 10  # 4 + 4 + 2


def test_a_model_without_window_holds_every_example(rng):
    model = nbstream.MultinomialNB().partial_fit(rng.integers(0, 3, (40, 4)), rng.integers(0, 2, 40))
    assert model.n_examples_in_window_ == model.n_examples_seen_ == 40


def test_the_window_cannot_change_once_a_model_has_learned_but_fit_starts_afresh(rng):
    X, y = rng.integers(0, 3, (60, 4)), rng.integers(0, 2, 60)
    model = nbstream.MultinomialNB(window=20, window_buckets=4).fit(X, y)
    model.set_params(window=40)
    for refused_call in (lambda: model.partial_fit(X, y), lambda: nbstream.dumps(model),
                         lambda: model.merge(nbstream.MultinomialNB(window=40, window_buckets=4).fit(X, y))):
        with pytest.raises(ValueError, match="window and window_buckets cannot change once a model has learned"):
            refused_call()
    assert model.fit(X, y).n_examples_in_window_ == 40
    unwindowed = nbstream.MultinomialNB(window=20, window_buckets=4).fit(X, y).set_params(window=None)
    assert unwindowed.predict(X).shape == (60,)  # predicting changes nothing the window holds


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_a_refused_batch_changes_no_bucket(family, rng):
    model, X, y = windowed_model(family, rng)
    before = model.export_state(tables=False)
    bad = np.array(X[:5], dtype=np.float64)
    bad[2, 1] = np.nan
    with pytest.raises(ValueError):
        model.partial_fit(bad, y[:5])
    after = model.export_state(tables=False)
    assert after.statistics.keys() == before.statistics.keys()
    for name, array in before.statistics.items():
        np.testing.assert_array_equal(after.statistics[name], array, err_msg=name)


def test_categorical_recoding_applies_to_every_bucket(rng):
    X, y = rng.integers(0, 3, (50, 2)), rng.choice(["a", "b"], 50)
    model = learned(nbstream.CategoricalNB(window=20, window_buckets=4), X, y, [7, 30])
    swapped = [np.array([2, 1, 0]), np.array([0, 1, 2])]
    model.recode_categories(swapped)
    X_recoded = X.copy()
    X_recoded[:, 0] = 2 - X[:, 0]
    assert_same_model(model, fresh_on_last(model, X_recoded, y, model.n_examples_in_window_), X_recoded)
    model.partial_fit(X_recoded[:9], y[:9])  # after a new bucket or two, still consistent
    assert model.n_examples_in_window_ == examples_in_window(20, 4, 59)
    with pytest.raises(ValueError, match="no new code"):
        model.recode_categories([np.array([0, 1]), np.array([0, 1, 2])])
    assert_same_model(model, fresh_on_last(model, np.vstack([X_recoded, X_recoded[:9]]), np.r_[y, y[:9]],
                                           model.n_examples_in_window_), X_recoded)


# ---- scikit-learn's estimator checks -----------------------------------------------------------

def _expected_failures(estimator) -> dict[str, str]:
    from tests.unit.nbstream.interop.test_sklearn_conformance import ESTIMATOR_CHECK_DEVIATIONS

    return ESTIMATOR_CHECK_DEVIATIONS.get(type(estimator).__name__, {})


with warnings.catch_warnings():  # the models speak the protocol without inheriting from BaseEstimator
    warnings.filterwarnings("ignore", message="Estimator .* does not inherit from")
    # windows of 100-example buckets, larger than the checks' data sets: their models are those of all rows
    _WINDOWED_ESTIMATOR_CHECKS = parametrize_with_checks([family(window=1_000) for family in FAMILIES],
                                                         expected_failed_checks=_expected_failures)


@_WINDOWED_ESTIMATOR_CHECKS
def test_scikit_learn_estimator_checks_with_a_window(estimator, check):
    check(estimator)
