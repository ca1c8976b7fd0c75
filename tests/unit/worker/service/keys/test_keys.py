"""--model-key's settings, and a partition's keys as state-topic records: written for the keys that
changed, restored exactly, and anything forged refused in one line."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp

from nbstream.stats.keyed_counts import KeyedCounts
from tests.helpers.serve_config import serve_config
from worker.errors import ConfigError
from worker.service.keys import records as key_records
from worker.service.keys.records import KEY_RECORD, PartitionKeys, key_record_name, keys_of, restore_keys
from worker.service.keys.serving import record_keys


def learned_keys(n: int = 300, n_keys: int = 25, seed: int = 0) -> PartitionKeys:
    rng = np.random.default_rng(seed)
    X = sp.csr_matrix(rng.poisson(0.3, (n, 50)).astype(float))
    keys = PartitionKeys(KeyedCounts(50), 10.0)
    names = [f"user-{k}" for k in rng.integers(0, n_keys, n)]
    keys.counts.update(X, rng.choice(["ham", "spam"], n), None, names)
    keys.learned(names)
    return keys


def as_topic(records) -> dict[bytes, bytes]:
    return dict(records)


def test_a_commit_writes_the_keys_that_changed_and_they_restore_exactly():
    keys = learned_keys()
    first = as_topic(keys.write("partition-3", commit=300))
    assert len(first) == 25 and all(keys_of(name.decode())[0] == "partition-3" for name in first)
    assert keys.write("partition-3", commit=300) == []  # nothing changed since
    X = sp.csr_matrix(np.ones((1, 50)))
    keys.counts.update(X, np.array(["eggs"]), None, ["user-3"])  # a key learns a class new to the partition
    keys.learned(["user-3"])
    second = as_topic(keys.write("partition-3", commit=301))
    assert list(second) == [key_record_name("partition-3", "user-3").encode()]
    restored = restore_keys({**first, **second}, keys.header(), 50, 10.0)
    assert restored.counts.keys() and sorted(restored.counts.keys()) == sorted(keys.counts.keys())
    mine, theirs = keys.counts.cells_of(keys.counts.keys(), keys.counts.classes.labels), \
        restored.counts.cells_of(keys.counts.keys(), keys.counts.classes.labels)
    for name in ("slot", "classes", "features", "counts", "class_count"):
        np.testing.assert_array_equal(getattr(theirs, name), getattr(mine, name))


def test_a_key_larger_than_a_record_is_written_in_parts(monkeypatch):
    monkeypatch.setattr(key_records, "MOST_PART_PAIRS", 7)
    keys = learned_keys(n=60, n_keys=1)
    written = as_topic(keys.write("partition-0", commit=1))
    assert len(written) > 2 and all(keys_of(name.decode())[2] == part for part, name in enumerate(written))
    restored = restore_keys(written, keys.header(), 50, 10.0)
    assert len(restored.counts.arrays()["pair_count"]) == len(keys.counts.arrays()["pair_count"]) > 14
    with pytest.raises(ValueError, match="not all of one commit"):
        restore_keys(dict(list(written.items())[:-1]), keys.header(), 50, 10.0)


def _forged(value: bytes, **changes) -> bytes:
    """A key record with header fields or arrays replaced (arrays of the same length)."""
    opened = KEY_RECORD.open(value)
    header, body = dict(opened.header), bytearray(opened.body)
    n_classes, n_pairs = header["classes"], header["pairs"]
    places = {"pair_feature": (8 * n_classes, "<i4"), "pair_count": (8 * n_classes + 8 * n_pairs, "<f8")}
    for name, change in changes.items():
        if name in places:
            start, dtype = places[name]
            data = np.asarray(change, dtype=dtype).tobytes()
            body[start:start + len(data)] = data
        else:
            header[name] = change
    return KEY_RECORD.seal(header, [bytes(body)], 1)


def _arrays(value: bytes) -> dict:
    return key_records._read_part(value, "test").arrays


FORGERIES = {
    "more keys than its records": (lambda topic, header: header.update(n_keys=99), "says 99"),
    "more examples than its records": (lambda topic, header: header.update(examples=10**6), "1,000,000"),
    "a key under another key's name": ("key", "someone-else", "named otherwise"),
    "a negative count": ("pair_count", None, ">= 0"),
    "a feature beyond the features": ("pair_feature", None, "inside"),
    "a record that is not a frame": ("bytes", b"junk", "not a key's record"),
    "more pairs than its bytes": ("pairs", 10**6, "holds"),
    "no key": ("key", 5, "names no key"),
    "classes that are not listed": (lambda topic, header: header.update(classes="ham"), "classes"),
}


@pytest.mark.parametrize("forgery", FORGERIES)
def test_forged_key_records_are_refused_in_one_line(forgery):
    keys = learned_keys(n_keys=3)
    topic, header = as_topic(keys.write("partition-0", commit=1)), keys.header()
    change, *rest = FORGERIES[forgery]
    message = rest[-1]
    name = next(iter(topic))
    if callable(change):
        change(topic, header)
    elif change == "bytes":
        topic[name] = rest[0]
    elif change == "pair_count":
        topic[name] = _forged(topic[name], pair_count=-_arrays(topic[name])["pair_count"])
    elif change == "pair_feature":
        topic[name] = _forged(topic[name], pair_feature=_arrays(topic[name])["pair_feature"] + 1_000)
    else:
        topic[name] = _forged(topic[name], **{change: rest[0]})
    with pytest.raises(ValueError, match=message) as caught:
        restore_keys(topic, header, 50, 10.0)
    assert "\n" not in str(caught.value)


def test_record_keys_that_name_no_key_are_problems():
    texts, problems = record_keys([b"ann", None, b"", b"\xff", b"x" * 1_025, "čé".encode()])
    assert texts == ["ann", "", "", "", "", "čé"]
    assert [problem is None for problem in problems] == [True, False, False, False, False, True]


@pytest.mark.parametrize(("options", "parameters", "words"), [
    ({"model": "gaussian"}, {}, "--model gaussian"),
    ({"model": "categorical", "feature_names": ["a"]}, {}, "--model categorical"),
    ({}, {"half_life": 100.0}, "--half-life"),
    ({"labels_topic": "labels"}, {}, "--labels-topic"),
    ({"explain": 3}, {}, "--explain"),
    ({"format": "arrow"}, {}, "--format arrow"),
    ({"learn": False}, {}, "--no-learn"),
])
def test_what_a_keyed_group_does_not_do_yet_is_refused_alone(options, parameters, words):
    with pytest.raises(ConfigError, match=f"--model-key does not take {words}"):
        serve_config(model_key="key", parameters=parameters, **options)


def test_a_message_field_as_the_key_is_refused_with_the_recipe():
    with pytest.raises(ConfigError, match="docs/service/keys.md"):
        serve_config(model_key="user")
    assert serve_config(model_key="key", key_prior_weight=0.0).keys.keyed
    with pytest.raises(ConfigError, match="--key-prior-weight must be at least 0"):
        serve_config(model_key="key", key_prior_weight=-1.0)


def test_keys_unseen_past_the_ttl_are_dropped_tombstoned_and_the_rest_restore():
    keys = PartitionKeys(KeyedCounts(50), 10.0)
    X = sp.csr_matrix(np.eye(3, 50))
    keys.counts.update(X, np.array(["ham", "spam", "ham"]), None, ["old", "fresh", "old"],
                       np.array([1_000, 9_000, 2_000]))
    keys.learned(["old", "fresh"])
    first = as_topic(keys.write("partition-0", commit=3))
    assert keys.expire(10_000, ttl_ms=5_000) == 1  # "old" last learned at 2,000 < 10,000 - 5,000
    assert keys.counts.keys() == ["fresh"] and keys.counts.total_examples() == 1
    second = keys.write("partition-0", commit=4)
    assert second == [(key_record_name("partition-0", "old").encode(), None)]
    topic = {name: value for name, value in {**first, **dict(second)}.items() if value is not None}
    restored = restore_keys(topic, keys.header(), 50, 10.0)
    assert restored.counts.keys() == ["fresh"] and restored.counts.seen_of(["fresh"]).tolist() == [9_000]
    keys.counts.update(X[:1], np.array(["ham"]), None, ["old"], np.array([11_000]))  # back: a key of its own again
    assert keys.counts.examples("old") == 1 and keys.counts.total_examples() == 2
    keys.expire(10**15, ttl_ms=5_000)  # a message stamped far ahead moves the clock an hour past now at most
    assert keys.clock <= int(time.time() * 1000) + 3_600_000


def test_at_least_once_keys_ahead_of_their_state_are_taken_with_a_warning(caplog):
    keys = learned_keys(n_keys=3)
    topic, header = as_topic(keys.write("partition-0", commit=1)), keys.header()
    header["examples"] -= 1  # a commit wrote the keys, and stopped before the state
    with pytest.raises(ValueError, match="its state says"):
        restore_keys(topic, header, 50, 10.0)
    taken = restore_keys(topic, header, 50, 10.0, strict=False)
    assert len(taken.counts) == 3 and "ahead of its state" in caplog.text


@pytest.mark.parametrize(("option", "value"), [("max_keys", 10), ("key_ttl", 60.0)])
def test_a_bound_on_keys_without_a_model_per_key_is_refused_alone(option, value):
    flag = "--" + option.replace("_", "-")
    with pytest.raises(ConfigError, match=f"{flag} bounds the keys of a model per key: it needs --model-key key"):
        serve_config(**{option: value})
    assert getattr(serve_config(model_key="key", **{option: value}).keys, option) == value


def test_max_keys_must_be_at_least_one():
    with pytest.raises(ConfigError, match="--max-keys must be at least 1"):
        serve_config(model_key="key", max_keys=0)
