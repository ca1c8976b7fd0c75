"""The model MLflow's python_function flavor serves, and the snapshot file both flavors share."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..interop.exportable import is_pipeline
from ..naive_bayes.base import NaiveBayes
from ..persistence.snapshot import load_with_header, save
from ..utils.ndarrays import AnyArray

if TYPE_CHECKING:
    import pandas


class PyfuncModel:
    """A model or pipeline behind MLflow's ``predict(model_input, params=None)``.

    A pipeline takes a DataFrame of its columns (``Pipeline.predict``); a bare model a DataFrame
    or array of shape (n_rows, n_features): its columns by name when the model learned names, else
    by position. ``predict`` gives the labels, shape (n_rows,);
    ``predict_proba`` the probabilities, shape (n_rows, n_classes), columns in ``classes_`` order.
    """

    def __init__(self, model: Any):
        if not isinstance(model, NaiveBayes) and not is_pipeline(model):
            raise TypeError(f"an nbstream MLflow model is one of the five models or a nbstream.arrow.Pipeline; "
                            f"got a {type(model).__name__}.")
        self.source = model
        self.is_pipeline = is_pipeline(model)
        self.model: NaiveBayes[Any, Any] = model if isinstance(model, NaiveBayes) else model.model

    @property
    def classes_(self) -> AnyArray:
        return self.model.classes_

    def predict(self, model_input: pandas.DataFrame | AnyArray, params: dict[str, Any] | None = None) -> AnyArray:
        """The most probable class of each row, shape (n_rows,).

        (MLflow reads the annotation of ``model_input``: a DataFrame is a type it derives no schema
        from, so it checks the input against the model's signature alone.)"""
        labels: AnyArray = self.source.predict(self._rows(model_input))
        return labels

    def predict_proba(self, model_input: pandas.DataFrame | AnyArray) -> AnyArray:
        """P(class | row), shape (n_rows, n_classes)."""
        proba: AnyArray = self.source.predict_proba(self._rows(model_input))
        return proba

    def _rows(self, model_input: pandas.DataFrame | AnyArray) -> object:
        """What the model takes: a pipeline, or a model fitted with column names, the frame itself
        (columns by name); a model fitted without names, its values (columns by position)."""
        if self.is_pipeline or hasattr(self.model, "feature_names_in_"):
            return model_input
        return np.asarray(model_input)


def save_snapshot(model: Any, path: Path) -> Path:
    """The snapshot of a model (``nbstream.save``) or of a pipeline (``Pipeline.save``) at ``path``."""
    if is_pipeline(model):
        saved: Path = model.save(path)
        return saved
    return save(model, path, tables=False)


def load_snapshot(path: str | os.PathLike[str]) -> Any:
    """The model a snapshot holds; a pipeline when the snapshot records a feature encoder (a worker's)."""
    model, header = load_with_header(path)
    if "features" not in header["meta"]:
        return model
    from ..arrow import Pipeline

    return Pipeline.from_snapshot_meta(model, header["meta"], path)
