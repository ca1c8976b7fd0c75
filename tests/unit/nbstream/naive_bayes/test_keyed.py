"""KeyedNB: a model per key, backed off to the group's model, against scikit-learn and by hand."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn import naive_bayes as sk

import nbstream
from nbstream import BernoulliNB, ComplementNB, KeyedNB, MultinomialNB
from tests.unit.nbstream.persistence.test_snapshot_hostile import seal, split

FAMILIES = {"bernoulli": (BernoulliNB, sk.BernoulliNB), "multinomial": (MultinomialNB, sk.MultinomialNB),
            "complement": (ComplementNB, sk.ComplementNB)}
CLASSES = [0, 1, 2]


def stream(seed: int = 0, n: int = 600, n_features: int = 30, n_keys: int = 7):
    rng = np.random.default_rng(seed)
    return (rng.poisson(0.6, (n, n_features)), rng.integers(0, 3, n), rng.integers(0, n_keys, n),
            rng.poisson(0.6, (60, n_features)), rng.integers(0, n_keys + 3, 60))


def learned(keyed: KeyedNB, X, y, keys, batch: int = 150, classes=None) -> KeyedNB:
    for start in range(0, X.shape[0], batch):
        keyed.partial_fit(X[start:start + batch], y[start:start + batch], keys=keys[start:start + batch],
                          classes=classes if start == 0 else None)
    return keyed


@pytest.mark.parametrize(("family", "sparse", "params"), list(itertools.product(
    FAMILIES, (False, True), ({"alpha": 0.5}, {"alpha": 1.0, "fit_prior": False}, {"alpha": 0.2, "norm": True}))))
def test_with_prior_weight_0_each_key_is_its_own_fit(family, sparse, params):
    if "norm" in params and family != "complement":
        pytest.skip("norm is ComplementNB's")
    ours, theirs = FAMILIES[family]
    X, y, keys, X_test, test_keys = stream()
    if sparse:
        X, X_test = sp.csr_matrix(X), sp.csr_matrix(X_test)
    keyed = learned(KeyedNB(ours(**params), prior_weight=0), X, y, keys, classes=CLASSES)
    probabilities = keyed.predict_proba(X_test, keys=test_keys)
    for key in np.unique(keys):
        alone = theirs(**params).partial_fit(X[keys == key], y[keys == key], classes=CLASSES)
        rows = test_keys == key
        np.testing.assert_allclose(probabilities[rows], alone.predict_proba(X_test[rows]), rtol=1e-9, atol=1e-12)
    assert keyed.predict(X_test, keys=test_keys).tolist() == probabilities.argmax(axis=1).tolist()


@pytest.mark.parametrize("family", FAMILIES)
def test_the_group_is_the_unkeyed_fit_and_answers_keys_never_seen(family):
    ours, _ = FAMILIES[family]
    X, y, keys, X_test, _ = stream(1)
    keyed = learned(KeyedNB(ours(), prior_weight=4), X, y, keys)
    unkeyed = ours()
    for start in range(0, 600, 150):
        unkeyed.partial_fit(X[start:start + 150], y[start:start + 150])
    np.testing.assert_array_equal(keyed.group_model_.predict_joint_log_proba(X_test),
                                  unkeyed.predict_joint_log_proba(X_test))
    never = np.full(len(X_test), 99)
    np.testing.assert_array_equal(keyed.predict_proba(X_test, keys=never), unkeyed.predict_proba(X_test))
    assert keyed.key_examples([0, 99]).tolist() == [int((keys == 0).sum()), 0]
    assert keyed.n_keys_ == 7 and keyed.n_examples_seen_ == 600


def test_a_key_backs_off_to_the_group_by_the_documented_formula():
    X, y, keys, X_test, _ = stream(2, n_features=12)
    m, alpha = 5.0, 0.5
    keyed = learned(KeyedNB(MultinomialNB(alpha=alpha), prior_weight=m), X, y, keys, classes=CLASSES)
    group = MultinomialNB(alpha=alpha).fit(X, y)
    pi = group.class_count_ / group.class_count_.sum()
    units = group.feature_count_.sum(axis=1) / group.class_count_  # L_c: the mean row sum of class c
    theta = np.exp(group.feature_log_prob_)
    mine = keys == 3
    n_kc = np.array([(y[mine] == c).sum() for c in CLASSES])
    n_kcf = np.array([X[mine][y[mine] == c].sum(axis=0) for c in CLASSES])
    pseudo = (m * pi * units)[:, None] * theta
    log_theta = np.log(n_kcf + pseudo + alpha) - np.log((n_kcf + pseudo + alpha).sum(axis=1, keepdims=True))
    log_prior = np.log(n_kc + m * pi) - np.log(n_kc.sum() + m)
    expected = X_test @ log_theta.T + log_prior
    np.testing.assert_allclose(keyed.predict_joint_log_proba(X_test, keys=[3] * len(X_test)), expected, rtol=1e-12)


@pytest.mark.parametrize(("family", "m", "sparse", "params"), list(itertools.product(
    FAMILIES, (0.0, 0.7, 25.0), (False, True),
    ({}, {"fit_prior": False}, {"alpha": 0.3}, {"class_prior": [0.2, 0.5, 0.3]}, {"alpha": "per feature"},
     {"norm": True}))))
def test_the_fast_scores_are_those_of_each_keys_own_model(family, m, sparse, params):
    ours, _ = FAMILIES[family]
    if "norm" in params and family != "complement":
        pytest.skip("norm is ComplementNB's")
    if params.get("alpha") == "per feature":
        if sparse:
            pytest.skip("sparse counts take one alpha")
        params = {"alpha": np.linspace(0.1, 2, 30)}
    X, y, keys, X_test, test_keys = stream(3)
    if sparse:
        X, X_test = sp.csr_matrix(X), sp.csr_matrix(X_test)
    keyed = learned(KeyedNB(ours(**params), prior_weight=m), X, y, keys)
    fast = keyed.predict_joint_log_proba(X_test, keys=test_keys)
    slow = np.vstack([keyed.key_model(key).predict_joint_log_proba(X_test[i:i + 1])
                      for i, key in enumerate(test_keys.tolist())])
    np.testing.assert_allclose(fast, slow, rtol=1e-10)


def test_text_counts_held_sparse_score_as_dense_ones():
    rng = np.random.default_rng(4)
    n_features = 1 << 17  # sparse counts: the shared tables live at the group's pairs
    X = sp.random(800, n_features, density=2e-4, random_state=4, format="csr", data_rvs=lambda k: rng.integers(1, 4, k))
    y, keys = rng.choice(["spam", "ham"], 800), rng.integers(0, 300, 800)
    sparse = learned(KeyedNB(MultinomialNB(counts="sparse"), prior_weight=3), X, y, keys, batch=200)
    dense = learned(KeyedNB(MultinomialNB(counts="dense"), prior_weight=3), X, y, keys, batch=200)
    test_keys = rng.integers(0, 350, 200)
    np.testing.assert_allclose(sparse.predict_joint_log_proba(X[:200], keys=test_keys),
                               dense.predict_joint_log_proba(X[:200], keys=test_keys), rtol=1e-10)


def test_classes_and_keys_arriving_mid_stream_and_one_key_twice_in_a_batch():
    keyed = KeyedNB(MultinomialNB(), prior_weight=0)
    keyed.partial_fit([[1, 0], [0, 1]], ["a", "b"], keys=["ann", "ann"])
    keyed.partial_fit([[2, 1], [1, 1], [0, 3]], ["c", "c", "a"], keys=["bob", "bob", "ann"])
    assert keyed.classes_.tolist() == ["a", "b", "c"]
    alone = sk.MultinomialNB().partial_fit([[1, 0], [0, 1], [0, 3]], ["a", "b", "a"], classes=["a", "b", "c"])
    np.testing.assert_allclose(keyed.predict_proba([[1, 2]], keys=["ann"]), alone.predict_proba([[1, 2]]),
                               rtol=1e-12)
    assert keyed.key_examples(["ann", "bob"]).tolist() == [3, 2]


def test_merged_halves_are_the_model_of_the_whole():
    X, y, keys, X_test, test_keys = stream(5)
    whole = learned(KeyedNB(BernoulliNB(), prior_weight=2), X, y, keys)
    first = learned(KeyedNB(BernoulliNB(), prior_weight=2), X[:300], y[:300], keys[:300])
    second = learned(KeyedNB(BernoulliNB(), prior_weight=2), X[300:], y[300:], keys[300:])
    first.merge(second)
    np.testing.assert_allclose(first.predict_joint_log_proba(X_test, keys=test_keys),
                               whole.predict_joint_log_proba(X_test, keys=test_keys), rtol=1e-12)
    assert first.n_keys_ == whole.n_keys_ and first.n_examples_seen_ == 600
    with pytest.raises(ValueError, match="prior_weight"):
        first.merge(KeyedNB(BernoulliNB(), prior_weight=3).partial_fit(X[:5], y[:5], keys[:5]))


def test_how_the_pairs_are_cut_into_runs_changes_no_number():
    X, y, keys, X_test, test_keys = stream(6)
    many_runs = learned(KeyedNB(MultinomialNB(), prior_weight=1), X, y, keys, batch=7)
    one_run = learned(KeyedNB(MultinomialNB(), prior_weight=1), X, y, keys, batch=600)
    np.testing.assert_allclose(many_runs.predict_joint_log_proba(X_test, keys=test_keys),
                               one_run.predict_joint_log_proba(X_test, keys=test_keys), rtol=1e-13)
    state = many_runs.export_state().statistics
    assert state["pair_count"].tolist() == one_run.export_state().statistics["pair_count"].tolist()


def test_a_key_holds_only_the_pairs_it_saw():
    X = sp.csr_matrix(([1.0, 2.0, 1.0], ([0, 0, 1], [5, 900_000, 7])), shape=(2, 1 << 20))
    keyed = KeyedNB(MultinomialNB()).partial_fit(X, ["a", "b"], keys=["ann", "bob"])
    state = keyed.export_state()
    assert state.statistics["pair_feature"].tolist() == [5, 900_000, 7]
    assert state.statistics["pair_end"].tolist() == [2, 3]


def test_explanations_add_up_and_a_key_never_seen_is_explained_by_the_group():
    X, y, keys, X_test, test_keys = stream(7)
    keyed = learned(KeyedNB(MultinomialNB(), prior_weight=3), X, y, keys)
    explained = keyed.explain(X_test, keys=test_keys, top=None)
    np.testing.assert_allclose(explained.prior + explained.contributions.sum(axis=1), explained.log_odds, rtol=1e-9)
    assert explained.predicted.tolist() == keyed.predict_proba(X_test, keys=test_keys).argmax(axis=1).tolist()
    never = test_keys >= 7
    group = keyed.group_model_.explain(X_test[never], top=None)
    np.testing.assert_allclose(explained.log_odds[never], group.log_odds, rtol=1e-12)


@pytest.mark.parametrize("keys", [["ann", "bob", "čé", "\ud800x"], [3, -2**63, 2**63 - 1, 0]])
def test_a_snapshot_keeps_every_key_and_load_reads_the_group(tmp_path, keys):
    rng = np.random.default_rng(8)
    X, y = rng.poisson(1, (200, 10)), rng.choice(["a", "b"], 200)
    row_keys = [keys[i % 4] for i in range(200)]
    keyed = KeyedNB(ComplementNB(norm=True), prior_weight=1.5).partial_fit(X, y, keys=row_keys)
    path = nbstream.save(keyed, tmp_path / "keyed.nbs")
    loaded = nbstream.load_keyed(path)
    assert loaded.keys() == keys and loaded.prior_weight == 1.5
    np.testing.assert_array_equal(loaded.predict_joint_log_proba(X[:20], keys=row_keys[:20]),
                                  keyed.predict_joint_log_proba(X[:20], keys=row_keys[:20]))
    np.testing.assert_array_equal(nbstream.load(path).predict_proba(X[:5]), keyed.group_model_.predict_proba(X[:5]))
    loaded.partial_fit(X[:3], y[:3], keys=row_keys[:3])  # keeps learning
    assert loaded.key_examples(keys[:1]).tolist() == [51]


def test_a_plain_snapshot_is_not_a_keyed_one(tmp_path):
    path = nbstream.save(MultinomialNB().fit([[1, 2]], ["a"]), tmp_path / "plain.nbs")
    with pytest.raises(nbstream.SnapshotError, match="not a snapshot of a keyed model"):
        nbstream.load_keyed(path)


def _forged(raw: bytes, change) -> bytes:
    header, payload = split(raw)
    change(header, payload)
    return seal(header, payload)


def _set_array(name, values):
    def change(header, payload):
        entry = next(e for e in header["arrays"] if e["name"] == name)
        data = np.asarray(values, dtype=entry["dtype"]).tobytes()
        payload[entry["offset"]:entry["offset"] + len(data)] = data
    return change


FORGERIES = {
    "more keys than stored": (lambda h, p: h["keyed"].update(n_keys=10**12), "key"),
    "keys of another type": (lambda h, p: h["keyed"].update(keys="float"), "'str' or 'int'"),
    "a negative prior weight": (lambda h, p: h["keyed"].update(prior_weight=-1), "prior_weight"),
    "a prior weight that is text": (lambda h, p: h["keyed"].update(prior_weight="1"), "prior_weight"),
    "pairs ending beyond the pairs": (_set_array("keyed.pair_end", [1, 99]), "pair_end"),
    "pairs out of order": (_set_array("keyed.pair_feature", [2, 0, 1, 3]), "sorted"),
    "a pair beyond the features": (_set_array("keyed.pair_feature", [1, 2, 3, 2**30]), "inside"),
    "negative counts": (_set_array("keyed.pair_count", [-1.0, 1.0, 1.0, 1.0]), "finite and >= 0"),
    "examples not adding up": (_set_array("keyed.examples", [5, 5]), "add up"),
    "a key that is not UTF-8": (_set_array("keyed.key_text", [0xFF]), "UTF-8"),
    "the same key twice": (_set_array("keyed.key_text", list(b"aa")), "distinct"),
}


@pytest.mark.parametrize("forgery", FORGERIES)
def test_forged_keyed_snapshots_are_refused_in_one_line(forgery):
    X = np.array([[1, 0, 1, 0], [0, 1, 0, 1]])
    raw = bytearray(nbstream.dumps(KeyedNB(MultinomialNB()).partial_fit(X, ["x", "y"], keys=["a", "b"])))
    header, payload = split(bytes(raw))
    payload = bytearray(payload)
    change, message = FORGERIES[forgery]
    change(header, payload)
    with pytest.raises(nbstream.SnapshotError, match=message) as caught:
        nbstream.loads_keyed(seal(header, bytes(payload)))
    assert "\n" not in str(caught.value)


BAD_KEYS = {
    "too few keys": (["a"], "one key per sample"),
    "a float key": ([1.5, 2.0], "string or an integer"),
    "a bool key": ([True, False], "string or an integer"),
    "a missing key": (["a", None], "string or an integer"),
    "strings and integers": (["a", 1], "all strings or all integers"),
}


@pytest.mark.parametrize("case", BAD_KEYS)
def test_bad_keys_alone_are_refused_and_change_nothing(case):
    keyed = KeyedNB().partial_fit([[1, 2]], ["a"], keys=["ann"])
    keys, message = BAD_KEYS[case]
    with pytest.raises(ValueError, match=message):
        keyed.partial_fit([[1, 0], [0, 1]], ["a", "b"], keys=keys)
    assert keyed.n_examples_seen_ == 1 and keyed.group_model_.n_examples_seen_ == 1
    with pytest.raises(ValueError, match="keys are strs"):
        keyed.partial_fit([[1, 0]], ["a"], keys=[7])


@pytest.mark.parametrize("ask", ["predict_proba", "predict", "explain", "key_model"])
def test_a_key_of_another_type_is_refused_when_asked_not_taken_for_a_key_never_seen(ask):
    keyed = KeyedNB().partial_fit([[1, 2]], ["a"], keys=["7"])
    with pytest.raises(ValueError, match="this model's keys are strs; got the int key 7"):
        keyed.key_model(7) if ask == "key_model" else getattr(keyed, ask)([[1, 0]], keys=[7])


@pytest.mark.parametrize(("keyed", "message"), [
    (KeyedNB(nbstream.GaussianNB()), "one of"),
    (KeyedNB(nbstream.CategoricalNB()), "one of"),
    (KeyedNB(MultinomialNB(half_life=10)), "does not forget"),
    (KeyedNB(MultinomialNB(window=10)), "does not forget"),
    (KeyedNB(prior_weight=-1), "prior_weight"),
    (KeyedNB(prior_weight=float("nan")), "prior_weight"),
    (KeyedNB(prior_weight=float("inf")), "prior_weight"),
    (KeyedNB(prior_weight=True), "prior_weight"),
    (KeyedNB("multinomial"), "nbstream model"),
])
def test_models_that_cannot_be_keyed_are_refused(keyed, message):
    with pytest.raises(ValueError, match=message):
        keyed.partial_fit([[1, 2]], ["a"], keys=["ann"])


def test_asking_before_learning_is_not_fitted():
    with pytest.raises(nbstream.NotFittedError):
        KeyedNB().predict([[1]], keys=["a"])


@pytest.mark.parametrize(("family", "n_keys", "sparse"), [(family, n_keys, sparse) for family in FAMILIES
                                                           for n_keys in (200, 5, 1) for sparse in (False, True)])
def test_test_then_train_sees_each_keys_earlier_rows_and_the_group_before_the_batch(family, n_keys, sparse):
    ours, _ = FAMILIES[family]
    X, y, keys, _, _ = stream(9, n=400, n_keys=n_keys)  # 200 keys: few rounds; 5 and 1: a multinomial in bulk
    if sparse:
        X = sp.csr_matrix(X)
    keyed = KeyedNB(ours(), prior_weight=3).partial_fit(X[:100], y[:100], keys=keys[:100], classes=CLASSES)
    reference = KeyedNB(ours(), prior_weight=3).partial_fit(X[:100], y[:100], keys=keys[:100], classes=CLASSES)
    group_before = KeyedNB(ours(), prior_weight=3).partial_fit(X[:100], y[:100], keys=keys[:100], classes=CLASSES)
    classes, proba = keyed.predict_then_learn(X[100:], y[100:], keys[100:])
    assert classes.tolist() == CLASSES
    for i in range(100, 400):  # row by row: the key's counts grow, the group stays as before the batch
        expected = reference.predict_proba(X[i:i + 1], keys=keys[i:i + 1])
        np.testing.assert_allclose(proba[i - 100], expected[0], rtol=1e-9)
        row = X[i:i + 1]
        reference._keys.update(row > 0 if family == "bernoulli" else row, y[i:i + 1], None, [int(keys[i])])
        reference._learned()
        reference._tables = group_before._backoff()
    whole = learned(KeyedNB(ours(), prior_weight=3), X, y, keys, batch=100, classes=CLASSES)
    np.testing.assert_allclose(keyed.predict_joint_log_proba(X[:50], keys=keys[:50]),
                               whole.predict_joint_log_proba(X[:50], keys=keys[:50]), rtol=1e-12)


def test_a_dropped_key_is_answered_by_the_group_and_the_others_keep_their_counts():
    X, y, keys, X_test, _ = stream(10)
    keyed = learned(KeyedNB(MultinomialNB(), prior_weight=2), X, y, keys)
    before = keyed.predict_joint_log_proba(X_test[:5], keys=[1] * 5)
    keyed.drop_keys([0])
    assert 0 not in keyed.keys() and keyed.n_keys_ == 6
    np.testing.assert_allclose(keyed.predict_joint_log_proba(X_test[:5], keys=[0] * 5),
                               keyed.group_model_.predict_joint_log_proba(X_test[:5]), rtol=1e-12)
    np.testing.assert_allclose(keyed.predict_joint_log_proba(X_test[:5], keys=[1] * 5), before, rtol=1e-12)
    state = keyed.export_state().statistics
    assert len(state["examples"]) == 6 and state["pair_end"][-1] == len(state["pair_count"])


def test_keys_that_come_and_go_keep_every_count_of_those_held_through_renumbering():
    rng = np.random.default_rng(3)
    X, y = rng.integers(0, 3, size=(6_000, 5)), rng.choice(["a", "b"], 6_000)
    keys = [f"k{i % 3_000}" for i in range(6_000)]
    keyed = KeyedNB(MultinomialNB(), prior_weight=0).partial_fit(X, y, keys=keys)
    kept = [f"k{i}" for i in range(2_900, 3_000)]
    keyed.drop_keys([key for key in keyed.keys() if key not in kept])  # rows renumbered: 3,000 slots, 100 held
    keyed.partial_fit(X[:50], y[:50], keys=["k2950"] * 50)  # and learning goes on after
    for key in ("k2900", "k2950", "k2999"):
        rows = [i for i, k in enumerate(keys) if k == key]
        alone = MultinomialNB().partial_fit(X[rows], y[rows], classes=keyed.classes_)
        if key == "k2950":
            alone.partial_fit(X[:50], y[:50])
        order = [alone.classes_.tolist().index(label) for label in keyed.classes_.tolist()]
        np.testing.assert_array_equal(keyed.key_model(key).feature_count_, alone.feature_count_[order])
        assert keyed.key_examples([key])[0] == len(rows) + (50 if key == "k2950" else 0)
    assert keyed.n_keys_ == 100 and len(keyed.export_state().statistics["examples"]) == 100
