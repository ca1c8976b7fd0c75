"""Interrupted runs continue exactly; bad input is named or set aside, never lost."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import nbstream
import worker.batch.train
from nbstream.persistence.snapshot import read_header
from tests.helpers.arrays import dense
from tests.helpers.cli import invoke, worker_env
from tests.helpers.paths import SMS

TRAIN = ["--label", "label", "--text", "text", "--batch-size", "300", "--checkpoint-every", "900"]


def test_an_interrupted_run_restarted_with_the_same_command_counts_every_row_once(tmp_path, monkeypatch):
    whole = tmp_path / "whole.nbs"
    assert invoke("train", SMS / "train.parquet", *TRAIN, "--out", whole).exit_code == 0
    original = worker.batch.train.read_batches

    def interrupted(*args, **kwargs):
        for number, batch in enumerate(original(*args, **kwargs)):
            if number == 7:
                raise KeyboardInterrupt
            yield batch

    out = tmp_path / "run.nbs"
    monkeypatch.setattr(worker.batch.train, "read_batches", interrupted)
    assert invoke("train", SMS / "train.parquet", *TRAIN, "--out", out).exit_code == 130  # as after Ctrl-C
    position = read_header(out)["meta"]["source"]["position"]
    assert position == {"file_index": 0, "row": 1800}  # the checkpoint after 6 batches of 300
    monkeypatch.setattr(worker.batch.train, "read_batches", original)
    result = invoke("train", SMS / "train.parquet", *TRAIN, "--out", out)
    assert result.exit_code == 0, result.output
    assert "continued from file 0, row 1800" in result.output
    resumed, reference = nbstream.load(out), nbstream.load(whole)
    assert resumed.n_examples_seen_ == reference.n_examples_seen_ == 4_459
    np.testing.assert_array_equal(dense(resumed.feature_count_), dense(reference.feature_count_))
    np.testing.assert_array_equal(resumed.class_count_, reference.class_count_)
    # A finished run asked again learns nothing more.
    again = invoke("train", SMS / "train.parquet", *TRAIN, "--out", out)
    assert "learned 0 rows" in again.output
    assert nbstream.load(out).n_examples_seen_ == 4_459


def test_a_killed_subprocess_restarted_gives_the_uninterrupted_statistics(tmp_path, mnist_parquet):
    command = [sys.executable, "-m", "worker", "train", str(mnist_parquet["train"]), "--label", "label",
               "--features", "pixels", "--model", "gaussian", "--batch-size", "1000", "--checkpoint-every", "3000"]
    env = worker_env()
    out = tmp_path / "killed.nbs"
    process = subprocess.Popen(command + ["--out", str(out)], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not read_header(out)["meta"]["source"]["complete"], "finished before the kill"
    subprocess.run(command + ["--out", str(out)], env=env, check=True, capture_output=True, timeout=300)
    subprocess.run(command + ["--out", str(tmp_path / "whole.nbs")], env=env, check=True, capture_output=True,
                   timeout=300)
    resumed, whole = nbstream.load(out), nbstream.load(tmp_path / "whole.nbs")
    assert resumed.n_examples_seen_ == whole.n_examples_seen_ == 60_000
    np.testing.assert_array_equal(resumed.class_count_, whole.class_count_)
    np.testing.assert_allclose(resumed.theta_, whole.theta_, rtol=1e-12)
    np.testing.assert_allclose(resumed.var_, whole.var_, rtol=1e-12)


def test_an_existing_snapshot_of_another_run_is_not_overwritten(tmp_path):
    out = tmp_path / "m.nbs"
    invoke("train", SMS / "test.parquet", "--label", "label", "--text", "text", "--out", out)
    result = invoke("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--out", out)
    assert result.exit_code == 2 and "different run" in result.output
    result = invoke("train", SMS / "train.parquet", "--label", "label", "--text", "text", "--out", out, "--fresh")
    assert result.exit_code == 0 and nbstream.load(out).n_examples_seen_ == 4_459


INVALID_UTF8 = pa.array([b"ok", b"\xff\xfe bad"], pa.binary()).view(pa.string())  # Arrow does not validate views


def write(tmp_path, name, **columns):
    path = tmp_path / name
    pq.write_table(pa.table(columns), path)
    return path


@pytest.mark.parametrize("case, columns, expected", [
    ("null label", {"v": pa.array([[1, 2], [3, 4], [5, 6]]), "label": pa.array(["a", None, "b"])},
     r"bad.parquet: row 1, column 'label': null label"),
    ("ragged", {"v": pa.array([[1, 2], [3, 4], [5]]), "label": pa.array(["a", "b", "a"])},
     r"bad.parquet: row 2, column 'v': list has 1 values; expected 2"),
    ("nan", {"v": pa.array([[1.0, np.nan], [3.0, 4.0]]), "label": pa.array(["a", "b"])},
     r"bad.parquet: row 0, column 'v': NaN or infinite value"),
    ("missing column", {"w": pa.array([[1, 2]]), "label": pa.array(["a"])},
     r"bad.parquet: column 'v' not found; columns are \['w', 'label'\]"),
    ("wrong type", {"v": pa.array(["x"]), "label": pa.array(["a"])},
     r"bad.parquet: column 'v' has type string; expected a numeric column"),
    ("fractional label", {"v": pa.array([[1, 2], [3, 4]]), "label": pa.array([1.0, 2.5])},
     r"bad.parquet: row 1, column 'label': fractional label"),
    ("infinite label", {"v": pa.array([[1, 2], [3, 4]]), "label": pa.array([np.inf, 1.0])},
     r"bad.parquet: row 0, column 'label': infinite label"),
    ("invalid UTF-8 label", {"v": pa.array([[1, 2], [3, 4]]), "label": INVALID_UTF8},
     r"bad.parquet: row 1, column 'label': invalid UTF-8"),
    ("only empty lists", {"v": pa.array([[], []], pa.list_(pa.int64())), "label": pa.array(["a", "b"])},
     r"bad.parquet: row 0, column 'v': empty list \(a model needs at least one feature\)"),
])
def test_bad_input_is_named_by_file_column_and_row(tmp_path, case, columns, expected):
    path = write(tmp_path, "bad.parquet", **columns)
    result = invoke("train", path, "--label", "label", "--features", "v", "--model", "gaussian",
                    "--out", tmp_path / "m.nbs")
    assert result.exit_code == 2
    assert re.search(expected, result.output.replace("\n", " ")), result.output


@pytest.mark.parametrize("options", [("--text", "text"), ("--features", "text", "--model", "categorical")])
def test_invalid_utf8_text_is_a_bad_row_in_train_predict_and_evaluate(tmp_path, options):
    invalid_utf8 = pa.array([b"spam spam", b"\xff\xfe", b"ham"], pa.binary()).view(pa.string())
    path = write(tmp_path, "a.parquet", text=invalid_utf8, label=pa.array(["spam", "ham", "ham"]))
    refused = invoke("train", path, "--label", "label", *options, "--out", tmp_path / "m.nbs")
    assert refused.exit_code == 2 and "a.parquet: row 1, column 'text': invalid UTF-8" in refused.output
    result = invoke("train", path, "--label", "label", *options, "--out", tmp_path / "m.nbs", "--skip-invalid")
    assert result.exit_code == 0 and "learned 2 rows (1 rejected in all)" in result.output, result.output
    predicted = invoke("predict", tmp_path / "m.nbs", path, "--out", tmp_path / "p.parquet", "--skip-invalid")
    assert predicted.exit_code == 0, predicted.output
    table = pq.read_table(tmp_path / "p.parquet")
    assert table.column("prediction").to_pylist()[1] is None and table.num_rows == 3
    evaluated = invoke("evaluate", tmp_path / "m.nbs", path, "--skip-invalid")
    assert evaluated.exit_code == 0 and "support" in evaluated.output, evaluated.output


def test_the_class_set_is_bounded_by_max_classes(tmp_path):
    many = write(tmp_path, "many.parquet", a=pa.array(np.ones(5_000)), label=pa.array(np.arange(5_000)))
    refused = invoke("train", many, "--label", "label", "--features", "a", "--model", "gaussian",
                     "--out", tmp_path / "m.nbs")
    assert refused.exit_code == 2
    assert "many.parquet: row 1000, column 'label': label would add a class beyond --max-classes 1000" \
        in refused.output.replace("\n", " ")
    four = write(tmp_path, "four.parquet", a=pa.array(np.ones(6)), label=pa.array([1, 2, 3, 1, 4, 2]))
    result = invoke("train", four, "--label", "label", "--features", "a", "--model", "gaussian", "--max-classes", 3,
                    "--out", tmp_path / "f.nbs", "--skip-invalid")
    assert result.exit_code == 0 and "learned 5 rows (1 rejected in all)" in result.output, result.output
    assert nbstream.load(tmp_path / "f.nbs").classes_.tolist() == [1, 2, 3]


def test_a_malformed_first_row_does_not_set_the_list_width(tmp_path):
    path = write(tmp_path, "a.parquet", v=pa.array([[1], [1, 2], [3, 4], [5, 6]]), label=pa.array(["x", "y", "x", "y"]))
    result = invoke("train", path, "--label", "label", "--features", "v", "--out", tmp_path / "m.nbs",
                    "--skip-invalid")
    assert result.exit_code == 0, result.output
    assert "learned 3 rows (1 rejected in all)" in result.output
    assert nbstream.load(tmp_path / "m.nbs").n_features_in_ == 2


def test_a_file_of_empty_lists_only_is_refused_not_learned(tmp_path):
    path = write(tmp_path, "a.parquet", v=pa.array([[], []], pa.list_(pa.int64())), label=pa.array(["x", "y"]))
    result = invoke("train", path, "--label", "label", "--features", "v", "--out", tmp_path / "m.nbs",
                    "--skip-invalid")
    assert result.exit_code == 2 and "no valid labeled rows" in result.output
    assert not (tmp_path / "m.nbs").exists()


def test_an_unreadable_parquet_file_is_named(tmp_path):
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"PAR1 this is not parquet")
    result = invoke("train", path, "--label", "label", "--features", "v", "--out", tmp_path / "m.nbs")
    assert result.exit_code == 2 and "broken.parquet: cannot read as Parquet" in result.output
    result = invoke("train", tmp_path / "absent.parquet", "--label", "label", "--features", "v",
                    "--out", tmp_path / "m.nbs")
    assert result.exit_code == 2 and "no such Parquet file" in result.output


def test_skip_invalid_counts_and_writes_every_rejected_row(tmp_path):
    good = write(tmp_path, "a.parquet", v=pa.array([[1, 2], [3, 4], [5, 6], [1, 1]]),
                 label=pa.array(["x", "y", "x", "y"]))
    bad = write(tmp_path, "b.parquet", v=pa.array([[1, -2], [3], [5, 6], None]),
                label=pa.array(["x", "y", None, "x"]))
    result = invoke("train", good, bad, "--label", "label", "--features", "v", "--out", tmp_path / "m.nbs",
                    "--skip-invalid")
    assert result.exit_code == 0, result.output
    assert "learned 4 rows (4 rejected in all)" in result.output
    rejects = pq.read_table(tmp_path / "m.nbs.rejects").sort_by("_row")
    assert rejects.column("_row").to_pylist() == [0, 1, 2, 3]
    assert rejects.column("_error").to_pylist() == [
        "negative value (this model needs counts)", "list has 1 values; expected 2", "null label", "null value"]
    assert set(rejects.column("_file").to_pylist()) == {str(bad)}
    assert rejects.column("v").to_pylist()[1] == [3]
    assert read_header(tmp_path / "m.nbs")["meta"]["rows_rejected"] == 4


def test_predict_with_skip_invalid_keeps_one_row_per_input_row(tmp_path):
    train = write(tmp_path, "t.parquet", v=pa.array([[1.0, 2.0], [3.0, 1.0]]), label=pa.array(["a", "b"]))
    invoke("train", train, "--label", "label", "--features", "v", "--model", "gaussian", "--out", tmp_path / "m.nbs")
    score = write(tmp_path, "s.parquet", v=pa.array([[1.0, 2.0], [np.nan, 1.0], [3.0, 1.0]]))
    result = invoke("predict", tmp_path / "m.nbs", score, "--out", tmp_path / "p.parquet")
    assert result.exit_code == 2 and "row 1, column 'v': NaN" in result.output
    result = invoke("predict", tmp_path / "m.nbs", score, "--out", tmp_path / "p.parquet", "--skip-invalid")
    table = pq.read_table(tmp_path / "p.parquet")
    assert table.column("prediction").to_pylist() == ["a", None, "b"]
    assert table.column("error").to_pylist() == [None, "v: NaN or infinite value", None]


def test_a_checkpoint_due_before_anything_is_learned_writes_nothing_yet(tmp_path):
    """The first file's rows are all set aside: the checkpoints due meanwhile have no model to write."""
    pq.write_table(pa.table({"x": [1.0, 2.0], "label": pa.array([None, None], pa.string())}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"x": [1.0, 2.0], "label": ["p", "q"]}), tmp_path / "b.parquet")
    result = invoke("train", tmp_path / "a.parquet", tmp_path / "b.parquet", "--label", "label", "--features", "x",
                    "--model", "gaussian", "--checkpoint-every", 1, "--batch-size", 1, "--skip-invalid",
                    "--out", tmp_path / "m.nbs")
    assert result.exit_code == 0, result.output
    assert nbstream.load(tmp_path / "m.nbs").n_examples_seen_ == 2
