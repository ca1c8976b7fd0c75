"""Pending examples join their delayed labels by id, once, and leave by TTL or by the bound, oldest first."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse

from nbstream.arrow import FeatureSpec
from worker.service.pending.keyed_log import KeyedLog
from worker.service.pending.store import PendingExamples


def add(store: PendingExamples, ids, times=0, X=None, proba=None):
    n = len(ids)
    X = np.arange(n * 3, dtype=np.float64).reshape(n, 3) if X is None else X
    proba = np.tile([0.25, 0.75], (n, 1)) if proba is None else proba
    return store.add(ids, X, np.argmax(proba, axis=1), proba, times, np.arange(100, 100 + n))


def test_a_label_after_its_features_joins_them_with_the_served_prediction_and_the_delay():
    store = PendingExamples()
    proba = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    add(store, ["a", "b", "c"], times=[1_000, 1_100, 1_200], proba=proba)
    labeled = store.add_labels(["c", "a"], np.array(["spam", "ham"]), [5_000, 5_500])
    joined = labeled.joined
    assert joined.ids == ["c", "a"]  # in the order the labels came
    assert joined.X.tolist() == [[6, 7, 8], [0, 1, 2]] and joined.X.dtype == np.float64
    assert joined.labels.tolist() == ["spam", "ham"]
    assert joined.best.tolist() == [0, 0] and joined.proba.tolist() == [[0.6, 0.4], [0.9, 0.1]]
    assert joined.delay_ms.tolist() == [3_800, 4_500] and joined.offsets.tolist() == [102, 100]
    assert (labeled.duplicates, labeled.waiting) == (0, 0)
    assert len(store) == 1 and store.waiting_labels == 0


def test_a_label_before_its_features_waits_and_joins_when_they_come():
    store = PendingExamples()
    labeled = store.add_labels([7, "8"], np.array([1, 2]), 500)
    assert (len(labeled.joined), labeled.waiting, store.waiting_labels) == (0, 2, 2)
    added = add(store, ["x", 7], times=[900, 1_000])
    assert added.joined.ids == [7] and added.joined.labels.tolist() == [1]
    assert added.joined.delay_ms.tolist() == [-500] and added.joined.X.tolist() == [[3, 4, 5]]
    assert len(store) == 1 and store.waiting_labels == 1


def test_ids_are_compared_by_their_text_an_integer_and_its_digits_name_one_message():
    store = PendingExamples()
    labeled = store.add_labels([7, "7"], np.array([1, 2]), 500)
    assert (labeled.waiting, labeled.duplicates) == (1, 1)  # the first label of the id wins
    added = add(store, ["7", 5], times=[900, 1_000])
    assert added.joined.ids == [7] and added.joined.labels.tolist() == [1]  # kept as the label named it
    met = store.add_labels(["5"], np.array([3]), 1_100)
    assert met.joined.ids == [5] and met.joined.labels.tolist() == [3]  # as the message named it
    assert len(store) == 0 and store.waiting_labels == 0


def test_interleaved_features_and_labels_each_join_once():
    store = PendingExamples()
    add(store, ["a"], times=10)
    store.add_labels(["b"], np.array([2]), 20)
    add(store, ["b", "c"], times=30)
    labeled = store.add_labels(["c", "a", "d"], np.array([3, 1, 4]), 40)
    assert labeled.joined.ids == ["c", "a"] and labeled.waiting == 1
    assert len(store) == 0 and store.waiting_labels == 1


def test_a_second_label_is_a_duplicate_and_the_first_wins():
    store = PendingExamples()
    add(store, ["a"])
    first = store.add_labels(["a", "a"], np.array([1, 2]), 5)
    assert first.joined.labels.tolist() == [1] and first.duplicates == 1
    assert store.add_labels(["a"], np.array([3]), 6).duplicates == 1  # already joined
    store.add_labels(["early"], np.array([1]), 7)
    again = store.add_labels(["early"], np.array([9]), 8)
    assert again.duplicates == 1 and again.waiting == 0  # already waiting
    assert add(store, ["early"]).joined.labels.tolist() == [1]


def test_features_sent_again_replace_the_pending_ones_and_after_the_join_are_not_kept():
    store = PendingExamples()
    add(store, ["a", "b", "a"], X=np.array([[1.0], [2.0], [3.0]]))
    assert add(store, ["b"], X=np.array([[4.0]])).replaced == 1
    labeled = store.add_labels(["a", "b"], np.array([0, 1]), 0)
    assert labeled.joined.X.tolist() == [[3.0], [4.0]]
    replayed = add(store, ["a"], X=np.array([[5.0]]))
    assert replayed.already_joined == 1 and len(store) == 0


def test_the_count_of_replaced_rows_includes_repeats_within_one_call():
    assert add(PendingExamples(), ["a", "a", "a", "b"]).replaced == 2


def test_expire_drops_examples_and_labels_older_than_the_ttl_and_keeps_the_one_at_the_edge():
    store = PendingExamples()
    add(store, ["old", "edge", "new"], times=[100, 400, 700])
    store.add_labels(["early-old", "early-new"], np.array([1, 2]), [50, 900])
    expired = store.expire(now_event_time_ms=1_000, ttl_ms=600)
    assert (expired.examples, expired.labels) == (1, 1)
    assert store.add_labels(["old", "edge"], np.array([1, 1]), 1_000).joined.ids == ["edge"]
    assert store.waiting_labels == 2  # "old" waits now: its example was dropped


def test_joined_ids_are_forgotten_after_the_ttl():
    store = PendingExamples()
    add(store, ["a"], times=100)
    store.add_labels(["a"], np.array([1]), 200)
    store.expire(now_event_time_ms=10_000, ttl_ms=1_000)
    assert add(store, ["a"], times=10_000).already_joined == 0 and len(store) == 1


def test_max_pending_evicts_the_examples_that_came_first_and_counts_them():
    store = PendingExamples(max_pending=3)
    add(store, ["a", "b"], times=[500, 100])
    added = add(store, ["c", "d"], times=[50, 60])
    assert added.evicted == 1
    assert store.add_labels(["a", "b", "c", "d"], np.zeros(4), 0).joined.ids == ["b", "c", "d"]
    assert add(store, [f"m{i}" for i in range(5)]).evicted == 2
    assert store.add_labels(["m0", "m1", "m2"], np.zeros(3), 0).joined.ids == ["m2"]


def test_max_pending_bounds_the_waiting_labels_too():
    store = PendingExamples(max_pending=2)
    store.add_labels(["a", "b"], np.array([1, 2]), 0)
    labeled = store.add_labels(["c"], np.array([3]), 0)
    assert (labeled.waiting, labeled.evicted, store.waiting_labels) == (1, 1, 2)
    assert len(add(store, ["a"]).joined) == 0 and len(add(store, ["b"]).joined) == 1


def test_a_replaced_example_counts_as_the_newest_for_eviction():
    store = PendingExamples(max_pending=2)
    add(store, ["a", "b"])
    add(store, ["a"])
    add(store, ["c"])
    assert store.add_labels(["a", "b", "c"], np.zeros(3), 0).joined.ids == ["a", "c"]


def test_uint8_rows_stay_uint8_and_json_float_pixels_are_stored_as_uint8():
    pixels = np.random.default_rng(0).integers(0, 256, (5, 784)).astype(np.uint8)
    for X in (pixels, pixels.astype(np.float64)):
        store = PendingExamples()
        add(store, list(range(5)), X=X)
        assert store.examples.chunks[0].columns["rows"].values.dtype == np.uint8
        joined = store.add_labels([4, 1], np.array([0, 1]), 0).joined
        assert joined.X.dtype == X.dtype and np.array_equal(joined.X, X[[4, 1]])


@pytest.mark.parametrize("value", [0.5, -0.0, 300.5, np.nan])
def test_float_rows_no_integer_dtype_holds_exactly_stay_float(value):
    X = np.array([[1.0, value]])
    store = PendingExamples()
    add(store, ["a"], X=X)
    joined = store.add_labels(["a"], np.array([1]), 0).joined
    assert np.array_equal(joined.X.view(np.uint64), X.view(np.uint64))


def test_text_rows_stay_csr_with_small_counts_and_come_back_as_encoded():
    import pyarrow as pa

    encoder = FeatureSpec.text("text", hash_bits=20).encoder()
    texts = ["win a prize now", "see you at six", "prize prize prize", ""]
    X, _ = encoder.encode(pa.record_batch({"text": texts}), learn=False)
    store = PendingExamples()
    add(store, ["s0", "s1", "s2", "s3"], X=X)
    rows = store.examples.chunks[0].columns["rows"]
    assert rows.data.dtype == np.uint8 and rows.indices.dtype == np.int32
    joined = store.add_labels(["s3", "s2", "s0"], np.array(["ham", "spam", "spam"]), 0).joined
    assert scipy.sparse.issparse(joined.X) and joined.X.dtype == np.float64 and joined.X.shape == (3, 1 << 20)
    assert (joined.X != X[[3, 2, 0]]).nnz == 0


def test_probabilities_of_a_class_set_that_grew_are_padded_with_zeros():
    store = PendingExamples()
    add(store, ["a"], proba=np.array([[0.3, 0.7]]))
    add(store, ["b"], proba=np.array([[0.1, 0.2, 0.7]]))
    joined = store.add_labels(["b", "a"], np.array([2, 1]), 0).joined
    assert joined.proba.tolist() == [[0.1, 0.2, 0.7], [0.3, 0.7, 0.0]]


def test_large_integer_ids_and_numpy_ids_are_kept_as_the_message_had_them():
    store = PendingExamples()
    add(store, np.array([5, 6]))
    add(store, [2**70])
    assert store.add_labels([2**70, 5], np.array([1, 1]), 0).joined.ids == [2**70, 5]


@pytest.mark.parametrize("bad", [True, 1.5, None, ("a",)])
def test_an_id_that_is_neither_a_string_nor_an_integer_is_refused(bad):
    with pytest.raises(TypeError, match="message ids must be strings or integers"):
        add(PendingExamples(), ["a", bad])


def test_columns_of_another_length_than_the_ids_are_refused():
    with pytest.raises(ValueError, match="best must hold one entry per id"):
        PendingExamples().add(["a"], np.zeros((1, 2)), [0, 1], np.zeros((1, 2)), 0, [0])
    with pytest.raises(ValueError, match="add takes n ids, .n, d. rows"):
        PendingExamples().add(["a"], np.zeros((2, 2)), [0], np.zeros((1, 2)), 0, [0])


def test_a_log_keeps_few_chunks_and_no_more_dead_rows_than_live_ones():
    log = KeyedLog()
    for i in range(1_000):
        log.append([i], np.array([i]), {"value": np.array([i])})
        if i % 3 == 0:
            log.remove(log.seqs([i // 2]) if i // 2 in log else np.zeros(0, dtype=np.int64))
        assert len(log.chunks) <= 12
        assert all(chunk.live * 2 >= len(chunk.seqs) for chunk in log.chunks)
    taken = log.take(log.live_seqs())
    assert taken.columns["value"].tolist() == taken.ids == sorted(taken.ids)
    assert len(taken.ids) == len(log)
