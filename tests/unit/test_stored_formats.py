"""Every stored format reads what an earlier release wrote (tests/fixtures/formats, made by its
make_corpus.py with that release's code): snapshots of each model kind predict as they did, and a
partition state, its pending examples and its state-topic records read back to the very bytes
they were."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest

import nbstream
from nbstream.persistence.snapshot import dumps, loads
from worker.io.kafka.state_topic import StateAssembler
from worker.service.partition.drift_watch import DriftWatch
from worker.service.partition.record import PartitionRecord
from worker.service.pending.records import PendingRecords, pending_of
from worker.service.pending.store import PendingExamples

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
EXPECTED = json.loads((CORPUS / "expected.json").read_text())


def probe(name: str) -> np.ndarray:
    """The matrix make_corpus.py predicted for (the same generator, in the same order)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_corpus", CORPUS / "make_corpus.py")
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    return corpus.models()[name][1]


def records(name: str) -> list[tuple[bytes, bytes | None]]:
    return [(key.encode(), None if value is None else base64.b64decode(value))
            for key, value in json.loads((CORPUS / name).read_text())]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_snapshot_an_earlier_release_wrote_predicts_as_it_did(name):
    """To the last bits but rounding: the arithmetic of scoring may change between releases."""
    data = (CORPUS / f"{name}.nbs").read_bytes()
    model, _ = loads(data, name)
    proba = model.predict_proba(probe(name))
    expected = np.array([[float.fromhex(value) for value in row] for row in EXPECTED[name]["proba"]])
    np.testing.assert_allclose(proba, expected, rtol=1e-13, atol=1e-15)
    assert model.classes_.tolist() == EXPECTED[name]["classes"]
    again, _ = loads(dumps(model), name)  # and what this release writes of it reads back the same
    np.testing.assert_array_equal(again.predict_proba(probe(name)), proba)


def test_a_partition_state_an_earlier_release_wrote_reads_to_its_very_bytes():
    payload = (CORPUS / "partition.nbps").read_bytes()
    record, encoder = PartitionRecord.from_payload(payload, nbstream.MultinomialNB(), "partition-0")
    assert (record.next_offset, record.starts, record.labels_next_offset, record.label_field) == (40, {1: 7}, 12,
                                                                                                  "label")
    assert record.quality.report()["all"]["judged"] == 10 and record.model.n_examples_seen_ == 40
    assert DriftWatch.from_json(record.drift, "adwin", 0).judged == 200
    again = record.to_payload(encoder)
    header_end = 8 + int.from_bytes(payload[4:8], "little")
    assert again[:header_end] == payload[:header_end]  # the header, byte for byte (the model's holds its time)
    reread, _ = PartitionRecord.from_payload(again, nbstream.MultinomialNB(), "partition-0")
    np.testing.assert_array_equal(reread.model.feature_count_, record.model.feature_count_)


def test_pending_examples_an_earlier_release_wrote_read_to_their_very_bytes():
    for name in ("pending.nbpf", "pending-text.nbpf"):
        data = (CORPUS / name).read_bytes()
        assert PendingExamples.from_bytes(data).to_bytes() == data


def test_the_pending_records_of_a_commit_an_earlier_release_wrote_restore_its_store():
    assembler = StateAssembler()
    for key, value in records("pending-records.json"):
        assembler.add(key, value)
    listing = PartitionRecord.from_payload((CORPUS / "partition.nbps").read_bytes(), nbstream.MultinomialNB(),
                                           "partition-0")[0].pending_records
    digests = listing.digests
    assert {pending_of(name)[1] for name in assembler.names("partition-0/pending/")} == set(digests)
    store = listing.restore(lambda segment, digest: assembler.read(f"partition-0/pending/{segment}", digest), 1_000)
    assert store.to_bytes() == (CORPUS / "pending.nbpf").read_bytes()
    assert isinstance(listing, PendingRecords)


def test_state_topic_records_an_earlier_release_wrote_assemble_to_their_payload():
    assembler = StateAssembler()
    for key, value in records("state-records.json"):
        assembler.add(key, value)
    assert assembler.take("partition-0") == (CORPUS / "partition.nbps").read_bytes()
