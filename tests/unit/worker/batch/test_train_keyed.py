"""`worker train --model-key COLUMN`: a model per key from Parquet files, equal to a separate fit
of each key's rows, continued exactly after an interruption, and each bad key refused alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.naive_bayes import BernoulliNB as SkBernoulliNB
from sklearn.naive_bayes import ComplementNB as SkComplementNB
from sklearn.naive_bayes import MultinomialNB as SkMultinomialNB

import nbstream
from nbstream.arrow import FeatureError
from worker.batch.train import train
from worker.config import FeatureOptions, ModelOptions, TrainConfig
from worker.errors import ConfigError, InvalidRowError

from .test_train import begin, interrupted

SKLEARN = {"multinomial": SkMultinomialNB, "bernoulli": SkBernoulliNB, "complement": SkComplementNB}


def rows(n: int = 60, seed: int = 0) -> dict[str, list]:
    rng = np.random.default_rng(seed)
    return {"x": rng.integers(0, 4, n).tolist(), "y": rng.integers(0, 3, n).tolist(),
            "label": rng.choice(["a", "b"], n).tolist(), "user": rng.choice(["ann", "bob", "cy", "dé"], n).tolist()}


def parquet(path: Path, columns: dict[str, list | pa.Array]) -> str:
    pq.write_table(pa.table(columns), path, row_group_size=7)
    return str(path)


def keyed_settings(paths, out: Path, **options) -> TrainConfig:
    options.setdefault("features", FeatureOptions(columns=["x", "y"]))
    options.setdefault("model", ModelOptions(kind="multinomial"))
    return TrainConfig(paths=[str(p) for p in paths], label="label", out=out, batch_size=7,
                       checkpoint_every=14, model_key="user", **options)


@pytest.mark.parametrize("kind", ["multinomial", "bernoulli", "complement"])
def test_with_no_prior_weight_each_key_predicts_as_a_separate_fit_of_its_rows(tmp_path, kind):
    data = rows()
    path = parquet(tmp_path / "a.parquet", data)
    summary = train(keyed_settings([path], tmp_path / "k.nbs", key_prior_weight=0.0,
                                   model=ModelOptions(kind=kind)))
    assert summary.keys == 4
    keyed = nbstream.load_keyed(tmp_path / "k.nbs")
    X = np.column_stack([data["x"], data["y"]]).astype(float)
    users, labels = np.array(data["user"]), np.array(data["label"])
    probe = np.array([[0, 0], [3, 1], [1, 2]], dtype=float)
    order = np.searchsorted(["a", "b"], keyed.classes_)  # (classes in order of first appearance)
    for user in ["ann", "bob", "cy", "dé"]:
        own = SKLEARN[kind]().fit(X[users == user], labels[users == user])
        np.testing.assert_allclose(keyed.predict_proba(probe, keys=[user] * 3), own.predict_proba(probe)[:, order],
                                   rtol=1e-9)
    whole = SKLEARN[kind]().fit(X, labels)  # the group's model is the unkeyed fit
    np.testing.assert_allclose(keyed.group_model_.predict_proba(probe), whole.predict_proba(probe)[:, order], rtol=1e-9)
    assert nbstream.load(tmp_path / "k.nbs").n_examples_seen_ == 60  # read as one model, the group's


def test_the_snapshot_records_the_prior_weight_and_the_default_is_ten(tmp_path):
    path = parquet(tmp_path / "a.parquet", rows())
    train(keyed_settings([path], tmp_path / "k.nbs"))
    train(keyed_settings([path], tmp_path / "k2.nbs", key_prior_weight=2.5))
    assert nbstream.load_keyed(tmp_path / "k.nbs").prior_weight == 10.0
    assert nbstream.load_keyed(tmp_path / "k2.nbs").prior_weight == 2.5


def test_an_interrupted_keyed_run_continues_to_the_same_keys_as_an_uninterrupted_one(tmp_path, monkeypatch):
    path = parquet(tmp_path / "a.parquet", rows())
    config = keyed_settings([path], tmp_path / "k.nbs")
    interrupted(monkeypatch, config, after_batches=5)  # a checkpoint after 28 rows
    run = begin(config)
    assert run.rows_read == 28 and run.keyed is not None and run.keyed.n_examples_seen_ == 28
    train(config)
    whole = train(keyed_settings([path], tmp_path / "whole.nbs"))
    assert whole.rows_learned == 60
    resumed, uninterrupted = (nbstream.load_keyed(tmp_path / name) for name in ("k.nbs", "whole.nbs"))
    assert resumed.keys() == uninterrupted.keys()
    for key in uninterrupted.keys():
        np.testing.assert_array_equal(resumed.key_model(key).feature_count_,
                                      uninterrupted.key_model(key).feature_count_)
    np.testing.assert_array_equal(resumed.key_examples(uninterrupted.keys()),
                                  uninterrupted.key_examples(uninterrupted.keys()))


def test_resume_keeps_training_a_keyed_snapshot_on_new_files(tmp_path):
    first, second = rows(30, seed=1), rows(30, seed=2)
    train(keyed_settings([parquet(tmp_path / "a.parquet", first)], tmp_path / "base.nbs"))
    train(keyed_settings([parquet(tmp_path / "b.parquet", second)], tmp_path / "more.nbs",
                         resume=tmp_path / "base.nbs", features=FeatureOptions(), model=ModelOptions(kind=None)))
    both = {name: first[name] + second[name] for name in first}
    train(keyed_settings([parquet(tmp_path / "ab.parquet", both)], tmp_path / "both.nbs"))
    more, whole = nbstream.load_keyed(tmp_path / "more.nbs"), nbstream.load_keyed(tmp_path / "both.nbs")
    assert sorted(more.keys()) == sorted(whole.keys())
    for key in whole.keys():
        np.testing.assert_array_equal(more.key_model(key).feature_count_, whole.key_model(key).feature_count_)


def _invalid_utf8(values: list[str]) -> pa.Array:
    raw = [value.encode() for value in values]
    raw[2] = b"\xffbad"
    return pa.array(raw, pa.binary()).view(pa.string())


@pytest.mark.parametrize(("make", "problem"), [
    (lambda users: pa.array([None if i == 2 else u for i, u in enumerate(users)]), "null key"),
    (lambda users: pa.array(["" if i == 2 else u for i, u in enumerate(users)]), "empty key"),
    (_invalid_utf8, "the key is not valid UTF-8"),
    (lambda users: pa.array([2**64 - 1] * len(users), pa.uint64()), "a key beyond 64-bit signed integers"),
    (lambda users: pa.array(["k" * 1_025 if i == 2 else u for i, u in enumerate(users)]),
     "a key of over 1,024 bytes"),
], ids=["null", "empty", "invalid UTF-8", "beyond int64", "too long"])
def test_each_bad_key_alone_stops_the_run_in_one_line_or_is_set_aside(tmp_path, make, problem):
    data = rows(6)
    data["user"] = make(data["user"])
    path = parquet(tmp_path / "a.parquet", data)
    with pytest.raises(InvalidRowError) as refused:
        train(keyed_settings([path], tmp_path / "k.nbs"))
    row = 0 if problem.startswith("a key beyond") else 2
    assert str(refused.value) == f"{path}: row {row}, column 'user': {problem}. Use --skip-invalid to set such " \
                                 f"rows aside."
    assert not (tmp_path / "k.nbs").exists()
    if row == 2:
        summary = train(keyed_settings([path], tmp_path / "k.nbs", skip_invalid=True))
        assert (summary.rows_learned, summary.rows_rejected) == (5, 1)
        assert nbstream.load_keyed(tmp_path / "k.nbs").n_examples_seen_ == 5


def test_integer_keys_are_keys_too(tmp_path):
    data = rows()
    data["user"] = pa.array([hash(user) % 7 for user in data["user"]], pa.int32())
    train(keyed_settings([parquet(tmp_path / "a.parquet", data)], tmp_path / "k.nbs"))
    keys = nbstream.load_keyed(tmp_path / "k.nbs").keys()
    assert all(isinstance(key, int) for key in keys) and 1 <= len(keys) <= 7


@pytest.mark.parametrize(("column", "problem"), [
    (pa.array([1.5] * 6), "key column 'user' has type double; a key is a string or an integer"),
    (None, "key column 'user' not found; columns are ['x', 'y', 'label']")], ids=["float", "missing"])
def test_a_key_column_that_cannot_name_keys_is_refused_before_training(tmp_path, column, problem):
    data = rows(6)
    if column is None:
        del data["user"]
    else:
        data["user"] = column
    path = parquet(tmp_path / "a.parquet", data)
    with pytest.raises(FeatureError) as refused:
        train(keyed_settings([path], tmp_path / "k.nbs"))
    assert str(refused.value) == f"{path}: {problem}."


@pytest.mark.parametrize(("options", "problem"), [
    ({"model": ModelOptions(kind="gaussian")}, "--model-key: a keyed model is one of"),
    ({"model": ModelOptions(kind="multinomial", half_life=100)}, "--model-key: a keyed model does not forget"),
], ids=["gaussian", "half-life"])
def test_a_model_that_cannot_be_keyed_is_refused_in_one_line(tmp_path, options, problem):
    path = parquet(tmp_path / "a.parquet", rows(6))
    with pytest.raises(ConfigError, match=problem):
        train(keyed_settings([path], tmp_path / "k.nbs", **options))


def test_resume_refuses_to_mix_a_keyed_snapshot_and_a_single_model(tmp_path):
    path = parquet(tmp_path / "a.parquet", rows(6))
    train(keyed_settings([path], tmp_path / "keyed.nbs", key_prior_weight=4.0))
    plain = keyed_settings([path], tmp_path / "plain.nbs")
    train(TrainConfig(paths=plain.paths, label="label", out=plain.out, features=plain.features))
    resumed = {"features": FeatureOptions(), "model": ModelOptions(kind=None)}
    with pytest.raises(ConfigError, match="holds a model per key: pass --model-key COLUMN"):
        train(TrainConfig(paths=[path], label="label", out=tmp_path / "o.nbs", resume=tmp_path / "keyed.nbs",
                          **resumed))
    with pytest.raises(ConfigError, match="holds a single model, not a model per key"):
        train(keyed_settings([path], tmp_path / "o.nbs", resume=tmp_path / "plain.nbs", **resumed))
    with pytest.raises(ConfigError, match="--key-prior-weight 1 contradicts the 4 of"):
        train(keyed_settings([path], tmp_path / "o.nbs", resume=tmp_path / "keyed.nbs", key_prior_weight=1.0,
                             **resumed))
    assert not (tmp_path / "o.nbs").exists()


def test_a_later_file_of_other_keys_than_those_learned_is_refused_in_one_line(tmp_path):
    first = parquet(tmp_path / "a.parquet", rows(6))
    numbers = rows(6)
    numbers["user"] = pa.array(range(6), pa.int64())
    later = parquet(tmp_path / "b.parquet", numbers)
    with pytest.raises(FeatureError) as refused:
        train(keyed_settings([first, later], tmp_path / "k.nbs"))
    assert str(refused.value) == f"{later}: key column 'user' holds ints; the keys learned so far are strs."
