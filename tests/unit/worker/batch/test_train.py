"""`worker train`'s restarts: what a checkpoint must match to be continued, and how a run begins
(continued from --out, kept training from --resume, or fresh, checked against the data)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import nbstream
from nbstream.arrow import FeatureError
from nbstream.persistence.snapshot import read_header
from worker.batch import train as train_module
from worker.batch.train import TrainRun, _initial_run, run_signature, train
from worker.config import FeatureOptions, ModelOptions, TrainConfig
from worker.errors import ConfigError
from worker.io.parquet.source import Position, expand_paths
from worker.snapshot_meta import SnapshotMeta, read_snapshot, write_snapshot

DEFAULT_FEATURES = {"columns": ["x", "y"], "text": None, "hash_bits": 20, "ngrams": 1}
NO_PARAMETERS = {"alpha": None, "binarize": None, "fit_prior": None, "norm": None, "var_smoothing": None,
                 "min_categories": None, "half_life": None, "window": None, "window_buckets": None, "counts": None}


def parquet(path: Path, **columns) -> str:
    """A Parquet file of these columns, two rows a row group."""
    pq.write_table(pa.table(columns), path, row_group_size=2)
    return str(path)


def data(path: Path, rows: int = 6) -> str:
    """Counts x, y and a label; the label of row 1 is missing (a row --skip-invalid sets aside)."""
    labels = ["a" if i % 2 == 0 else "b" for i in range(rows)]
    labels[1] = None
    return parquet(path, x=[i % 3 for i in range(rows)], y=[(i + 1) % 2 for i in range(rows)], label=labels)


def settings(paths, out: Path, **options) -> TrainConfig:
    options.setdefault("features", FeatureOptions(columns=["x", "y"]))
    return TrainConfig(paths=[str(p) for p in paths], label=options.pop("label", "label"), out=out,
                       batch_size=2, checkpoint_every=2, skip_invalid=True, **options)


def resuming(paths, base: Path, out: Path, **options) -> TrainConfig:
    """As the command line builds it for --resume without --model: no kind of its own."""
    return settings(paths, out, model=options.pop("model", ModelOptions(kind=None)),
                    features=options.pop("features", FeatureOptions()), resume=base, **options)


def begin(config: TrainConfig) -> TrainRun:
    files = expand_paths(config.paths)
    return _initial_run(config, files, run_signature(config, files))


def interrupted(monkeypatch, config: TrainConfig, after_batches: int) -> None:
    """Run ``config`` and stop it (as Ctrl-C does) when it is about to learn its batch number
    ``after_batches + 1``; the checkpoints written until then stay."""
    learn, learned = train_module._learn, []

    def learn_until_stopped(*args):
        if len(learned) == after_batches:
            raise KeyboardInterrupt
        learned.append(args)
        learn(*args)

    monkeypatch.setattr(train_module, "_learn", learn_until_stopped)
    with pytest.raises(KeyboardInterrupt):
        train(config)
    monkeypatch.setattr(train_module, "_learn", learn)


# ---- run_signature ---------------------------------------------------------------------------
def test_the_signature_holds_the_resolved_files_the_label_the_model_and_the_features(tmp_path, monkeypatch):
    data(tmp_path / "a.parquet")
    monkeypatch.chdir(tmp_path)
    config = settings(["a.parquet"], Path("model.nbs"), model=ModelOptions(alpha=0.5))
    assert run_signature(config, expand_paths(config.paths)) == {
        "files": [str(tmp_path.resolve() / "a.parquet")], "label": "label",
        "model": {"kind": "multinomial", **NO_PARAMETERS, "alpha": 0.5}, "features": DEFAULT_FEATURES,
        "resume": None}


def test_the_signature_names_the_resume_base_by_its_resolved_path_and_creation_time(tmp_path, monkeypatch):
    first = data(tmp_path / "a.parquet")
    train(settings([first], tmp_path / "base.nbs"))
    monkeypatch.chdir(tmp_path)
    config = resuming([first], Path("base.nbs"), Path("more.nbs"))
    signature = run_signature(config, [first])
    assert signature["resume"] == {"path": str(tmp_path.resolve() / "base.nbs"),
                                   "created_at": read_header(tmp_path / "base.nbs")["created_at"]}
    assert signature["model"] == {"kind": None, **NO_PARAMETERS}
    train(settings([first], tmp_path / "base.nbs", fresh=True))  # the same path, another base
    assert run_signature(config, [first])["resume"]["created_at"] != signature["resume"]["created_at"]


# ---- continuing the checkpointed run at --out -------------------------------------------------
def test_a_restart_continues_the_checkpointed_run_with_its_position_rows_read_and_rejected(tmp_path, monkeypatch):
    config = settings([data(tmp_path / "a.parquet")], tmp_path / "model.nbs")
    interrupted(monkeypatch, config, after_batches=2)  # checkpoints after rows 2 and 4

    run = begin(config)
    assert (run.start, run.position, run.rows_read, run.rejects.count) == (Position(0, 4), Position(0, 4), 4, 1)
    assert run.model.n_examples_seen_ == 3 and run.features.n_features == 2

    summary = train(config)
    assert (summary.resumed_from, summary.rows_read, summary.rows_learned, summary.rows_rejected) == \
        (Position(0, 4), 6, 2, 1)
    whole = train(settings(config.paths, tmp_path / "whole.nbs")).model
    np.testing.assert_array_equal(summary.model.feature_count_, whole.feature_count_)  # no row learned twice
    np.testing.assert_array_equal(summary.model.class_count_, whole.class_count_)


def test_a_resumed_run_is_continued_too_while_its_base_is_unchanged(tmp_path, monkeypatch):
    first, second = data(tmp_path / "a.parquet"), data(tmp_path / "b.parquet")
    train(settings([first], tmp_path / "base.nbs"))
    config = resuming([second], tmp_path / "base.nbs", tmp_path / "more.nbs")
    interrupted(monkeypatch, config, after_batches=1)
    assert begin(config).start == Position(0, 2)
    train(settings([first], tmp_path / "base.nbs", fresh=True))  # the base rewritten since
    with pytest.raises(ConfigError, match="holds a snapshot of a different run"):
        begin(config)


@pytest.mark.parametrize("change", [
    {"label": "y"}, {"model": ModelOptions(alpha=0.5)}, {"model": ModelOptions(kind="bernoulli")},
    {"features": FeatureOptions(columns=["x"])}, {"features": FeatureOptions(columns=["x", "y"], hash_bits=10)},
    {"paths": "both files"}], ids=["label", "parameter", "model", "features", "feature option", "files"])
def test_a_checkpoint_of_a_run_with_other_settings_is_refused_unless_fresh(tmp_path, monkeypatch, change):
    first, second = data(tmp_path / "a.parquet"), data(tmp_path / "b.parquet")
    out = tmp_path / "model.nbs"
    interrupted(monkeypatch, settings([first], out), after_batches=2)
    change = dict(change)
    paths = [first, second] if change.pop("paths", None) else [first]
    other = settings(paths, out, **change)
    with pytest.raises(ConfigError) as refused:
        begin(other)
    assert str(refused.value) == (f"{out} holds a snapshot of a different run; pass --fresh to overwrite it, "
                                  f"or --resume {out} with another --out to keep training it.")
    other.fresh = True
    run = begin(other)
    assert (run.start, run.rows_read, run.rejects.count, run.model.is_fitted) == (Position(), 0, 0, False)


def test_a_snapshot_no_train_run_wrote_is_a_different_run(tmp_path):
    out = tmp_path / "model.nbs"
    model = nbstream.MultinomialNB().partial_fit(np.ones((1, 2)), ["a"])
    write_snapshot(model, out, SnapshotMeta(features=nbstream.arrow.FeatureSpec.numeric_columns(["x", "y"]).encoder()))
    with pytest.raises(ConfigError, match="holds a snapshot of a different run; pass --fresh"):
        begin(settings([data(tmp_path / "a.parquet")], out))


# ---- --resume ------------------------------------------------------------------------------------
@pytest.fixture
def base(tmp_path) -> Path:
    """A multinomial model trained on a.parquet (6 rows, 5 learned)."""
    train(settings([data(tmp_path / "a.parquet")], tmp_path / "base.nbs"))
    return tmp_path / "base.nbs"


def test_resume_keeps_training_the_snapshot_with_its_features(tmp_path, base):
    run = begin(resuming([data(tmp_path / "b.parquet")], base, tmp_path / "more.nbs"))
    model, meta = read_snapshot(base)
    assert run.model.n_examples_seen_ == 5 and run.model.kind == "multinomial"
    np.testing.assert_array_equal(run.model.feature_count_, model.feature_count_)
    assert run.features.to_json() == meta.features.to_json() == {"kind": "columns", "columns": ["x", "y"],
                                                                   "n_features": 2}
    assert (run.start, run.rows_read, run.rejects.count) == (Position(), 0, 0)


def test_resume_accepts_a_model_option_that_names_the_snapshot_kind(tmp_path, base):
    run = begin(resuming([data(tmp_path / "b.parquet")], base, tmp_path / "more.nbs",
                         model=ModelOptions(kind="Multinomial")))
    assert run.model.n_examples_seen_ == 5


@pytest.mark.parametrize("out", ["base.nbs", "sub/../base.nbs"])
@pytest.mark.parametrize("fresh", [True, False])
def test_resume_refuses_its_own_snapshot_as_out(tmp_path, base, out, fresh):
    (tmp_path / "sub").mkdir()
    config = resuming([data(tmp_path / "b.parquet")], base, tmp_path / out, fresh=fresh)
    with pytest.raises(ConfigError) as refused:
        begin(config)
    assert str(refused.value) == "--out must differ from --resume: the base snapshot identifies the run."


@pytest.mark.parametrize("features", [FeatureOptions(columns=["x", "y"]), FeatureOptions(text="x")],
                         ids=["--features", "--text"])
def test_resume_refuses_feature_options(tmp_path, base, features):
    config = resuming([data(tmp_path / "b.parquet")], base, tmp_path / "more.nbs", features=features)
    with pytest.raises(ConfigError) as refused:
        begin(config)
    assert str(refused.value) == "--resume takes the features from the snapshot; drop --features/--text."


@pytest.mark.parametrize("parameter", [{"alpha": 0.5}, {"fit_prior": False}, {"binarize": 0.0}],
                         ids=["alpha", "fit_prior", "binarize"])
def test_resume_refuses_parameter_options(tmp_path, base, parameter):
    config = resuming([data(tmp_path / "b.parquet")], base, tmp_path / "more.nbs",
                      model=ModelOptions(kind=None, **parameter))
    with pytest.raises(ConfigError) as refused:
        begin(config)
    assert str(refused.value) == "--resume keeps the snapshot's model parameters; drop the parameter options."


def test_resume_refuses_a_model_option_of_another_kind(tmp_path, base):
    config = resuming([data(tmp_path / "b.parquet")], base, tmp_path / "more.nbs", model=ModelOptions(kind="bernoulli"))
    with pytest.raises(ConfigError) as refused:
        begin(config)
    assert str(refused.value) == f"--model bernoulli contradicts the multinomial model in {base}."


def test_resume_on_files_without_the_label_column_names_it_in_one_line(tmp_path, base):
    other = parquet(tmp_path / "b.parquet", x=[1, 0], y=[0, 1], lab=["a", "b"])
    with pytest.raises(ConfigError) as refused:
        train(resuming([other], base, tmp_path / "more.nbs"))
    assert str(refused.value) == f"{other}: label column 'label' not found; columns are ['x', 'y', 'lab']."


# ---- a fresh start ---------------------------------------------------------------------------------
def test_a_fresh_start_builds_the_configured_model_and_encoder(tmp_path):
    run = begin(settings([data(tmp_path / "a.parquet")], tmp_path / "model.nbs", model=ModelOptions(alpha=0.5)))
    assert repr(run.model) == "MultinomialNB(alpha=0.5)" and not run.model.is_fitted
    assert run.features.kind == "columns" and run.features.columns == ["x", "y"]
    assert (run.start, run.rows_read, run.rejects.count) == (Position(), 0, 0)


def test_a_fresh_start_reads_a_single_list_column_as_a_vector(tmp_path):
    vectors = parquet(tmp_path / "v.parquet", v=[[1, 0, 2], [0, 1, 0]], label=["a", "b"])
    numbers = parquet(tmp_path / "n.parquet", v=[1, 0], label=["a", "b"])
    assert begin(settings([vectors], tmp_path / "v.nbs", features=FeatureOptions(columns=["v"]))).features.kind == \
        "vector"
    assert begin(settings([numbers], tmp_path / "n.nbs", features=FeatureOptions(columns=["v"]))).features.kind == \
        "columns"


def test_a_fresh_start_checks_the_label_column_against_the_first_file(tmp_path):
    first = data(tmp_path / "a.parquet")
    with pytest.raises(ConfigError) as refused:
        begin(settings([first], tmp_path / "model.nbs", label="class"))
    assert str(refused.value) == f"{first}: label column 'class' not found; columns are ['x', 'y', 'label']."


@pytest.mark.parametrize(("columns", "problem"), [
    (["x", "z"], "column 'z' not found; columns are ['x', 'y', 'label']"),
    (["x", "label"], "column 'label' has type string; expected a numeric column")])
def test_a_fresh_start_checks_the_feature_columns_against_the_first_file(tmp_path, columns, problem):
    first = data(tmp_path / "a.parquet")
    with pytest.raises(FeatureError) as refused:
        begin(settings([first], tmp_path / "model.nbs", features=FeatureOptions(columns=columns)))
    assert str(refused.value) == f"{first}: {problem}."


def test_a_later_file_without_the_label_column_is_named_in_one_line(tmp_path):
    first = data(tmp_path / "a.parquet")
    later = parquet(tmp_path / "b.parquet", x=[1, 0], y=[0, 1], lab=["a", "b"])
    config = settings([first, later], tmp_path / "model.nbs")
    assert begin(config).start == Position()  # only the first file is read before training
    with pytest.raises(ConfigError) as refused:
        train(config)
    assert str(refused.value) == f"{later}: label column 'label' not found; columns are ['x', 'y', 'lab']."
