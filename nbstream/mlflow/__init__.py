"""nbstream models in MLflow (``pip install 'nbstream[mlflow]'``): an ``nbstream`` flavor whose
artifact is the model's snapshot (never a pickle: loading it runs no code), and a ``python_function``
flavor, so that ``mlflow.pyfunc.load_model(uri).predict(frame)`` gives nbstream's predictions.

A model is one of the five estimators or a ``nbstream.arrow.Pipeline`` (what ``worker train``
writes: model and feature encoder). The pyfunc model of a pipeline takes a DataFrame of the
columns it was trained on (a text column, numeric columns, a list column, category columns); that
of a bare model a DataFrame (or array) of its features.

>>> import tempfile, pandas, mlflow.pyfunc, nbstream
>>> model = nbstream.MultinomialNB().fit([[3, 0], [0, 4]], ["ham", "spam"])
>>> path = tempfile.mkdtemp() + "/spam"
>>> _ = save_model(model, path, input_example=pandas.DataFrame({"a": [2.0], "b": [1.0]}))
>>> mlflow.pyfunc.load_model(path).predict(pandas.DataFrame({"a": [2.0, 0.0], "b": [1.0, 5.0]})).tolist()
['ham', 'spam']
>>> load_model(path).class_count_.tolist()  # the model itself, from its snapshot
[1.0, 1.0]

``log_model`` logs the same to the tracking server ``MLFLOW_TRACKING_URI`` names, and registers it
with ``registered_model_name``: ``mlflow.pyfunc.load_model("models:/NAME/1")`` then serves it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from ..utils.optional import optional_module
from .pyfunc import PyfuncModel, load_snapshot, save_snapshot

FLAVOR_NAME = "nbstream"
SNAPSHOT_FILE = "model.nbs"


def _mlflow(module: str = "mlflow") -> Any:
    return optional_module(module, "mlflow")


def save_model(model: Any, path: str | os.PathLike[str], *, mlflow_model: Any = None, signature: Any = None,
               input_example: Any = None, pip_requirements: list[str] | None = None,
               metadata: dict[str, Any] | None = None) -> Any:
    """Write ``model`` (a fitted model or pipeline) as an MLflow model in the new folder ``path``:
    ``data/model.nbs`` (its snapshot), ``MLmodel`` with the ``nbstream`` and ``python_function``
    flavors, the input example and the environment. Returns the ``mlflow.models.Model``.

    signature : an ``mlflow.models.ModelSignature``; by default inferred from ``input_example`` and
        the model's predictions for it
    input_example : a few rows as the pyfunc model takes them (a pandas DataFrame)
    pip_requirements : what serving needs installed (default: this nbstream with its mlflow extra,
        and its arrow extra for a pipeline)
    """
    from .. import __version__

    mlflow_pyfunc, models = _mlflow("mlflow.pyfunc"), _mlflow("mlflow.models")
    pyfunc_model = PyfuncModel(model)
    if signature is None and input_example is not None:
        signature = models.infer_signature(input_example, pyfunc_model.predict(input_example))
    mlflow_model = mlflow_model if mlflow_model is not None else models.Model()
    mlflow_model.add_flavor(FLAVOR_NAME, nbstream_version=__version__, snapshot=f"data/{SNAPSHOT_FILE}",
                            kind=pyfunc_model.model.kind, pipeline=pyfunc_model.is_pipeline)
    extras = "arrow,mlflow" if pyfunc_model.is_pipeline else "mlflow"
    with tempfile.TemporaryDirectory() as folder:
        snapshot = save_snapshot(model, Path(folder) / SNAPSHOT_FILE)
        mlflow_pyfunc.save_model(os.fspath(path), loader_module=__name__, data_path=str(snapshot),
                                 mlflow_model=mlflow_model, signature=signature, input_example=input_example,
                                 pip_requirements=pip_requirements or [f"nbstream[{extras}]=={__version__}"],
                                 metadata=metadata)
    return mlflow_model


def log_model(model: Any, name: str = "model", *, registered_model_name: str | None = None, signature: Any = None,
              input_example: Any = None, pip_requirements: list[str] | None = None,
              metadata: dict[str, Any] | None = None) -> Any:
    """Log ``model`` to the active run (one is started when none is) of the tracking server
    ``MLFLOW_TRACKING_URI`` names, as ``save_model`` writes it, and register it as a new version of
    ``registered_model_name`` when given. Returns the ``mlflow.models.model.ModelInfo``."""
    models = _mlflow("mlflow.models")
    return models.Model.log(artifact_path=None, name=name, flavor=_this_module(), model=model,
                            registered_model_name=registered_model_name, signature=signature,
                            input_example=input_example, pip_requirements=pip_requirements, metadata=metadata)


def load_model(model_uri: str, dst_path: str | None = None) -> Any:
    """The model or pipeline an ``nbstream`` MLflow model holds (``runs:/``, ``models:/``, a path...),
    read from its snapshot: it predicts as the one logged, and can keep learning. ValueError when
    the MLflow model has no nbstream flavor, or when its snapshot path leads out of the model's folder."""
    artifacts, models = _mlflow("mlflow.artifacts"), _mlflow("mlflow.models")
    local = Path(artifacts.download_artifacts(artifact_uri=model_uri, dst_path=dst_path))
    flavors = models.Model.load(str(local)).flavors
    if FLAVOR_NAME not in flavors:
        raise ValueError(f"{model_uri} is not an nbstream model: its flavors are {sorted(flavors)}.")
    return load_snapshot(_inside(local, flavors[FLAVOR_NAME].get("snapshot"), model_uri))


def _inside(folder: Path, relative: object, model_uri: str) -> Path:
    """``folder / relative``, once it is known to stay in ``folder`` with every symbolic link
    followed (an MLmodel file is data, anyone's to write): ValueError, before anything is opened,
    when it is not a relative path that does."""
    root = folder.resolve()
    path = (root / relative).resolve() if isinstance(relative, str) and relative else None
    if path is None or path == root or not path.is_relative_to(root):
        raise ValueError(f"{model_uri}: refused the nbstream flavor's snapshot path {relative!r}: it leads out of "
                         f"the model's folder (symbolic links followed).")
    return path


def _load_pyfunc(data_path: str) -> PyfuncModel:
    """MLflow's entry point for the python_function flavor: the model of the snapshot at ``data_path``."""
    return PyfuncModel(load_snapshot(Path(data_path)))


def _this_module() -> Any:
    """This module, the flavor ``mlflow.models.Model.log`` calls ``save_model`` of."""
    import sys

    return sys.modules[__name__]


__all__ = ["FLAVOR_NAME", "PyfuncModel", "load_model", "log_model", "save_model"]
