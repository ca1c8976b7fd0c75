"""The worker's snapshot metadata: one typed reader and writer, compatible with the stored JSON."""

from __future__ import annotations

import pytest

import nbstream
from nbstream.arrow import FeatureSpec
from worker.io.parquet.source import Position
from worker.snapshot_meta import (
    KafkaOffsets,
    MergedFrom,
    ParquetProgress,
    SnapshotMeta,
    read_snapshot,
    write_snapshot,
)

TRAIN_META = {  # as `worker train` writes it
    "features": {"kind": "text", "columns": ["text"], "n_features": 1024, "hash_bits": 10, "ngram_max": 1,
                 "hash_scheme": "poly31-splitmix64-v1"},
    "label": "label", "run": {"files": ["/data/a.parquet"]}, "rows_read": 300, "rows_rejected": 2,
    "source": {"type": "parquet", "files": ["/data/a.parquet"], "position": {"file_index": 0, "row": 300},
               "complete": False}}
SERVE_META = {"features": {"kind": "vector", "columns": ["features"], "n_features": 6},
              "source": {"type": "kafka", "topic": "sms", "offsets": {"0": 17, "2": 5}}}
MERGE_META = {"features": {"kind": "categorical", "columns": ["c"], "n_features": 1, "categories": [["x", "y"]]},
              "label": "y", "source": {"type": "merge", "snapshots": ["/a.nbs", "/b.nbs"]}}


@pytest.mark.parametrize("stored", [TRAIN_META, SERVE_META, MERGE_META])
def test_stored_metadata_reads_back_to_the_same_json(stored):
    assert SnapshotMeta.from_json(stored, "x.nbs").to_json() == stored


def test_each_source_type_is_typed():
    assert SnapshotMeta.from_json(TRAIN_META, "x").source == ParquetProgress(["/data/a.parquet"], Position(0, 300),
                                                                             False)
    assert SnapshotMeta.from_json(SERVE_META, "x").source == KafkaOffsets("sms", {0: 17, 2: 5})
    assert SnapshotMeta.from_json(MERGE_META, "x").source == MergedFrom(["/a.nbs", "/b.nbs"])
    assert SnapshotMeta.from_json(TRAIN_META, "x").source.describe() == "1 Parquet file(s), at file 0, row 300"


def test_a_snapshot_without_features_was_not_written_by_the_worker(tmp_path):
    path = nbstream.save(nbstream.MultinomialNB().fit([[1]], [0]), tmp_path / "plain.nbs", meta={"source": "x"})
    with pytest.raises(nbstream.SnapshotError, match="has no feature spec; it was not written by worker train"):
        read_snapshot(path)


def test_unknown_keys_are_kept(tmp_path):
    meta = SnapshotMeta(FeatureSpec.vector("v").encoder(), extra={"owner": "team-a"})
    meta.features.width = 1
    write_snapshot(nbstream.MultinomialNB().fit([[1]], [0]), tmp_path / "m.nbs", meta)
    _, read = read_snapshot(tmp_path / "m.nbs")
    assert read.extra == {"owner": "team-a"} and read.features.n_features == 1


def test_the_models_of_a_serving_group_are_listed_with_the_one_a_snapshot_holds():
    from worker.snapshot_meta import ModelsListing

    stored = SERVE_META | {"models": {"model": "main", "served": "mnb",
                                      "all": {"main": "BernoulliNB()", "mnb": "MultinomialNB()"}}}
    meta = SnapshotMeta.from_json(stored, "x.nbs")
    assert meta.models == ModelsListing("main", "mnb", {"main": "BernoulliNB()", "mnb": "MultinomialNB()"})
    assert meta.to_json() == stored and meta.extra == {}
    assert meta.models.describe() == "main BernoulliNB(), mnb MultinomialNB() (served)"
    assert SnapshotMeta.from_json(SERVE_META, "x.nbs").models is None
