"""A snapshot file as the answering model: reloaded when replaced, a replacement that does not load
refused in one log line while the model before keeps answering."""

from __future__ import annotations

import logging
import os

import numpy as np
import pyarrow as pa
import pytest

import nbstream
from nbstream.arrow import FeatureSpec, Pipeline
from worker.inference.snapshot_file import SnapshotLoadError, SnapshotModel, load_answering


def _pipeline(model: nbstream.NaiveBayes, seed: int = 0, column: str = "pixels") -> Pipeline:
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 4, size=(200, 8))
    encoder = FeatureSpec.vector(column).encoder()
    encoder.encode(pa.record_batch({column: pa.array(list(X[:1]), pa.list_(pa.int64()))}), learn=True)
    return Pipeline(model.fit(X, X[:, 0] % 2), encoder, label="y")


def _replace(path, pipeline: Pipeline) -> None:
    """Replace the file atomically, as the worker's commands write snapshots."""
    pipeline.save(path)
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 1_000_000))


def test_the_version_is_the_snapshot_checksum_and_a_replacement_is_read_for_the_next_request(tmp_path):
    path = tmp_path / "m.nbs"
    _pipeline(nbstream.MultinomialNB(), seed=0).save(path)
    source = SnapshotModel(path, "m", reload=True)
    first = source.models()["m"]
    assert first.version == path.read_bytes()[-32:].hex()[:16]
    _replace(path, _pipeline(nbstream.MultinomialNB(), seed=1))
    second = source.models()["m"]
    assert second.version != first.version
    assert second.version == path.read_bytes()[-32:].hex()[:16]
    assert source.models()["m"] is second  # an unchanged file is not read again


def test_without_reload_the_first_model_answers_for_ever(tmp_path):
    path = tmp_path / "m.nbs"
    _pipeline(nbstream.MultinomialNB(), seed=0).save(path)
    source = SnapshotModel(path, "m", reload=False)
    first = source.models()["m"]
    _replace(path, _pipeline(nbstream.MultinomialNB(), seed=1))
    assert source.models()["m"] is first


@pytest.mark.parametrize("replacement, cause", [
    (lambda path: path.write_bytes(path.read_bytes()[:-40]), "truncated"),
    (lambda path: path.write_bytes(b"NBSTREAM" + os.urandom(200)), "not"),
    (lambda path: _replace(path, _pipeline(nbstream.BernoulliNB())), "holds a bernoulli model, not a multinomial one"),
    (lambda path: _replace(path, _pipeline(nbstream.MultinomialNB(), column="image")), "its inputs"),
])
def test_a_replacement_that_does_not_load_is_refused_and_the_old_model_answers(tmp_path, caplog, replacement,
                                                                                cause):
    path = tmp_path / "m.nbs"
    _pipeline(nbstream.MultinomialNB(), seed=0).save(path)
    source = SnapshotModel(path, "m", reload=True)
    first = source.models()["m"]
    replacement(path)
    with caplog.at_level(logging.ERROR):
        assert source.models()["m"] is first
        assert source.models()["m"] is first  # and it is not tried again until it changes
    refusals = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == 1
    assert cause in refusals[0].cause.lower() or cause in refusals[0].cause
    _replace(path, _pipeline(nbstream.MultinomialNB(), seed=3))
    assert source.models()["m"].version != first.version  # a good file after it is taken


def test_a_folder_of_copies_stands_for_its_newest(tmp_path):
    for number, seed in ((1, 0), (2, 1)):
        _pipeline(nbstream.MultinomialNB(), seed=seed).save(tmp_path / f"snapshot-{number:010d}.nbs")
    source = SnapshotModel(tmp_path, "m", reload=True)
    assert source.models()["m"].version == (tmp_path / "snapshot-0000000002.nbs").read_bytes()[-32:].hex()[:16]
    _pipeline(nbstream.MultinomialNB(), seed=2).save(tmp_path / "snapshot-0000000003.nbs")
    assert source.models()["m"].version == (tmp_path / "snapshot-0000000003.nbs").read_bytes()[-32:].hex()[:16]


@pytest.mark.parametrize("make, words", [
    (lambda p: None, "no such file"),
    (lambda p: p.mkdir(), "directory"),
    (lambda p: os.mkfifo(p), "not a regular file"),
    (lambda p: p.write_bytes(b"x" * 10), "not"),
])
def test_a_file_that_cannot_serve_is_one_line(tmp_path, make, words):
    path = tmp_path / "m.nbs"
    make(path)
    with pytest.raises(SnapshotLoadError) as raised:
        load_answering(path, "m")
    assert words in str(raised.value).lower() and "\n" not in str(raised.value)
