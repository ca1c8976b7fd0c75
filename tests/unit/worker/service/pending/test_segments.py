"""Pending examples written by chunk: a commit writes the chunks made since the last one and the
directory, and the store restored from them is the store that wrote them."""

from __future__ import annotations

import numpy as np
import pytest

from worker.service.pending.frame import pack, unpack
from worker.service.pending.segments import Changes, SegmentWriter, restore
from worker.service.pending.store import PendingExamples

from .test_codec import mnist_like, sms_like


class StateTopic:
    """A compacted topic's latest value per key, as the records of the commits leave it."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}
        self.directory = b""

    def commit(self, changes: Changes) -> None:
        self.values.update(changes.written)
        for key in changes.dropped:
            del self.values[key]
        self.directory = changes.directory


def polls(store: PendingExamples, X, first: int, count: int, size: int) -> None:
    """``count`` polls of ``size`` messages (X's first rows), ids and times from ``first`` on."""
    for start in range(first, first + count * size, size):
        proba = np.full((size, 2), 0.5)
        store.add(list(range(start, start + size)), X[:size], np.zeros(size), proba, start, np.arange(size))


@pytest.mark.parametrize("make_rows", [mnist_like, sms_like])
def test_the_store_restored_from_its_segments_is_the_store_that_wrote_them(make_rows):
    store, writer, topic = PendingExamples(max_pending=500), SegmentWriter(), StateTopic()
    X = make_rows(100)
    for round_ in range(12):
        polls(store, X, round_ * 100, 1, 100)
        store.add_labels(list(range(round_ * 100 - 150, round_ * 100 - 100, 3)) + [f"early-{round_}"],
                         np.arange(18), round_)
        store.expire(round_ * 100, 400)
        topic.commit(writer.changes(store))
        restored, _ = restore(topic.directory, topic.values, 500)
        assert restored.to_bytes() == store.to_bytes()
        assert [chunk.live for chunk in restored.examples.chunks] == [chunk.live for chunk in store.examples.chunks]


def test_a_commit_writes_only_the_chunks_made_since_the_last_one():
    store, writer = PendingExamples(), SegmentWriter()
    X = mnist_like(1_000)
    polls(store, X, 0, 3, 1_000)  # chunks of 2,000 and 1,000 rows
    first = writer.changes(store)
    assert len(first.written) == 2 and not first.dropped
    store.add_labels([5, 1_500], np.array([1, 2]), 0)
    joins = writer.changes(store)  # the examples' chunks keep their records: only their masks change
    assert list(joins.written) == ["joined/0"] and not joins.dropped
    assert len(joins.directory) < 1_000
    polls(store, X, 3_000, 1, 1_000)  # 1,000 more: merged with the last 1,000 into a chunk of 2,000 -> merged to 4,000
    merged = writer.changes(store)
    assert len(merged.written) == 1 and len(merged.dropped) == 2


def test_a_restored_store_goes_on_writing_where_it_left_off():
    store, writer, topic = PendingExamples(), SegmentWriter(), StateTopic()
    X = mnist_like(100)
    polls(store, X, 0, 1, 100)
    topic.commit(writer.changes(store))
    restored, writer = restore(topic.directory, topic.values)
    assert not writer.changes(restored).written
    polls(restored, X, 100, 1, 100)
    changes = writer.changes(restored)
    assert set(changes.written).isdisjoint(topic.values) and len(changes.dropped) == 1
    topic.commit(changes)
    again, _ = restore(topic.directory, topic.values)
    assert again.to_bytes() == restored.to_bytes() and len(again) == 200


def test_a_chunk_record_the_directory_does_not_name_is_ignored():
    store, writer, topic = PendingExamples(), SegmentWriter(), StateTopic()
    polls(store, mnist_like(10), 0, 1, 10)
    topic.commit(writer.changes(store))
    topic.values["examples/99"] = b"left over"
    assert len(restore(topic.directory, topic.values)[0]) == 10


# ---- forged segments ----------------------------------------------------------------------------
def committed() -> StateTopic:
    store, writer, topic = PendingExamples(), SegmentWriter(), StateTopic()
    X = mnist_like(20)
    polls(store, X, 0, 2, 10)
    store.add_labels([3, "early"], np.array([1, 2]), 0)
    topic.commit(writer.changes(store))
    return topic


def chunk_of(X) -> bytes:
    """The record of a chunk of X's rows."""
    other = PendingExamples()
    polls(other, X, 0, 1, X.shape[0])
    return next(iter(SegmentWriter().changes(other).written.values()))


def examples_key(topic: StateTopic) -> str:
    return next(key for key in topic.values if key.startswith("examples/"))


def in_directory(change):
    """An edit of the directory's meta and masks, given the key of the examples' chunk."""
    def edit(topic: StateTopic) -> None:
        meta, masks = unpack(topic.directory, "test")
        masks = {key: np.array(mask) for key, mask in masks.items()}
        change(meta, masks, examples_key(topic))
        topic.directory = pack(meta, masks)
    return edit


FORGED = {
    "a chunk missing": (lambda t: t.values.pop(examples_key(t)), "names chunk examples/[0-9]+, which is missing"),
    "a chunk of other rows than listed": (in_directory(lambda m, a, k: m["examples"]["chunks"][0].__setitem__(1, 9)),
                                          "the mask of chunk examples/[0-9]+ must be 2 bytes; got uint8 of shape .3,."),
    "a mask of another size": (in_directory(lambda m, a, k: a.update({k: np.zeros(9, np.uint8)})),
                               "the mask of chunk examples/[0-9]+ must be 3 bytes"),
    "a mask of no chunk": (in_directory(lambda m, a, k: a.update({"examples/77": np.zeros(1, np.uint8)})),
                           "masks \\['examples/77'\\] of no chunk"),
    "logs missing": (in_directory(lambda m, a, k: m.pop("joined")), "must list the logs"),
    "a negative number of rows": (in_directory(lambda m, a, k: m["examples"]["chunks"][0].__setitem__(1, -1)),
                                  "the rows of a chunk of examples must be an integer from 1"),
    "a next number not beyond the chunks": (in_directory(lambda m, a, k: m["examples"].update(next=0)),
                                            "examples: the chunk numbers .* must be distinct and below the next one"),
    "a chunk that is not [number, rows]": (in_directory(lambda m, a, k: m["labels"]["chunks"].append(3)),
                                           "each chunk of labels must be \\[number, rows\\]"),
    "chunk rows other than the directory's": (lambda t: t.values.update({examples_key(t): chunk_of(mnist_like(5))}),
                                              "chunk examples/[0-9]+ holds 5 rows; the directory says 20"),
    "a whole store where a chunk belongs": (lambda t: t.values.update({examples_key(t): committed_store_bytes()}),
                                            "arrays .* are missing or not expected"),
    "an id in two chunks": (lambda t: t.values.update({"examples/77": chunk_of(mnist_like(20))}) or in_directory(
        lambda m, a, k: (m["examples"]["chunks"].append([77, 20]), m["examples"].update(next=78),
                         a.update({"examples/77": np.packbits(np.ones(20, bool))})))(t),
                            "examples: an id of chunk 77 lives in another chunk too"),
    "rows of two layouts": (lambda t: t.values.update({"examples/77": chunk_of(sms_like(20))}) or in_directory(
        lambda m, a, k: (m["examples"]["chunks"].insert(0, [77, 20]), m["examples"].update(next=78),
                         a.update({"examples/77": np.packbits(np.zeros(20, bool))})))(t),
                            "feature rows of 2 layouts"),
}


def committed_store_bytes() -> bytes:
    store = PendingExamples()
    polls(store, mnist_like(20), 0, 1, 20)
    return store.to_bytes()


@pytest.mark.parametrize("case", FORGED)
def test_forged_segments_are_refused(case):
    change, message = FORGED[case]
    topic = committed()
    change(topic)
    with pytest.raises(ValueError, match=message) as raised:
        restore(topic.directory, topic.values)
    assert "\n" not in str(raised.value)
