"""Pending examples go to bytes and back bit for bit; forged bytes are refused with one clear line."""

from __future__ import annotations

import json
import struct

import numpy as np
import pyarrow as pa
import pytest

from nbstream.arrow import FeatureSpec
from worker.service.pending.frame import MOST_EXPANSION, pack, unpack
from worker.service.pending.store import PendingExamples


def mnist_like(n: int, seed: int = 0) -> np.ndarray:
    """(n, 784) uint8 with MNIST's share of zero pixels (about four in five)."""
    rng = np.random.default_rng(seed)
    return np.where(rng.random((n, 784)) < 0.8, 0, rng.integers(1, 256, (n, 784))).astype(np.uint8)


def sms_like(n: int):
    encoder = FeatureSpec.text("text", hash_bits=20).encoder()
    texts = [f"call {i} now to claim your prize prize" if i % 3 else f"see you at {i}" for i in range(n)]
    return encoder.encode(pa.record_batch({"text": texts}), learn=False)[0]


def store_of(X, n: int, proba_dtype=np.float64) -> PendingExamples:
    store = PendingExamples()
    rng = np.random.default_rng(1)
    proba = rng.dirichlet(np.ones(10), n).astype(proba_dtype)
    ids = [f"m-{i}" if i % 2 else i * 2**40 for i in range(n)]
    half = n // 2
    store.add(ids[:half], X[:half], proba[:half].argmax(1), proba[:half], np.arange(half) * 7, np.arange(half))
    store.add(ids[half:], X[half:], proba[half:].argmax(1), proba[half:], 5_000, np.arange(half, n))
    store.add_labels(ids[::3] + ["early", 17], np.arange(len(ids[::3]) + 2), 9_000)
    return store


def both_ways(store: PendingExamples) -> PendingExamples:
    data = store.to_bytes()
    restored = PendingExamples.from_bytes(data)
    assert restored.to_bytes() == data
    return restored


@pytest.mark.parametrize("kind", ["mnist uint8", "mnist float64 from JSON", "sms csr"])
def test_a_store_comes_back_bit_for_bit(kind):
    X = {"mnist uint8": lambda: mnist_like(60), "mnist float64 from JSON": lambda: mnist_like(60).astype(np.float64),
         "sms csr": lambda: sms_like(60)}[kind]()
    store = store_of(X, 60)
    restored = both_ways(store)
    assert (len(restored), restored.waiting_labels) == (len(store), store.waiting_labels)
    ids = [f"m-{i}" if i % 2 else i * 2**40 for i in range(60)]
    mine, theirs = (s.add_labels(ids, np.arange(60), 10_000).joined for s in (store, restored))
    assert mine.ids == theirs.ids and len(mine) == 40
    if kind == "sms csr":
        assert mine.X.dtype == theirs.X.dtype == np.float64 and (mine.X != theirs.X).nnz == 0
    else:
        assert mine.X.dtype == theirs.X.dtype == X.dtype and np.array_equal(mine.X, theirs.X)
    for field in ("labels", "best", "proba", "delay_ms", "offsets", "event_time_ms"):
        assert np.array_equal(getattr(mine, field), getattr(theirs, field)), field
    assert both_ways(restored).add(["early"], X[:1], [0], np.ones((1, 1)), 0, [0]).joined.labels.tolist() == [20]


def test_float32_probabilities_and_an_empty_store_come_back():
    restored = both_ways(store_of(mnist_like(8), 8, np.float32))
    assert restored.add_labels(["m-1"], [0], 0).joined.proba.dtype == np.float32
    assert len(both_ways(PendingExamples())) == 0


def test_a_body_that_compresses_beyond_the_bound_is_stored_raw_and_read_back():
    zeros = np.zeros(1 << 20, dtype=np.uint8)
    data = pack({}, {"zeros": zeros})
    assert json.loads(data[9:9 + struct.unpack_from("<I", data, 5)[0]])["compression"] == "none"
    assert np.array_equal(unpack(data, "zeros")[1]["zeros"], zeros)


# ---- forged bytes -------------------------------------------------------------------------------
def frame(header: object, body: bytes = b"", version: int = 1, magic: bytes = b"NBPF") -> bytes:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<4sBI", magic, version, len(text)) + text + body


def valid() -> bytes:
    return store_of(mnist_like(6), 6).to_bytes()


def refused(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        PendingExamples.from_bytes(data)
    assert "\n" not in str(raised.value)


def edited(change) -> bytes:
    """A valid store's bytes with its meta and arrays changed by ``change(meta, arrays)``."""
    meta, arrays = unpack(valid(), "test")
    arrays = {name: np.array(array) for name, array in arrays.items()}
    change(meta, arrays)
    return pack(meta, arrays)


def with_ids(ids: bytes):
    return lambda meta, arrays: arrays.update({"examples.ids": np.frombuffer(ids, dtype=np.uint8)})


FRAMES = {
    "too few bytes": (b"NBP", "not a frame of pending examples"),
    "another format": (b"NBPS" + bytes(20), "not a frame of pending examples"),
    "a newer version": (frame({}, version=2), "format version 2; this nbstream reads versions 1"),
    "a header past the end": (struct.pack("<4sBI", b"NBPF", 1, 1 << 30) + b"{}", "a header of 1,073,741,824 bytes"),
    "a header not JSON": (frame(b"{\xff"), "the header is not JSON"),
    "a header too deep": (frame(b"[" * 100_000), "the header is not JSON"),
    "a header of other fields": (frame({"arrays": []}), "the header must be an object of compression"),
    "an unknown compression": (frame({"compression": "lzma", "arrays": [], "meta": {}}), "compression must be zstd"),
    "an object dtype": (frame({"compression": "none", "arrays": [["x", "|O", [1]]], "meta": {}}, bytes(8)),
                        "dtype '|O' is not one of"),
    "a string dtype too wide": (frame({"compression": "none", "arrays": [["x", "<U99999", [1]]], "meta": {}}),
                                "dtype '<U99999'"),
    "a negative size": (frame({"compression": "none", "arrays": [["x", "<f8", [-1]]], "meta": {}}),
                        "a size of x must be an integer from 0"),
    "a huge shape": (frame({"compression": "zstd", "arrays": [["x", "<f8", [1 << 40, 1 << 40]]], "meta": {}},
                           bytes(100)), "which 100 compressed bytes cannot hold"),
    "more than the body can expand to": (
        frame({"compression": "zstd", "arrays": [["x", "|u1", [MOST_EXPANSION * 10 + 1]]], "meta": {}}, bytes(10)),
        "cannot hold"),
    "a body that does not decompress": (
        frame({"compression": "zstd", "arrays": [["x", "|u1", [100]]], "meta": {}}, bytes(10)),
        "its zstd data do not decompress"),
    "a raw body of another size": (frame({"compression": "none", "arrays": [["x", "<i8", [2]]], "meta": {}},
                                         bytes(15)), "its arrays take 16 bytes; the body holds 15"),
    "an array listed twice": (frame({"compression": "none", "arrays": [["x", "|u1", [1]], ["x", "|u1", [1]]],
                                     "meta": {}}, bytes(2)), "array 'x' is listed twice"),
    "strings that are not code points": (
        frame({"compression": "none", "arrays": [["x", "<U1", [1]]], "meta": {}}, b"\xff\xff\xff\xff"),
        "not Unicode code points"),
    "three dimensions": (frame({"compression": "none", "arrays": [["x", "|u1", [1, 1, 1]]], "meta": {}}, bytes(1)),
                         "shape of 1 or 2 sizes"),
}

EDITS = {
    "ids listed twice": (with_ids(b'["a", "a", "b"]'), "an id is listed twice"),
    "an id that is a float": (with_ids(b'[1.5, 2, 3]'), "the ids must be a list of strings and integers"),
    "an id that is true": (with_ids(b'[true, 2, 3]'), "the ids must be a list of strings and integers"),
    "ids not JSON": (with_ids(b'["a\xff"]'), "the ids are not JSON"),
    "an id of 5,000 digits": (with_ids(b"[" + b"9" * 5_000 + b"]"), "the ids are not JSON"),
    "fewer ids than rows": (with_ids(b'["a"]'), "examples.times must be <i8 of shape .1,."),
    "a NaN probability": (lambda m, a: a["examples.proba"].__setitem__((0, 0), np.nan), "must lie in \\[0, 1\\]"),
    "a probability above 1": (lambda m, a: a["examples.proba"].__setitem__((0, 0), 1.5), "must lie in \\[0, 1\\]"),
    "a served class beyond the probabilities": (lambda m, a: a["examples.best"].__setitem__(0, 10),
                                                "each best must be from -1 \\(nothing served\\) to 9"),
    "a negative offset": (lambda m, a: a["examples.offset"].__setitem__(0, -1), "offsets must be at least 0"),
    "times of another dtype": (lambda m, a: a.update({"examples.times": a["examples.times"].astype(np.float64)}),
                               "examples.times must be <i8"),
    "rows of another width": (lambda m, a: m["rows"].update(n_features=783), "examples.rows must be numbers of shape"),
    "rows that cannot go back to their dtype": (
        lambda m, a: a.update({"examples.rows": a["examples.rows"].astype(np.float64)}),
        "rows stored as float64 cannot go back to uint8"),
    "NaN among float rows": (lambda m, a: (m["rows"].update(dtype="<f8"), a.update(
        {"examples.rows": np.full(a["examples.rows"].shape, np.nan)})), "the feature values must be finite"),
    "no rows meta": (lambda m, a: m.update(rows=None), "rows must be an object of layout"),
    "rows of another layout": (lambda m, a: m["rows"].update(layout="coo"), "rows must be an object of layout"),
    "another meta field": (lambda m, a: m.update(extra=1), "the meta must hold rows alone"),
    "an array more": (lambda m, a: a.update(extra=np.zeros(1)), "arrays \\['extra'\\] are missing or not expected"),
    "an array missing": (lambda m, a: a.pop("joined.times"), "no array joined.times"),
    "a NaN label": (lambda m, a: a.update({"labels.label": np.array([np.nan, 1.0])}), "the labels must be finite"),
}


@pytest.mark.parametrize("case", FRAMES)
def test_a_forged_frame_is_refused(case):
    refused(*FRAMES[case])


@pytest.mark.parametrize("case", EDITS)
def test_forged_contents_are_refused(case):
    change, message = EDITS[case]
    refused(edited(change), message)


def csr_edit(change):
    def edit(meta, arrays):
        store = store_of(sms_like(6), 6)
        meta_csr, arrays_csr = unpack(store.to_bytes(), "test")
        meta.clear(), meta.update(meta_csr), arrays.clear()
        arrays.update({name: np.array(array) for name, array in arrays_csr.items()})
        change(meta, arrays)
    return edit


@pytest.mark.parametrize("change, message", [
    (lambda m, a: a["examples.rows.indptr"].__setitem__(0, 1), "must start at 0 and never decrease"),
    (lambda m, a: a["examples.rows.indptr"].__setitem__(1, a["examples.rows.indptr"][2] + 1),
     "must start at 0 and never decrease"),
    (lambda m, a: a["examples.rows.indices"].__setitem__(0, 1 << 20), "each column must be from 0 to 1,048,575"),
    (lambda m, a: a["examples.rows.indices"].__setitem__(0, -1), "each column must be from 0"),
    (lambda m, a: a.update({"examples.rows.data": a["examples.rows.data"][:-1]}), "examples.rows.data must be"),
    (lambda m, a: m["rows"].update(n_features=1 << 32), "n_features must be an integer from 1 to 2,147,483,648"),
])
def test_forged_text_rows_are_refused(change, message):
    refused(edited(csr_edit(change)), message)


def test_what_each_model_served_comes_back_and_is_kept_for_the_models_held_now():
    from worker.service.pending.codec import ModelsKept
    from worker.service.pending.segments import SegmentWriter, restore

    store = PendingExamples()
    proba = np.array([[0.9, 0.1], [0.3, 0.7]])
    store.add(["a", "b"], np.ones((2, 3)), [0, 1], proba, 5, [0, 1],
              others={"cnb": (np.array([1, -1], dtype=np.int32), np.array([[0.2, 0.8], [0.0, 0.0]]))})
    restored = both_ways(store)
    columns = restored.examples.chunks[0].columns
    np.testing.assert_array_equal(columns["proba@cnb"], [[0.2, 0.8], [0.0, 0.0]])
    assert columns["best@cnb"].tolist() == [1, -1]
    changes = SegmentWriter().changes(store)
    # the first model is now "cnb" (named so by the service), main a challenger, and "new" came since
    again, _ = restore(changes.directory, changes.written, models=ModelsKept("main", "cnb", ("main", "new")))
    kept = again.examples.chunks[0].columns
    assert list(kept) == ["rows", "best", "proba", "offset", "best@main", "proba@main", "best@new", "proba@new"]
    assert kept["best"].tolist() == [1, -1] and kept["best@main"].tolist() == [0, 1]
    np.testing.assert_array_equal(kept["proba@main"], proba)
    assert kept["best@new"].tolist() == [-1, -1] and kept["proba@new"].shape == (2, 0)
    joined = again.add_labels(["a"], ["x"], 9).joined
    assert joined.best.tolist() == [1] and set(joined.others) == {"main", "new"}


@pytest.mark.parametrize("column, message", [
    ("best@c d", "examples.best@c d names no model"),
    ("proba@cnb", "examples: arrays \\['examples.proba@cnb'\\] are missing or not expected"),
])
def test_forged_columns_of_other_models_are_refused(column, message):
    store = PendingExamples()
    store.add(["a"], np.ones((1, 3)), [0], np.array([[1.0]]), 5, [0])
    meta, arrays = unpack(store.to_bytes(), "x")
    arrays[f"examples.{column}"] = np.zeros(1, dtype=np.int32)
    with pytest.raises(ValueError, match=message):
        PendingExamples.from_bytes(pack(meta, arrays))
