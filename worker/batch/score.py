"""`worker predict` and `worker evaluate`: a snapshot applied to Parquet files, batch by batch."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from nbstream.arrow import FeatureEncoder, RowProblems, extract_labels
from nbstream.arrow.predictions import prediction_table
from nbstream.metrics.classification import ConfusionCounts
from nbstream.naive_bayes import NaiveBayes
from nbstream.utils.ndarrays import AnyArray, FloatArray

from ..config import ScoreConfig
from ..errors import ConfigError
from ..io.files import refuse_replacing_an_input
from ..io.parquet.predictions import PredictionWriter
from ..io.parquet.source import Batch, count_rows, expand_paths, read_batches
from ..progress import RowProgress
from ..snapshot_meta import read_snapshot


@dataclass
class Scored:
    """One batch with its predictions; rows with problems have none (``problems.bad``)."""
    batch: Batch
    problems: RowProblems
    classes: AnyArray  # (n_classes,) the classes of proba's columns
    proba: FloatArray  # (n_good_rows, n_classes)
    labels: AnyArray | None  # (n_good_rows,) when a label column was asked for


def score_batches(config: ScoreConfig, model: NaiveBayes[Any, Any], features: FeatureEncoder, extra_columns: list[str],
                  label: str | None = None, progress: bool | None = None,
                  prequential: bool = False) -> Iterator[Scored]:
    """Predicted probabilities for every batch, and its labels when ``label`` is given.

    prequential : test-then-train: each row is predicted by the model that learned every earlier
        row (of the files in order), then learned (needs ``label``; ``model`` keeps learning)."""
    files = expand_paths(config.paths)
    columns = list(dict.fromkeys(features.columns + extra_columns + ([label] if label else [])))

    def check(schema: pa.Schema, path: str) -> None:
        features.check_schema(schema, path)
        for name in columns:
            if name not in schema.names:
                raise ConfigError(f"{path}: column {name!r} not found; columns are {schema.names}.")

    with RowProgress("scoring", count_rows(files), enabled=progress) as bar:
        for batch in read_batches(files, columns, config.batch_size, check_schema=check):
            X, problems = features.encode(batch.data, learn=False)
            y = extract_labels(batch.data, label, problems) if label else None
            if problems.any() and not config.skip_invalid:
                raise batch.first_invalid(problems, "Use --skip-invalid to score the other rows.")
            good_X, good_y = problems.select_good(X), None if y is None else problems.select_good(y)
            if prequential and good_y is not None and len(good_y):
                classes, proba = model.predict_proba_then_learn(good_X, good_y)
            else:
                classes = model.classes_
                proba = model.predict_proba(good_X) if good_X.shape[0] else np.zeros((0, len(classes)))
            bar.advance(batch.data.num_rows)
            yield Scored(batch, problems, classes, proba, good_y)


def predict(config: ScoreConfig, out: Path, with_proba: bool, id_column: str | None,
            progress: bool | None = None) -> int:
    """Write one row per input row: id, prediction, optional probabilities and error. Returns rows."""
    refuse_replacing_an_input(Path(out), [config.snapshot, *expand_paths(config.paths)], "the predictions")
    model, meta = read_snapshot(config.snapshot)
    with PredictionWriter(out) as writer:
        for scored in score_batches(config, model, meta.features, [id_column] if id_column else [],
                                    progress=progress):
            ids = scored.batch.data.column(id_column) if id_column else None
            writer.write(prediction_table(model.classes_, scored.proba, scored.problems, ids=ids, id_column=id_column,
                                          with_proba=with_proba, with_errors=config.skip_invalid))
        if not writer.rows:
            raise ConfigError("the input holds no rows.")
        writer.commit()
    return writer.rows


def evaluate(config: ScoreConfig, label: str | None = None, progress: bool | None = None,
             prequential: bool = False) -> dict[str, Any]:
    """Accuracy, macro-F1, log-loss, Brier score, per-class precision/recall/F1 and the confusion
    matrix; ``prequential``: of test-then-train predictions, the snapshot's model learning each
    row after predicting it (classes the rows teach join the report)."""
    model, meta = read_snapshot(config.snapshot)
    label = label or meta.label
    if not label:
        raise ConfigError("name the label column with --label.")
    counts = ConfusionCounts(model.classes_)
    skipped = 0
    for scored in score_batches(config, model, meta.features, [], label=label, progress=progress,
                                prequential=prequential):
        assert scored.labels is not None  # asked for with label=
        if len(scored.classes) > len(counts.model_classes):
            counts = counts.with_model_classes(scored.classes)
        counts.add(scored.labels, scored.proba)
        skipped += int(scored.problems.bad.sum())
    report = counts.report()
    report["rows_skipped"] = skipped
    return report
