"""The service's pieces that need no broker: snapshot folder, message decoding, checkpoint policy."""

from __future__ import annotations

import json
import time

import numpy as np

import nbstream
from nbstream.features import FeatureSpec
from worker.checkpoint import CheckpointPolicy
from worker.messages import MessageFormat, decode
from worker.state import SnapshotStore


def model_with(n):
    return nbstream.MultinomialNB().partial_fit(np.ones((n, 2)), ["a"] * n)


def test_the_store_keeps_the_last_k_and_falls_back_past_a_corrupt_one(tmp_path, caplog):
    store = SnapshotStore(tmp_path, keep=2)
    for n in (1, 2, 3):
        store.save(model_with(n), {"n": n})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snapshot-0000000002.nbs", "snapshot-0000000003.nbs"]
    newest = tmp_path / "snapshot-0000000003.nbs"
    newest.write_bytes(newest.read_bytes()[:-10])
    model, meta, path = store.latest()
    assert meta == {"n": 2} and model.n_examples_seen_ == 2 and path.name == "snapshot-0000000002.nbs"
    assert "skipping unreadable snapshot" in caplog.text
    assert SnapshotStore(tmp_path / "empty").latest() is None


def test_json_messages_decode_into_the_specs_columns_with_problems_named():
    spec = FeatureSpec.numeric_columns(["age", "income"])
    values = [json.dumps({"id": 1, "features": {"age": 30, "income": 2.5}, "label": "yes"}).encode(),
              json.dumps({"id": 2, "features": {"age": 41}}).encode(),
              json.dumps({"features": {"age": "old", "income": 1}}).encode(),
              json.dumps({"features": {"age": 50, "income": 3.0}, "label": 1}).encode()]
    decoded = decode(values, spec, MessageFormat())
    assert decoded.ids == [1, 2, None, None]
    assert decoded.problems.message[1] == "features ['income'] missing"
    assert decoded.problems.message[2] == "non-numeric value"
    assert decoded.batch.column("age").to_pylist()[0] == 30.0
    assert decoded.batch.column("label").to_pylist() == ["yes", None, None, "1"]  # mixed: compared as text


def test_text_messages_and_size_limits():
    spec = FeatureSpec.text("body", hash_bits=8)
    fmt = MessageFormat(text_field="body", max_bytes=40)
    values = [b'{"body": "hello there"}', b'{"body": 42}', b'{"body": "' + b"x" * 50 + b'"}']
    decoded = decode(values, spec, fmt)
    assert decoded.problems.bad.tolist() == [False, True, True]
    assert decoded.problems.message[1] == "field 'body' must be a string"
    assert decoded.problems.message[2].startswith("message of 62 bytes exceeds the limit of 40")


def test_checkpoint_policy_counts_rows_or_time():
    by_rows = CheckpointPolicy(every_rows=100)
    assert not by_rows.record(60) and by_rows.record(40)
    by_rows.reset()
    assert not by_rows.record(99)
    by_time = CheckpointPolicy(every_seconds=0.05)
    assert not by_time.record(1)
    time.sleep(0.06)
    assert by_time.record(0)


def test_json_logs_are_one_object_per_line(capsys):
    import logging

    from worker.logs import configure_logging

    configure_logging(json_lines=True)
    logging.getLogger("worker.test").info("checkpoint %s", "snapshot-1")
    line = capsys.readouterr().err.strip().splitlines()[-1]
    entry = json.loads(line)
    assert entry["message"] == "checkpoint snapshot-1" and entry["level"] == "INFO"
    logging.getLogger().handlers[:] = []
