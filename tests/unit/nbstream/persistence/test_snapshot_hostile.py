"""Snapshots forged by someone who can re-seal them: every one is refused with a SnapshotError,
before anything is allocated from the forged numbers, and nothing else escapes."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbstream
from nbstream.persistence.snapshot import SnapshotError, read_header

MAGIC = b"NBSNAP\x00\x01"


def split(raw: bytes) -> tuple[dict, bytes]:
    length = struct.unpack_from("<Q", raw, 8)[0]
    return json.loads(raw[16:16 + length]), raw[16 + length:-32]


def seal(header, payload: bytes, header_bytes: bytes | None = None) -> bytes:
    """A snapshot with a valid checksum around whatever header and payload we like."""
    header_bytes = json.dumps(header).encode() if header_bytes is None else header_bytes
    body = MAGIC + struct.pack("<Q", len(header_bytes)) + header_bytes + payload
    return body + hashlib.sha256(body).digest()


@pytest.fixture(params=["categorical", "multinomial", "gaussian", "sparse multinomial"])
def genuine(request, tmp_path):
    rng = np.random.default_rng(3)
    X, y = rng.integers(0, 4, size=(60, 5)), rng.choice(["a", "b"], size=60)
    if request.param == "sparse multinomial":  # counts of 6,000 features, few nonzero: stored sparse
        X = np.zeros((60, 6_000), dtype=int)
        X[:, :5] = rng.integers(0, 4, size=(60, 5))
    model = {"categorical": nbstream.CategoricalNB, "multinomial": nbstream.MultinomialNB,
             "gaussian": nbstream.GaussianNB, "sparse multinomial": nbstream.MultinomialNB}[request.param]
    return split(nbstream.save(model().fit(X, y), tmp_path / "m.nbs").read_bytes())


def refused(tmp_path, raw: bytes) -> str:
    path = tmp_path / "forged.nbs"
    path.write_bytes(raw)
    with pytest.raises(SnapshotError) as caught:
        nbstream.load(path)
    return str(caught.value)


def entry(header, name):
    return next(e for e in header["arrays"] if e["name"] == name)


FORGERIES = {
    "n_features 1e9": lambda h: h.update(n_features=10**9),
    "n_features float": lambda h: h.update(n_features=1e9),
    "n_features 0": lambda h: h.update(n_features=0),
    "shape 2**70": lambda h: entry(h, "stats.class_count").update(shape=[2**70]),
    "offset 2**70": lambda h: entry(h, "stats.class_count").update(offset=2**70),
    "shape -1": lambda h: entry(h, "stats.class_count").update(shape=[-1]),
    "shape of three axes": lambda h: entry(h, "stats.class_count").update(shape=[1, 1, 2]),
    "dtype object": lambda h: entry(h, "stats.class_count").update(dtype="|O"),
    "classes a number": lambda h: h.update(classes=7),
    "classes duplicated": lambda h: h.update(classes={"strings": ["a", "a"]}),
    "params a list": lambda h: h.update(params=[1, 2]),
    "params unknown": lambda h: h["params"].update(bogus=1),
    "alpha infinite": lambda h: h["params"].update(alpha=1e309) if "alpha" in h["params"] else
    h["params"].update(var_smoothing=-1.0),
    "meta a string": lambda h: h.update(meta="x"),
    "created_at missing": lambda h: h.pop("created_at"),
    "arrays missing": lambda h: h.pop("arrays"),
    "kind unknown": lambda h: h.update(kind="quantum"),
    "examples_seen negative": lambda h: h.update(examples_seen=-5),
    "open_classes a string": lambda h: h.update(open_classes="yes"),
    "tables removed from directory": lambda h: h.update(arrays=[e for e in h["arrays"]
                                                                if not e["name"].startswith("stats.")]),
    "header a list": lambda h: h.clear() or h.update(__list__=True),
}


@pytest.mark.parametrize("forgery", FORGERIES)
def test_forged_headers_are_refused(tmp_path, genuine, forgery):
    header, payload = copy.deepcopy(genuine[0]), genuine[1]
    FORGERIES[forgery](header)
    if header.get("__list__"):
        header = [1, 2, 3]
    assert "forged.nbs" in refused(tmp_path, seal(header, payload))


def test_a_header_nested_deeply_or_not_utf8_or_longer_than_the_file_is_refused(tmp_path, genuine):
    header, payload = genuine
    refused(tmp_path, seal(None, payload, b"[" * 100_000 + b"]" * 100_000))
    refused(tmp_path, seal(None, payload, b'{"kind": "\xff"}'))
    raw = bytearray(seal(header, payload))
    raw[8:16] = struct.pack("<Q", 2**63)
    body = bytes(raw[:-32])
    refused(tmp_path, body + hashlib.sha256(body).digest())


def test_statistics_that_no_training_gives_are_refused(tmp_path, genuine):
    header, payload = genuine
    if header["kind"] == "categorical":
        return  # its counts are checked the same way; multinomial and gaussian stand for all
    for value in (np.nan, np.inf, -1.0):
        forged = bytearray(payload)
        where = entry(header, "stats.class_count")["offset"]
        forged[where:where + 8] = np.float64(value).tobytes()
        assert "class_count" in refused(tmp_path, seal(header, bytes(forged)))


def test_tables_that_do_not_match_the_statistics_are_refused(tmp_path, genuine):
    header, payload = genuine
    table = next(e for e in header["arrays"] if e["name"].startswith("table.") and e["dtype"] == "<f8")
    forged = bytearray(payload)
    forged[table["offset"]:table["offset"] + 8] = np.float64(12345.0).tobytes()
    assert "does not match the statistics" in refused(tmp_path, seal(header, bytes(forged)))


def test_fifos_directories_and_devices_are_refused_without_waiting(tmp_path):
    fifo = tmp_path / "fifo.nbs"
    os.mkfifo(fifo)
    assert "not a regular file" in refused_path(fifo)
    assert "directory" in refused_path(tmp_path)
    assert "not a regular file" in refused_path("/dev/zero")
    link = tmp_path / "zero.nbs"
    link.symlink_to("/dev/zero")
    assert "not a regular file" in refused_path(link)
    assert "cannot read" in refused_path(tmp_path / "missing.nbs")


def refused_path(path) -> str:
    with pytest.raises(SnapshotError) as caught:
        nbstream.load(path)
    return str(caught.value)


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                       max_size=3), max_leaves=8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_mutation_of_a_header_field_is_loaded_or_refused_never_crashes(tmp_path, genuine, data):
    header, payload = copy.deepcopy(genuine[0]), genuine[1]
    targets = [header, header["params"], *header["arrays"]]
    target = data.draw(st.sampled_from(targets))
    key = data.draw(st.sampled_from(sorted(target)) if target else st.just("x"))
    target[key] = data.draw(JSON_VALUES)
    path = tmp_path / "fuzzed.nbs"
    path.write_bytes(seal(header, payload, json.dumps(header, allow_nan=True).encode()))
    try:
        model = nbstream.load(path)
    except SnapshotError:
        return
    probabilities = model.predict_proba(np.ones((2, model.n_features_in_), dtype=int))  # what loads, predicts
    assert np.isfinite(probabilities).all()


def sparse_forgery(tmp_path, change) -> str:
    rng = np.random.default_rng(4)
    X = np.zeros((40, 6_000), dtype=int)
    X[:, ::700] = rng.integers(0, 3, size=(40, 9))
    path = nbstream.save(nbstream.MultinomialNB().fit(X, rng.choice(["a", "b"], size=40)), tmp_path / "m.nbs")
    header, payload = split(path.read_bytes())
    counts = entry(header, "stats.feature_count")
    assert counts["nonzero"] == 18  # 9 columns, 2 classes
    payload = bytearray(payload)
    change(header, counts, payload)
    return refused(tmp_path, seal(header, bytes(payload)))


def _index(payload, counts, i, value):
    payload[counts["offset"] + 8 * i:counts["offset"] + 8 * i + 8] = np.int64(value).tobytes()


@pytest.mark.parametrize("forgery, message", [
    (lambda h, c, p: c.update(nonzero=10**6), "invalid count of nonzero"),
    (lambda h, c, p: c.update(nonzero=-1), "invalid count of nonzero"),
    (lambda h, c, p: c.update(nonzero=17.5), "invalid count of nonzero"),
    (lambda h, c, p: c.update(shape=[2, 2**40]), "unfold to more than"),
    (lambda h, c, p: c.update(shape=[2**60, 2**60], nonzero=0), "unfold to more than"),
    (lambda h, c, p: h["arrays"].append({**c, "name": "stats.copy", "shape": [2, 2**27]}), "unfold to more than"),
    (lambda h, c, p: _index(p, c, 3, 2), "out of order"),  # before the index ahead of it
    (lambda h, c, p: _index(p, c, 1, 0), "out of order"),  # the same index twice
    (lambda h, c, p: _index(p, c, 0, -5), "out of range"),
    (lambda h, c, p: _index(p, c, 17, 12_000), "out of range"),
])
def test_forged_sparse_arrays_are_refused_before_they_are_unfolded(tmp_path, forgery, message):
    assert message in sparse_forgery(tmp_path, forgery)


def test_a_version_1_file_all_dense_is_still_read(tmp_path):
    rng = np.random.default_rng(5)
    model = nbstream.MultinomialNB().fit(rng.integers(0, 4, size=(30, 6)), rng.choice(["a", "b"], size=30))
    header, payload = split(nbstream.save(model, tmp_path / "m.nbs").read_bytes())
    assert not any("nonzero" in e for e in header["arrays"])
    loaded = tmp_path / "v1.nbs"
    loaded.write_bytes(seal(header, payload))  # MAGIC is version 1's
    np.testing.assert_array_equal(nbstream.load(loaded).feature_count_, model.feature_count_)
    assert read_header(loaded)["format_version"] == 1 and read_header(tmp_path / "m.nbs")["format_version"] == 2


# ---- header fields whose every value is checked, before anything is allocated from it ----------

def categorical_snapshot(tmp_path) -> tuple[dict, bytearray]:
    """A categorical model of two features with 3 and 4 categories: category_widths (3, 4)."""
    rng = np.random.default_rng(6)
    X = np.column_stack([rng.integers(0, 3, 60), rng.integers(0, 4, 60)])
    path = nbstream.save(nbstream.CategoricalNB().fit(X, rng.choice(["a", "b"], 60)), tmp_path / "m.nbs", tables=False)
    header, payload = split(path.read_bytes())
    return header, bytearray(payload)


@pytest.mark.parametrize("widths", [(2**62, 2**62), (-5, 12), (7, 0), (3, 4, 0)], ids=str)
def test_category_widths_must_split_the_categories_exactly(tmp_path, widths):
    header, payload = categorical_snapshot(tmp_path)
    widths_entry = entry(header, "stats.category_widths")
    assert np.frombuffer(payload, "<i8", 2, widths_entry["offset"]).tolist() == [3, 4]
    forged = np.array(widths, dtype="<i8").tobytes()
    widths_entry["shape"] = [len(widths)]
    payload += forged  # appended, so a third width fits inside the file too
    widths_entry["offset"] = len(payload) - len(forged)
    message = refused(tmp_path, seal(header, bytes(payload)))
    assert "category_widths" in message and "\n" not in message


def test_category_widths_of_floats_are_refused(tmp_path):
    header, payload = categorical_snapshot(tmp_path)
    widths_entry = entry(header, "stats.category_widths")
    payload[widths_entry["offset"]:widths_entry["offset"] + 16] = np.array([3.0, 4.0]).tobytes()
    widths_entry["dtype"] = "<f8"
    assert "category_widths must be a list of integers" in refused(tmp_path, seal(header, bytes(payload)))


def test_an_unknown_statistic_cannot_vouch_for_a_huge_feature_count(tmp_path):
    """A sparse array of nothing but zeros takes no room in the file: counted among the statistics,
    it would let n_features claim a million features and the model be built for them."""
    import tracemalloc

    header, payload = categorical_snapshot(tmp_path)
    header["arrays"].append({"name": "stats.padding", "dtype": "<f8", "shape": [2**20], "offset": 0, "nonzero": 0})
    header["n_features"] = 2**20
    tracemalloc.start()
    message = refused(tmp_path, seal(header, bytes(payload)))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert "the statistics are" in message and "padding" in message
    assert peak < 32 * 2**20  # the padding itself (8 MiB), not a million category tables


SOUND_BUT_FOR_ONE_FIELD = {
    "examples_seen fractional": (lambda h: h.update(examples_seen=2.5), "examples_seen"),
    "examples_seen huge float": (lambda h: h.update(examples_seen=1e300), "examples_seen"),
    "float_dtype unknown": (lambda h: h.update(float_dtype="object"), "float_dtype"),
    "float_dtype a number": (lambda h: h.update(float_dtype=32), "float_dtype"),
    "float_dtype float32 for counts": (lambda h: h.update(float_dtype="float32") if h["kind"] != "gaussian"
                                       else h.update(float_dtype="float128"), "float_dtype"),
    "feature_names a string": (lambda h: h.update(feature_names="abcde"), "feature_names"),
    "feature_names too few": (lambda h: h.update(feature_names=["a"]), "feature_names"),
}


@pytest.mark.parametrize("forgery", SOUND_BUT_FOR_ONE_FIELD)
def test_each_header_field_is_checked_for_type_and_range(tmp_path, genuine, forgery):
    header, payload = copy.deepcopy(genuine[0]), genuine[1]
    change, name = SOUND_BUT_FOR_ONE_FIELD[forgery]
    change(header)
    assert name in refused(tmp_path, seal(header, payload))


def without_tables(header: dict) -> dict:
    header["arrays"] = [e for e in header["arrays"] if not e["name"].startswith("table.")]
    return header


def test_classes_must_be_labels_training_accepts(tmp_path):
    rng = np.random.default_rng(7)
    model = nbstream.MultinomialNB().fit(rng.integers(0, 4, size=(30, 3)), rng.choice([3, 5], size=30))
    header, payload = split(nbstream.save(model, tmp_path / "m.nbs").read_bytes())
    header["classes"] = {"array": "table.class_log_prior_"}  # two distinct fractional numbers
    assert "classes must be strings or integers" in refused(tmp_path, seal(header, payload))


def test_a_model_of_no_class_is_refused(tmp_path):
    rng = np.random.default_rng(8)
    model = nbstream.MultinomialNB().partial_fit(rng.integers(0, 4, size=(30, 3)), rng.choice(["a", "b"], size=30))
    header, payload = split(nbstream.save(model, tmp_path / "m.nbs").read_bytes())
    without_tables(header)
    header["classes"] = {"strings": []}
    entry(header, "stats.class_count")["shape"] = [0]
    entry(header, "stats.feature_count")["shape"] = [0, 3]
    assert "non-empty list of distinct labels" in refused(tmp_path, seal(header, payload))


def test_statistics_in_float32_are_refused(tmp_path):
    rng = np.random.default_rng(9)
    model = nbstream.MultinomialNB().fit(rng.integers(0, 4, size=(30, 3)), rng.choice(["a", "b"], size=30))
    header, payload = split(nbstream.save(model, tmp_path / "m.nbs", tables=False).read_bytes())
    entry(header, "stats.class_count")["dtype"] = "<f4"  # half the bytes, read as two float32 values
    assert "expected float64" in refused(tmp_path, seal(header, payload))


@pytest.mark.parametrize("params", [{"alpha": 1e308}, {"alpha": {"array": "table.overflowing"}}])
def test_parameters_that_overflow_the_tables_are_refused_when_loaded(tmp_path, params):
    rng = np.random.default_rng(10)
    model = nbstream.MultinomialNB().fit(rng.integers(0, 4, size=(30, 3)), rng.choice(["a", "b"], size=30))
    header, payload = split(nbstream.save(model, tmp_path / "m.nbs", tables=False).read_bytes())
    huge = np.full(3, 1e308).tobytes()
    header["arrays"].append({"name": "table.overflowing", "dtype": "<f8", "shape": [3], "offset": len(payload)})
    header["params"].update(params)
    assert "overflow float64" in refused(tmp_path, seal(header, payload + huge))


def test_a_table_stored_both_whole_and_in_parts_is_refused(tmp_path, genuine):
    header, payload = copy.deepcopy(genuine[0]), genuine[1]
    first = header["arrays"][-1]
    header["arrays"].append({**first, "name": first["name"].split(".")[0] + "." + first["name"].split(".")[1] + ".0"})
    assert "forged.nbs" in refused(tmp_path, seal(header, payload))


def test_read_header_refuses_a_header_that_is_not_what_save_writes(tmp_path, genuine):
    header, payload = genuine
    path = tmp_path / "forged.nbs"
    path.write_bytes(seal([1, 2, 3], payload))
    with pytest.raises(SnapshotError, match="not a JSON object"):
        read_header(path)
    path.write_bytes(seal({**header, "meta": "x"}, payload))
    with pytest.raises(SnapshotError, match="'meta'"):
        read_header(path)
