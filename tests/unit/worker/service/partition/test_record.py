"""A partition state's payload keeps its prequential quality; one the previous version wrote keeps its accuracy."""

from __future__ import annotations

import json
import struct
from dataclasses import replace

import numpy as np
import pytest

import nbstream
from nbstream.arrow import FeatureSpec
from worker.service.partition.record import PartitionRecord


def encoder():
    features = FeatureSpec.vector("features").encoder()
    features.width = 2
    return features


def header_of(payload: bytes) -> dict:
    return json.loads(header_of_bytes(payload))


def header_of_bytes(payload: bytes) -> bytes:
    (length,) = struct.unpack_from("<I", payload, 4)
    return payload[8:8 + length]


def learned_state() -> PartitionRecord:
    model = nbstream.MultinomialNB().partial_fit(np.array([[3, 0], [0, 3]]), ["a", "b"])
    state = PartitionRecord(model, next_offset=12)
    state.quality.judge(np.array(["a", "b", "c"]), model.classes_, np.array([[0.9, 0.1], [0.8, 0.2], [0.5, 0.5]]))
    state.quality.predicted(model.classes_, np.array([0, 0, 1, 0]))
    return state


def test_the_quality_is_restored_with_the_state():
    state = learned_state()
    payload = state.to_payload(encoder())
    restored, _ = PartitionRecord.from_payload(payload, nbstream.MultinomialNB(), "partition-0")
    assert restored.quality.report() == state.quality.report()
    report = restored.quality.report()["all"]
    assert report["accuracy"] == 1 / 3 and report["predicted_share"] == {"a": 0.75, "b": 0.25}
    assert report["recall"] == {"a": 1.0, "b": 0.0, "c": 0.0}
    assert restored.next_offset == 12 and restored.model.n_examples_seen_ == 2


def test_the_header_keeps_the_accuracy_where_the_previous_version_reads_it():
    header = header_of(learned_state().to_payload(encoder()))
    assert (header["judged"], header["correct"]) == (3, 1)
    assert header["recent_judged"] == pytest.approx(sum(0.5 ** (age / 1_000) for age in range(3)))
    assert header["recent_correct"] == pytest.approx(0.5 ** (2 / 1_000))  # the oldest was right


def test_a_state_the_previous_version_wrote_is_read_with_its_accuracy_and_nothing_else():
    model = nbstream.MultinomialNB().partial_fit(np.array([[3, 0]]), ["a"])
    old_header = {"next_offset": 40, "judged": 200, "correct": 150, "recent_judged": 180.5, "recent_correct": 140.25,
                  "starts": {}, "features": encoder().to_json(), "fitted": True, "label_field": "label"}
    header_bytes = json.dumps(old_header).encode()
    payload = b"NBPS" + struct.pack("<I", len(header_bytes)) + header_bytes + nbstream.persistence.snapshot.dumps(
        model, tables=False)
    state, _ = PartitionRecord.from_payload(payload, nbstream.MultinomialNB(), "partition-0")
    report = state.quality.report()
    assert (report["all"]["judged"], report["all"]["accuracy"]) == (200, 0.75)
    assert report["recent"]["accuracy"] == pytest.approx(140.25 / 180.5)
    for window in report.values():
        assert window["log_loss"] is window["brier"] is None and window["recall"] == window["predicted_share"] == {}
    assert state.next_offset == 40 and state.label_field == "label"
    state.quality.judge(np.array(["a"]), np.array(["a"]), np.array([[1.0]]))  # and it goes on, kept the new way
    again, _ = PartitionRecord.from_payload(state.to_payload(encoder()), nbstream.MultinomialNB(), "partition-0")
    assert again.quality.report()["all"]["accuracy"] == 151 / 201
    assert again.quality.report()["all"]["log_loss"] == pytest.approx(0, abs=1e-15)


def test_a_fresh_state_reads_back_with_nothing_judged():
    payload = PartitionRecord(nbstream.MultinomialNB()).to_payload(encoder())
    state, _ = PartitionRecord.from_payload(payload, nbstream.MultinomialNB(), "partition-0")
    assert state.quality.report()["all"]["accuracy"] is None and state.quality.labels == []


def test_where_the_partition_stopped_on_the_labels_topic_is_kept_and_left_out_when_unknown():
    state = learned_state()
    assert "labels_next_offset" not in header_of(state.to_payload(encoder()))
    state = replace(state, labels_next_offset=31)
    restored, _ = PartitionRecord.from_payload(state.to_payload(encoder()), nbstream.MultinomialNB(), "partition-0")
    assert restored.labels_next_offset == 31 and restored.next_offset == 12


@pytest.mark.parametrize("forged", [-1, 2 ** 63, "31", 31.5, True])
def test_a_forged_labels_offset_makes_the_state_unreadable(forged):
    state = replace(learned_state(), labels_next_offset=31)
    written = state.to_payload(encoder())
    header = header_of(written)
    header["labels_next_offset"] = forged
    header_bytes = json.dumps(header).encode()
    model = written[8 + len(header_of_bytes(written)):]
    payload = b"NBPS" + struct.pack("<I", len(header_bytes)) + header_bytes + model
    with pytest.raises(nbstream.SnapshotError, match="labels_next_offset"):
        PartitionRecord.from_payload(payload, nbstream.MultinomialNB(), "partition-0")
