"""The service's snapshot folder: the last K kept, a corrupt newest one skipped."""

from __future__ import annotations

import numpy as np

import nbstream
from nbstream.arrow import FeatureSpec
from worker.service.snapshots import SnapshotStore
from worker.snapshot_meta import SnapshotMeta


def model_with(n):
    return nbstream.MultinomialNB().partial_fit(np.ones((n, 2)), ["a"] * n)


def meta_with(n):
    return SnapshotMeta(FeatureSpec.vector("features").encoder(), extra={"n": n})


def test_the_store_keeps_the_last_k_and_falls_back_past_a_corrupt_one(tmp_path, caplog):
    store = SnapshotStore(tmp_path, keep=2)
    for n in (1, 2, 3):
        store.save(model_with(n), meta_with(n))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snapshot-0000000002.nbs", "snapshot-0000000003.nbs"]
    newest = tmp_path / "snapshot-0000000003.nbs"
    newest.write_bytes(newest.read_bytes()[:-10])
    model, meta, path = store.latest()
    assert meta.extra == {"n": 2} and model.n_examples_seen_ == 2 and path.name == "snapshot-0000000002.nbs"
    assert "skipping unreadable snapshot" in caplog.text
    assert SnapshotStore(tmp_path / "empty").latest() is None
