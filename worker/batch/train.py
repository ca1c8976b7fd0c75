"""`worker train`: learn from Parquet files in bounded memory, checkpointing the position.

A checkpointed snapshot at --out records the files, the position reached and a signature
of the run's settings. The same command run again continues from that position (no row is
counted twice); a different command refuses to overwrite it unless --fresh.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

import nbstream
from nbstream.arrow import FeatureEncoder, KeyedPipelineLearner, Pipeline, PipelineLearner, UnusableRow
from nbstream.arrow.keys import check_key_type
from nbstream.arrow.ml_vectors import is_vector_type
from nbstream.naive_bayes import NaiveBayes
from nbstream.naive_bayes.keyed import DEFAULT_PRIOR_WEIGHT, KeyedNB
from nbstream.persistence.snapshot import read_header

from ..checkpoint import Checkpointer, CheckpointPolicy
from ..config import TrainConfig
from ..errors import ConfigError, InvalidRowError
from ..io.parquet.rejects import ParquetRejects
from ..io.parquet.source import Batch, Position, count_rows, expand_paths, open_file, read_batches
from ..progress import RowProgress
from ..snapshot_meta import ParquetProgress, SnapshotMeta, read_snapshot_with_keys, write_snapshot


@dataclass
class TrainSummary:
    rows_read: int
    rows_learned: int
    rows_rejected: int
    seconds: float
    resumed_from: Position | None
    snapshot: Path
    model: NaiveBayes[Any, Any]
    features: FeatureEncoder
    keys: int | None = None  # --model-key: the keys the snapshot holds


def run_signature(config: TrainConfig, files: list[str]) -> dict[str, Any]:
    """What must match for a restart to continue a checkpointed run."""
    base = None
    if config.resume:
        header = read_header(config.resume)
        base = {"path": str(Path(config.resume).resolve()), "created_at": header["created_at"]}
    signature = {"files": [str(Path(f).resolve()) for f in files], "label": config.label,
                 "model": asdict(config.model), "features": asdict(config.features), "resume": base}
    if config.model_key is not None:
        signature["keys"] = {"column": config.model_key, "prior_weight": config.key_prior_weight}
    return signature


class TrainRun:
    """The state of one training run: the pipeline learned (model and features), position and
    counters. Its ``write`` is the checkpoint's state step: the snapshot at --out, holding the
    position reached.

    keyed : the model per key learned (--model-key), whose group model is the pipeline's once it
    has learned (``model``, before that, is the template of its family)"""

    def __init__(self, config: TrainConfig, signature: dict[str, Any], model: NaiveBayes[Any, Any],
                 features: FeatureEncoder, start: Position | None = None, rows_read: int = 0,
                 rows_rejected: int = 0, keyed: KeyedNB | None = None):
        self.config, self.signature, self.keyed = config, signature, keyed
        self.pipeline = Pipeline(model, features, label=config.label)
        self.learner = PipelineLearner(self.pipeline, max_classes=config.max_classes,
                                       skip_invalid=config.skip_invalid) if keyed is None else \
            KeyedPipelineLearner(self.pipeline, keyed, str(config.model_key), max_classes=config.max_classes,
                                 skip_invalid=config.skip_invalid)
        self.start = self.position = start or Position()
        self.rows_read = rows_read
        self.complete = False
        self.rejects = ParquetRejects(config.rejects_dir, count=rows_rejected)

    @property
    def model(self) -> NaiveBayes[Any, Any]:
        return self.pipeline.model

    @property
    def features(self) -> FeatureEncoder:
        return self.pipeline.features

    def advance(self, batch: Batch) -> None:
        self.rows_read += batch.data.num_rows
        self.position = batch.end

    def finish(self, n_files: int) -> None:
        self.position, self.complete = Position(n_files, 0), True

    def write(self) -> bool:
        if not self.model.is_fitted:
            return False  # nothing learned yet: a snapshot of no model cannot be written, nor resumed
        meta = SnapshotMeta(features=self.features, label=self.config.label, run=self.signature,
                            rows_read=self.rows_read, rows_rejected=self.rejects.count,
                            source=ParquetProgress(self.signature["files"], self.position, self.complete))
        write_snapshot(self.keyed or self.model, self.config.out, meta)
        return True


def _initial_run(config: TrainConfig, files: list[str], signature: dict[str, Any]) -> TrainRun:
    """Continue the checkpointed run at --out, keep training --resume's model, or start fresh."""
    if config.resume and Path(config.resume).resolve() == Path(config.out).resolve():
        raise ConfigError("--out must differ from --resume: the base snapshot identifies the run.")
    if config.out.exists() and not config.fresh:
        model, meta, keyed = read_snapshot_with_keys(config.out)
        if meta.run != signature:
            raise ConfigError(f"{config.out} holds a snapshot of a different run; pass --fresh to overwrite "
                              f"it, or --resume {config.out} with another --out to keep training it.")
        if not isinstance(meta.source, ParquetProgress):
            raise ConfigError(f"{config.out} holds a snapshot of no Parquet run; pass --fresh to overwrite it.")
        return TrainRun(config, signature, model, meta.features, meta.source.position, meta.rows_read,
                        meta.rows_rejected, keyed=keyed)
    if config.resume:
        return _resumed_run(config, signature)
    schema = open_file(files[0]).physical_schema
    columns = config.features.columns
    list_column = len(columns) == 1 and columns[0] in schema.names and is_vector_type(schema.field(columns[0]).type)
    encoder = config.features.spec(config.model.chosen_kind, list_column=list_column).encoder()
    _schema_check(encoder, config)(schema, files[0])
    model = config.model.build()
    return TrainRun(config, signature, model, encoder, keyed=_new_keyed(config, model))


def _resumed_run(config: TrainConfig, signature: dict[str, Any]) -> TrainRun:
    """Keep training --resume's model (a model per key with --model-key) on new files."""
    assert config.resume is not None
    if config.features.columns or config.features.text:
        raise ConfigError("--resume takes the features from the snapshot; drop --features/--text.")
    if any(value is not None for name, value in asdict(config.model).items() if name != "kind"):
        raise ConfigError("--resume keeps the snapshot's model parameters; drop the parameter options.")
    model, meta, keyed = read_snapshot_with_keys(config.resume)
    if config.model.kind and config.model.kind != model.kind:
        raise ConfigError(f"--model {config.model.kind} contradicts the {model.kind} model in {config.resume}.")
    if (keyed is None) != (config.model_key is None):
        raise ConfigError(f"{config.resume} holds a model per key: pass --model-key COLUMN to keep training it."
                          if keyed is not None else
                          f"{config.resume} holds a single model, not a model per key: drop --model-key, or train "
                          f"a model per key from the start.")
    if keyed is not None and config.key_prior_weight is not None and config.key_prior_weight != keyed.prior_weight:
        raise ConfigError(f"--key-prior-weight {config.key_prior_weight:g} contradicts the {keyed.prior_weight:g} of "
                          f"{config.resume}.")
    return TrainRun(config, signature, model, meta.features, keyed=keyed)


def _new_keyed(config: TrainConfig, template: NaiveBayes[Any, Any]) -> KeyedNB | None:
    """The model per key a fresh --model-key run learns (None: a single model)."""
    if config.model_key is None:
        return None
    weight = DEFAULT_PRIOR_WEIGHT if config.key_prior_weight is None else config.key_prior_weight
    keyed = KeyedNB(template, prior_weight=weight)
    try:
        keyed.check_params()
    except ValueError as error:
        raise ConfigError(f"--model-key: {error}") from None
    return keyed


def _schema_check(encoder: FeatureEncoder, config: TrainConfig, learner: PipelineLearner | None = None
                  ) -> Callable[[pa.Schema, str], None]:
    """check_schema(schema, path) for every file read: its feature columns, its label column, then
    its key column (--model-key; of the kind of the keys ``learner`` learned so far)."""
    label, key = config.label, config.model_key

    def check(schema: pa.Schema, path: str) -> None:
        encoder.check_schema(schema, path)
        if label not in schema.names:
            raise ConfigError(f"{path}: label column {label!r} not found; columns are {schema.names}.")
        if isinstance(learner, KeyedPipelineLearner):
            learner.check_key_column(schema, path)
        elif key is not None:
            check_key_type(schema, key, path)
    return check


def _learn(run: TrainRun, batch: Batch) -> None:
    """Learn a batch (see PipelineLearner) and keep the bad rows it set aside with the rejects."""
    learner = run.learner
    try:
        run.rejects.reject(batch, learner.learn(batch.data))
    except UnusableRow as error:
        raise InvalidRowError(f"{batch.path}: row {batch.first_row + error.row}, column {error.column!r}: "
                              f"{error.reason}. Use --skip-invalid to set such rows aside.") from None
    except nbstream.LabelError as error:
        raise InvalidRowError(f"{batch.path}: rows {batch.first_row} to {batch.end.row - 1}, "
                              f"column {learner.label!r}: {error}") from None
    except nbstream.TableSizeError as error:
        raise ConfigError(f"{batch.path}: rows {batch.first_row} to {batch.end.row - 1}: {error}") from None


def train(config: TrainConfig, progress: bool | None = None) -> TrainSummary:
    files = expand_paths(config.paths)
    signature = run_signature(config, files)
    run = _initial_run(config, files, signature)
    encoder = run.features
    checkpointer = Checkpointer(CheckpointPolicy(every_rows=config.checkpoint_every), [run.rejects], run)
    started = time.monotonic()
    learned_before = run.model.n_examples_seen_ if run.model.is_fitted else 0
    with RowProgress("training", count_rows(files), done=run.rows_read, enabled=progress) as bar:
        for batch in read_batches(files, run.learner.columns, config.batch_size, run.start,
                                  check_schema=_schema_check(encoder, config, run.learner)):
            _learn(run, batch)
            run.advance(batch)
            bar.advance(batch.data.num_rows)
            checkpointer.record(batch.data.num_rows)
    model = run.model  # (a keyed run's group model, made by its first batch)
    if not model.is_fitted:
        raise ConfigError("no valid labeled rows to learn from.")
    run.finish(len(files))
    checkpointer.commit()
    return TrainSummary(rows_read=run.rows_read, rows_learned=model.n_examples_seen_ - learned_before,
                        rows_rejected=run.rejects.count, seconds=time.monotonic() - started,
                        resumed_from=run.start if run.start != Position() else None, snapshot=config.out,
                        model=model, features=encoder, keys=None if run.keyed is None else run.keyed.n_keys_)
