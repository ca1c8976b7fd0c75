"""A model that answers infer requests: a pipeline (a model and the encoder of its inputs), frozen
at one state, with the version and stream position of that state.

The inputs are what a message carries, one tensor per column the encoder reads: a text column as
BYTES [-1]; a list column as FP64 [-1, F] (any numeric datatype is taken); numeric columns as FP64
[-1] each; categorical columns as BYTES [-1] each (integers and booleans are taken too). The
outputs are ``label`` (BYTES [N]), ``probabilities`` (FP64 [N, C], the classes in its parameters)
and, when the request's parameters ask ``explain: k``, ``explanation`` (BYTES [N], a JSON object per
row: see ``nbstream.naive_bayes.explanations``).

A model per key (a snapshot of ``worker train --model-key``, or ``worker serve --model-key key``)
answers by the model of the key the parameter ``key`` names, backed off to the group's (a key never
seen: the group's model), and its answer's parameters say which key answered and how many
examples that key had learned (``"key": K, "key_examples": N``); without the parameter the group's
model answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import orjson
import pyarrow as pa

from nbstream.arrow import CategoricalEncoder, FeatureError, Pipeline, TextEncoder, VectorEncoder
from nbstream.naive_bayes import NaiveBayes
from nbstream.naive_bayes.keyed import KeyedNB

from .errors import NotReady, RequestError
from .parameters import explain_of, key_of
from .tensors import BYTES, InferRequest, Tensor

PLATFORM = "nbstream"
OUTPUTS = ("label", "probabilities", "explanation")
MOST_EXPLAINED = 100_000  # features explained in one answer at most (rows x k): each is a JSON object


@dataclass(frozen=True)
class InputSpec:
    """One input tensor a model takes: its name (the column), datatype and shape (-1: any size)."""
    name: str
    datatype: str
    shape: tuple[int, ...]
    numbers_too: bool = False  # a categorical column: integers and booleans are categories too

    def metadata(self) -> dict[str, Any]:
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.shape)}


class KeyModels(Protocol):
    """The models of the keys of a model per key, at the state of the model that holds them."""

    def described(self) -> dict[str, Any]:
        """What the model's metadata says of its keys: {"keys": how many, "prior_weight": m}."""

    def model_of(self, key: str | int) -> tuple[NaiveBayes[Any, Any], int] | None:
        """The key's model backed off to the group's, and the examples the key learned (the group's
        model and 0 for a key never seen); None when this state cannot tell yet (the source is to
        be asked: ``ModelSource.ask_key``). RequestError or NotFound for a key it cannot answer."""


class SnapshotKeys:
    """The keys of a snapshot's model per key: every key answered."""

    def __init__(self, keyed: KeyedNB):
        self.keyed = keyed

    def described(self) -> dict[str, Any]:
        return {"keys": self.keyed.n_keys_, "prior_weight": self.keyed.prior_weight}

    def model_of(self, key: str | int) -> tuple[NaiveBayes[Any, Any], int]:
        try:
            return self.keyed.key_model(key), int(self.keyed.key_examples([key])[0])
        except ValueError as error:  # a key of another type than the model's
            raise RequestError(f"the parameter \"key\" names no key of this model: {error}") from None


@dataclass(frozen=True)
class AnsweringModel:
    """One named model at one state. pipeline is never changed after it is made: a newer state
    is a new AnsweringModel.

    version : what names the state (the examples learned, or a snapshot's digest)
    position : "TOPIC:PARTITION" -> the next offset the state includes (empty: not from a stream)
    keys : the models of its keys, whose group model is the pipeline's (None: no model per key)"""
    name: str
    pipeline: Pipeline
    version: str
    position: dict[str, int] = field(default_factory=dict)
    keys: KeyModels | None = None

    @property
    def ready(self) -> bool:
        return bool(self.pipeline.model.is_fitted)

    def inputs(self) -> list[InputSpec]:
        encoder = self.pipeline.features
        if isinstance(encoder, TextEncoder):
            return [InputSpec(encoder.columns[0], BYTES, (-1,))]
        if isinstance(encoder, CategoricalEncoder):
            return [InputSpec(column, BYTES, (-1,), numbers_too=True) for column in encoder.columns]
        if isinstance(encoder, VectorEncoder):
            return [InputSpec(encoder.columns[0], "FP64", (-1, encoder.width or -1))]
        return [InputSpec(column, "FP64", (-1,)) for column in encoder.columns]

    def metadata(self) -> dict[str, Any]:
        """The model's metadata as the protocol gives it (GET /v2/models/{name})."""
        classes = self._classes()
        keyed = {"keyed": self.keys.described()} if self.keys is not None else {}
        return {
            "name": self.name, "versions": [self.version], "platform": PLATFORM,
            "inputs": [spec.metadata() for spec in self.inputs()],
            "outputs": [{"name": "label", "datatype": BYTES, "shape": [-1]},
                        {"name": "probabilities", "datatype": "FP64", "shape": [-1, len(classes)]},
                        {"name": "explanation", "datatype": BYTES, "shape": [-1]}],
            "parameters": {"kind": self.pipeline.model.kind, "classes": classes, "position": self.position,
                           "model_version": self.version, **keyed}}

    def _classes(self) -> list[Any]:
        return _plain(self.pipeline.classes_) if self.ready else []

    def infer(self, request: InferRequest) -> dict[str, Any]:
        """The answer to a request (RequestError when its inputs or parameters do not fit)."""
        if not self.ready:
            raise NotReady(f"model {self.name!r} has learned nothing yet: it cannot predict.")
        asked = request.outputs or ("label", "probabilities")
        unknown = [name for name in asked if name not in OUTPUTS]
        if unknown:
            raise RequestError(f"unknown output {unknown[0]!r}; this model gives {list(OUTPUTS)}.")
        explain = explain_of(request.parameters.get("explain"))
        key = key_of(request.parameters.get("key"), self.name, self.keys is not None)
        pipeline, key_examples = self._pipeline_of(key)
        if explain is not None and "explanation" not in asked:
            asked = (*asked, "explanation")
        elif explain is None and "explanation" in asked:
            raise RequestError("the output \"explanation\" needs the parameter \"explain\": k (features per row).")
        batch = self._batch(request.inputs)
        if explain is not None and batch.num_rows * explain > MOST_EXPLAINED:
            raise RequestError(f"{batch.num_rows} rows explained by {explain} features each is over "
                               f"{MOST_EXPLAINED:,} features a request; ask for fewer rows or features.", 413)
        try:
            X = pipeline.transform(batch)
            rows = batch.num_rows
            proba = pipeline.model.predict_proba(X) if rows else np.zeros((0, len(pipeline.classes_)))
            explained = None if explain is None else pipeline.explanations_of(batch, X, explain).rows if rows else []
        except FeatureError as error:
            raise RequestError(str(error)) from None
        except ValueError as error:  # values the model refuses (its checks name them)
            raise RequestError(f"the model refuses the input: {error}") from None
        outputs: list[dict[str, Any]] = []
        classes = self.pipeline.classes_
        if "label" in asked:
            labels = classes[np.argmax(proba, axis=1)] if len(proba) else classes[:0]
            outputs.append({"name": "label", "datatype": BYTES, "shape": [len(proba)],
                            "data": [str(label) for label in labels.tolist()]})
        if "probabilities" in asked:
            outputs.append({"name": "probabilities", "datatype": "FP64", "shape": list(proba.shape),
                            "parameters": {"classes": _plain(classes)}, "data": proba.ravel()})
        if explained is not None:
            outputs.append({"name": "explanation", "datatype": BYTES, "shape": [len(explained)],
                            "data": [orjson.dumps(row).decode() for row in explained]})
        answered_by = {} if key is None else {"key": key, "key_examples": key_examples}
        return {"model_name": self.name, "model_version": self.version, "outputs": outputs,
                **({"id": request.id} if request.id is not None else {}),
                "parameters": {"position": self.position, "model_version": self.version, **answered_by}}

    def _pipeline_of(self, key: str | int | None) -> tuple[Pipeline, int]:
        """The pipeline that answers: the key's model with this encoder (and the key's examples), or
        this one's (the group's) when no key is asked."""
        if key is None or self.keys is None:
            return self.pipeline, 0
        answer = self.keys.model_of(key)
        if answer is None:
            raise NotReady(f"the key {str(key)[:80]!r} of model {self.name!r} has not been looked up yet.")
        model, examples = answer
        return Pipeline(model, self.pipeline.features, label=self.pipeline.label), examples

    def _batch(self, tensors: dict[str, Tensor]) -> pa.RecordBatch:
        """The rows of the request as the encoder reads them (RequestError naming what does not fit)."""
        specs = self.inputs()
        missing = [spec.name for spec in specs if spec.name not in tensors]
        if missing:
            raise RequestError(f"model {self.name!r} takes the inputs {[spec.name for spec in specs]}; "
                               f"{missing[0]!r} is missing.")
        extra = [name for name in tensors if name not in {spec.name for spec in specs}]
        if extra:
            raise RequestError(f"model {self.name!r} has no input {extra[0]!r}; it takes {[s.name for s in specs]}.")
        try:
            columns = {spec.name: _column(tensors[spec.name], spec) for spec in specs}
        except (pa.ArrowInvalid, OverflowError) as error:  # a shape Arrow cannot make a column of
            raise RequestError(f"the inputs cannot be rows of this model ({str(error)[:200]}).") from None
        lengths = {len(column) for column in columns.values()}
        if len(lengths) > 1:
            raise RequestError(f"the inputs have different numbers of rows ({sorted(lengths)}).")
        return pa.RecordBatch.from_pydict(columns)


def _column(tensor: Tensor, spec: InputSpec) -> pa.Array:
    """A tensor as the Arrow column of its spec (RequestError when its datatype or shape cannot be)."""
    if (tensor.datatype == BYTES) != (spec.datatype == BYTES) and not _categorical_numbers(tensor, spec):
        raise RequestError(f"input {tensor.name!r} must be {spec.datatype}; got {tensor.datatype}.")
    width = spec.shape[1] if len(spec.shape) == 2 else None
    if len(spec.shape) == 2:
        if len(tensor.shape) != 2 or (width is not None and width >= 0 and tensor.shape[1] != width):
            raise RequestError(f"input {tensor.name!r} must have shape [N, {width}]; got {list(tensor.shape)}.")
        values = tensor.values
        if not pa.types.is_floating(values.type) and not pa.types.is_integer(values.type):
            values = values.cast(pa.float64())  # booleans
        return pa.FixedSizeListArray.from_arrays(values, tensor.shape[1])
    if len(tensor.shape) == 2 and tensor.shape[1] == 1:
        return tensor.values
    if len(tensor.shape) != 1:
        raise RequestError(f"input {tensor.name!r} must have shape [N]; got {list(tensor.shape)}.")
    return tensor.values


def _categorical_numbers(tensor: Tensor, spec: InputSpec) -> bool:
    """Integers or booleans for a categorical column (declared BYTES): taken as they are."""
    return spec.numbers_too and not tensor.datatype.startswith("FP")


def _plain(labels: np.ndarray[Any, Any]) -> list[Any]:
    """Class labels as JSON values."""
    plain: list[Any] = labels.tolist()
    return plain
