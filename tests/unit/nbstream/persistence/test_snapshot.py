"""Snapshots: complete, atomic, checksummed, never pickled; a loaded model goes on."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import nbstream
from nbstream.persistence.snapshot import FORMAT_VERSION, read_header

FAMILIES = [
    (nbstream.BernoulliNB, {"alpha": np.linspace(0.5, 1.5, 6), "binarize": 1.5}),
    (nbstream.MultinomialNB, {"class_prior": [0.2, 0.3, 0.5], "half_life": 500.0}),
    (nbstream.ComplementNB, {"norm": True}),
    (nbstream.GaussianNB, {"var_smoothing": 1e-6}),
    (nbstream.CategoricalNB, {"min_categories": 6, "alpha": 0.5}),
]


def data(rng, n=200):
    return rng.integers(0, 5, size=(n, 6)), rng.choice(["x", "yy", "zzz"], size=n)


@pytest.mark.parametrize("family, params", FAMILIES, ids=lambda v: getattr(v, "__name__", ""))
def test_round_trip_predicts_bit_identically_and_keeps_training(tmp_path, rng, family, params):
    X, y = data(rng)
    model = family(**params).partial_fit(X[:150], y[:150])
    path = nbstream.save(model, tmp_path / "model.nbs", meta={"source": {"file": "a.parquet", "row": 150}})
    loaded = nbstream.load(path)
    assert type(loaded) is family
    assert loaded.classes_.tolist() == model.classes_.tolist()
    assert loaded.n_examples_seen_ == 150
    np.testing.assert_array_equal(loaded.predict_log_proba(X), model.predict_log_proba(X))
    for name, value in model.get_params().items():
        np.testing.assert_array_equal(loaded.get_params()[name], value)
    # Training resumes: the same next batch gives the same model.
    model.partial_fit(X[150:], y[150:])
    loaded.partial_fit(X[150:], y[150:])
    np.testing.assert_array_equal(loaded.predict_log_proba(X), model.predict_log_proba(X))


def test_header_holds_kind_classes_counts_meta_version_and_time(tmp_path, rng):
    X, y = data(rng)
    model = nbstream.MultinomialNB().fit(X, y)
    nbstream.save(model, tmp_path / "m.nbs", meta={"offsets": {"0": 41}})
    header = read_header(tmp_path / "m.nbs")
    assert header["kind"] == "multinomial"
    assert header["classes"] == {"strings": ["x", "yy", "zzz"]}
    assert header["examples_seen"] == 200
    assert header["meta"] == {"offsets": {"0": 41}}
    assert header["n_features"] == 6
    assert "created_at" in header
    names = {entry["name"] for entry in header["arrays"]}
    assert {"stats.class_count", "stats.feature_count", "table.class_log_prior_", "table.log_smoothed"} <= names


def test_the_smoothed_tables_are_stored_and_used_as_stored(tmp_path, rng, monkeypatch):
    X, y = data(rng)
    model = nbstream.BernoulliNB().fit(X, y)
    expected = model.predict_proba(X)
    nbstream.save(model, tmp_path / "m.nbs")
    loaded = nbstream.load(tmp_path / "m.nbs")  # checks them against the statistics
    monkeypatch.setattr(nbstream.BernoulliNB, "_refresh", lambda self: pytest.fail("recomputed"))
    np.testing.assert_array_equal(loaded.predict_proba(X), expected)


@pytest.mark.parametrize("damage", ["truncate", "flip", "append", "empty", "foreign"])
def test_damaged_files_are_refused(tmp_path, rng, damage):
    path = tmp_path / "m.nbs"
    nbstream.save(nbstream.GaussianNB().fit(*data(rng)), path)
    raw = bytearray(path.read_bytes())
    if damage == "truncate":
        raw = raw[: len(raw) // 2]
    elif damage == "flip":
        raw[len(raw) // 2] ^= 0x01
    elif damage == "append":
        raw += b"\x00"
    elif damage == "empty":
        raw = bytearray()
    else:
        raw = bytearray(b"\x80\x04\x95" + bytes(64))  # a pickle stream
    path.write_bytes(bytes(raw))
    with pytest.raises(nbstream.SnapshotError, match="checksum|not an nbstream snapshot"):
        nbstream.load(path)


def test_a_newer_format_version_is_refused_by_name(tmp_path, rng):
    path = tmp_path / "m.nbs"
    nbstream.save(nbstream.MultinomialNB().fit(*data(rng)), path)
    raw = bytearray(path.read_bytes())
    raw[7] = FORMAT_VERSION + 1
    path.write_bytes(bytes(raw))
    with pytest.raises(nbstream.SnapshotError, match=f"format version {FORMAT_VERSION + 1}"):
        nbstream.load(path)


def test_a_missing_file_is_a_snapshot_error(tmp_path):
    with pytest.raises(nbstream.SnapshotError, match="cannot read snapshot"):
        nbstream.load(tmp_path / "absent.nbs")


def test_save_replaces_atomically_and_leaves_no_temporary_files(tmp_path, rng, monkeypatch):
    path = tmp_path / "m.nbs"
    X, y = data(rng)
    nbstream.save(nbstream.MultinomialNB().fit(X, y), path)
    before = path.read_bytes()

    def crash(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        nbstream.save(nbstream.MultinomialNB().fit(X[:10], y[:10]), path)
    assert path.read_bytes() == before  # the old snapshot is intact
    assert os.listdir(tmp_path) == ["m.nbs"]


def test_metadata_must_be_json(tmp_path, rng):
    with pytest.raises(TypeError, match="JSON-serialisable"):
        nbstream.save(nbstream.MultinomialNB().fit(*data(rng)), tmp_path / "m.nbs", meta={"when": object()})


def test_unfitted_models_cannot_be_saved(tmp_path):
    with pytest.raises(nbstream.NotFittedError):
        nbstream.save(nbstream.MultinomialNB(), tmp_path / "m.nbs")


def test_numeric_labels_keep_their_type(tmp_path):
    model = nbstream.GaussianNB().partial_fit([[0.0], [1.0]], np.array([3, 11], dtype=np.int16))
    loaded = nbstream.load(nbstream.save(model, tmp_path / "m.nbs"))
    assert loaded.classes_.dtype == np.int16
    assert loaded.predict([[0.9]]).tolist() == [11]


def test_the_header_is_plain_json(tmp_path, rng):
    path = nbstream.save(nbstream.CategoricalNB().fit(*data(rng)), tmp_path / "m.nbs")
    raw = path.read_bytes()
    length = int.from_bytes(raw[8:16], "little")
    assert json.loads(raw[16:16 + length])["kind"] == "categorical"


def test_a_text_model_s_mostly_zero_counts_are_stored_sparse_and_read_back_exactly(tmp_path):
    import pyarrow as pa

    from nbstream.arrow.hashing import hashed_counts

    texts = pa.array(["free entry win cash now", "see you at lunch", "win a free prize", "call me later"] * 20)
    X, y = hashed_counts(texts, n_bits=20), ["spam", "ham", "spam", "ham"] * 20
    model = nbstream.MultinomialNB(counts="dense").partial_fit(X, y)
    path = nbstream.save(model, tmp_path / "text.nbs", tables=False)
    dense_bytes = model.feature_count_.nbytes
    assert path.stat().st_size < dense_bytes / 100
    assert next(e for e in read_header(path)["arrays"] if e["name"] == "stats.feature_count")["nonzero"] == 13
    loaded = nbstream.load(path)
    np.testing.assert_array_equal(loaded.feature_count_, model.feature_count_)
    np.testing.assert_array_equal(loaded.predict_joint_log_proba(X), model.predict_joint_log_proba(X))
    more = hashed_counts(pa.array(["lunch prize"]), n_bits=20)
    np.testing.assert_array_equal(loaded.partial_fit(more, ["ham"]).feature_count_,
                                  model.partial_fit(more, ["ham"]).feature_count_)


def test_a_gaussian_fitted_on_float32_keeps_its_dtype_through_a_snapshot(tmp_path, rng):
    X, y = rng.normal(size=(40, 3)).astype(np.float32), rng.integers(0, 2, 40)
    model = nbstream.GaussianNB().fit(X, y)
    path = nbstream.save(model, tmp_path / "m.nbs")
    assert read_header(path)["float_dtype"] == "float32"
    loaded = nbstream.load(path)
    assert loaded.theta_.dtype == loaded.var_.dtype == np.float32
    np.testing.assert_array_equal(loaded.predict_joint_log_proba(X), model.predict_joint_log_proba(X))
    assert "float_dtype" not in read_header(nbstream.save(nbstream.GaussianNB().fit(X.astype(float), y),
                                                          tmp_path / "f8.nbs"))
