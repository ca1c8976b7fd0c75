"""--max-keys over a partition's keys: after a commit the least recently used beyond the bound leave
memory, a key's record is read back by its offset exactly, and the state's totals count both."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from nbstream.stats.keyed_counts import KeyedCounts
from worker.io.records import Record
from worker.service.keys.bound import KeyBound
from worker.service.keys.records import PartitionKeys, restore_keys

STATE = "partition-0"


class KeysTopic:
    """One partition of a keys topic in memory: records get offsets as a broker gives them."""

    def __init__(self):
        self.log: list[Record] = []
        self.reads = 0

    def send(self, keys: PartitionKeys, commit: int) -> None:
        for name, value in keys.write(STATE, commit):
            self.log.append(Record("keys", 0, len(self.log), name, value))
            delivered = keys.delivery(name)
            if delivered is not None:
                delivered(len(self.log) - 1)

    def fetch(self, partition: int, offsets: list[int], timeout_s: float) -> dict[int, Record]:
        self.reads += 1
        return {offset: self.log[offset] for offset in offsets}


def learn(keys: PartitionKeys, names: list[str], seed: int) -> None:
    rng = np.random.default_rng(seed)
    X = sp.csr_matrix(rng.poisson(0.5, (len(names), 20)).astype(float))
    keys.counts.update(X, rng.choice(["ham", "spam"], len(names)), None, names, np.full(len(names), seed))
    keys.learned(names)


def cells(keys: PartitionKeys, key: str):
    found = keys.counts.cells_of([key], np.array(["ham", "spam"]))
    return found.features.tolist(), found.classes.tolist(), found.counts.tolist(), found.class_count.tolist()


def test_the_least_recently_used_leave_after_a_commit_and_come_back_exactly():
    topic, bound = KeysTopic(), None
    keys = PartitionKeys(KeyedCounts(20), 0.0)
    bound = KeyBound(3, topic.fetch)
    bound.adopt(keys, STATE, {})
    names = [f"k{i}" for i in range(6)]
    for seed, name in enumerate(names):  # k0 used first, k5 last
        keys.memory.touch([name])
        learn(keys, [name, name], seed + 1)
    reference = {name: cells(keys, name) for name in names}
    topic.send(keys, commit=12)
    assert bound.after_commit({0: keys}) == 3
    assert sorted(keys.counts.keys()) == ["k3", "k4", "k5"] and sorted(keys.memory.evicted) == ["k0", "k1", "k2"]
    assert keys.header()["n_keys"] == 6 and keys.header()["examples"] == 12  # the state counts those out too

    assert keys.out_of_memory(["k1", "k4", "k1"]) == ["k1"]
    bound.read_back(0, keys, ["k1"])
    assert cells(keys, "k1") == reference["k1"] and keys.counts.examples("k1") == 2
    keys.memory.touch(["k1"])
    learn(keys, ["k1"], 9)  # it learns on from where it stopped
    topic.send(keys, commit=13)
    assert topic.log[-1].key.decode().startswith(STATE) and len(topic.log) == 7  # only k1 written again
    assert bound.after_commit({0: keys}) == 1 and "k3" in keys.memory.evicted  # k3: least recently used
    bound.read_back(0, keys, ["k3"])
    assert cells(keys, "k3") == reference["k3"]
    restored = restore_keys({record.key: record.value for record in topic.log}, keys.header(), 20, 0.0)
    assert len(restored.counts) == 6 and restored.counts.examples("k1") == 3


def test_a_key_read_back_that_holds_other_counts_is_refused():
    topic = KeysTopic()
    keys = PartitionKeys(KeyedCounts(20), 0.0)
    bound = KeyBound(1, topic.fetch)
    bound.adopt(keys, STATE, {})
    for seed, name in enumerate(["a", "b"]):
        keys.memory.touch([name])
        learn(keys, [name], seed + 1)
    topic.send(keys, commit=2)
    bound.after_commit({0: keys})
    forged = keys.memory.evicted["a"]
    topic.log[forged.offsets[0]] = topic.log[1 - forged.offsets[0]]  # another key's record at its offset
    with pytest.raises(ValueError, match=r"the records read back hold the keys \['b'\], not \['a'\]"):
        bound.read_back(0, keys, ["a"])


def test_keys_restored_at_a_takeover_leave_by_when_they_last_learned():
    topic = KeysTopic()
    keys = PartitionKeys(KeyedCounts(20), 0.0)
    for seed, name in enumerate(["old", "mid", "new"]):
        learn(keys, [name], seed + 1)  # their clock: 1, 2, 3
    topic.send(keys, commit=3)
    records = {record.key: record.value for record in topic.log}
    offsets = {record.key: record.offset for record in topic.log}
    restored = restore_keys(records, keys.header(), 20, 0.0)
    bound = KeyBound(1, topic.fetch)
    bound.adopt(restored, STATE, offsets)
    assert bound.after_commit({0: restored}) == 2 and restored.counts.keys() == ["new"]
    bound.read_back(0, restored, ["old"])
    assert restored.counts.examples("old") == 1 and not restored.memory.evicted.keys() - {"mid"}


def test_ticks_order_keys_across_partitions():
    topic = KeysTopic()
    bound = KeyBound(2, topic.fetch)
    first, second = PartitionKeys(KeyedCounts(20), 0.0), PartitionKeys(KeyedCounts(20), 0.0)
    for keys in (first, second):
        bound.adopt(keys, STATE, {})
    for keys, name, seed in ((first, "a", 1), (second, "b", 2), (first, "c", 3), (second, "d", 4)):
        keys.memory.touch([name])
        learn(keys, [name], seed)
    for keys in (first, second):
        topic.send(keys, commit=4)
    assert bound.after_commit({0: first, 1: second}) == 2
    assert first.counts.keys() == ["c"] and second.counts.keys() == ["d"]
    assert isinstance(bound.ticks, itertools.count)


def test_keys_only_predicted_are_not_tracked_and_every_tracked_key_can_leave():
    topic = KeysTopic()
    keys = PartitionKeys(KeyedCounts(20), 0.0)
    bound = KeyBound(1, topic.fetch)
    bound.adopt(keys, STATE, {})
    learn(keys, ["a", "b"], 1)
    keys.touch(["a", "b", "unlabeled-1", "unlabeled-2"])  # the last two were predicted, never learned
    assert list(keys.memory.used) == ["a", "b"]
    topic.send(keys, commit=2)
    assert bound.after_commit({0: keys}) == 1 and list(keys.memory.evicted) == ["a"]


def test_a_key_whose_record_parts_were_not_all_reported_stays_in_memory():
    keys = PartitionKeys(KeyedCounts(20), 0.0)
    bound = KeyBound(0 + 1, KeysTopic().fetch)
    bound.adopt(keys, STATE, {})
    learn(keys, ["a", "b"], 1)
    keys.touch(["a", "b"])
    keys.write(STATE, 2)  # written, but no delivery reported
    keys.committed()
    assert bound.after_commit({0: keys}) == 0 and sorted(keys.counts.keys()) == ["a", "b"]
