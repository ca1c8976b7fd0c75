"""Prediction messages of the JSON format: one JSON object per predicted input message.

    {"id": ..., "prediction": ..., "probabilities": {class: p, ...}, "model_version": n,
     "topic": ..., "partition": p, "offset": o}

With --explain K, "model_version": n is followed by "explanation": [{"feature": ..., "contribution": c},
...]: the K features that weigh most in the prediction (``nbstream.naive_bayes.explanations``). With
--model-key, by "key": K, "key_examples": N: the key whose model predicted, and the examples that key
had learned before the message.

When the service names its models (``ServedBy``), each object ends with the name of the model
that served it, and in shadow mode with what every challenger predicted::

    ..., "offset": o, "model": "main",
         "challengers": {"cnb": {"prediction": ..., "probabilities": {...}, "model_version": n}}}

A poll's objects are assembled from JSON pieces made a column at a time, which costs a third of
serialising a dict per message: every probability by one ``orjson.dumps`` of the whole matrix
(cut into rows at ``],[``), each class label and the topic once, the ids by one dumps of their
list (cut at commas when no id's JSON holds a comma, else one by one). Each piece is exactly
what serialising the message's own dict with orjson writes, but for an id orjson cannot write
(an integer beyond 64 bits, nesting deeper than 254 levels): the standard library writes it,
as exactly as it was sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import orjson

from nbstream.utils.ndarrays import AnyArray, FloatArray, IndexArray, IntArray

from .json_exact import write_exactly
from .records import FieldValue


@dataclass(frozen=True)
class KeyAnswers:
    """The key of each message's model (--model-key), and how many examples that key had learned
    before it: keys (n,), examples (n,)."""
    keys: list[str]
    examples: IntArray

    def take(self, rows: AnyArray) -> KeyAnswers:
        """Those of ``rows`` (n,) bool."""
        return KeyAnswers([key for key, taken in zip(self.keys, rows.tolist(), strict=True) if taken],
                          self.examples[rows])

    def pieces(self) -> list[bytes]:
        """',"key":K,"key_examples":N' of each message."""
        return [b',"key":%b,"key_examples":%d' % (orjson.dumps(key), n)
                for key, n in zip(self.keys, self.examples.tolist(), strict=True)]


@dataclass(frozen=True)
class ModelPredictions:
    """One model's predictions of the messages, as ``prediction_values`` takes them (classes,
    best, proba, versions)."""
    classes: AnyArray | None
    best: IndexArray | None
    proba: FloatArray | None
    versions: IntArray | int
    explanations: list[bytes] | None = None  # of each message, the JSON list of its explanation's features
    keys: KeyAnswers | None = None  # of each message, its key and that key's examples (--model-key)


@dataclass(frozen=True)
class ServedBy:
    """The name of the model that served the predictions, and in shadow mode what each challenger
    predicted, by name (empty: only the name is written)."""
    model: str
    challengers: dict[str, ModelPredictions] = field(default_factory=dict)

    def pieces(self, n: int) -> list[bytes]:
        """What ends each of n messages: ',"model":NAME' and ',"challengers":{...}'."""
        named = b',"model":%b' % orjson.dumps(self.model)
        if not self.challengers:
            return [named] * n
        objects = [[b"%b:{%b}" % (orjson.dumps(name), fields) for fields in _fields(predictions, n)]
                   for name, predictions in self.challengers.items()]
        return [named + b',"challengers":{%b}' % b",".join(each) for each in zip(*objects, strict=True)]


def prediction_values(ids: list[FieldValue], classes: AnyArray | None, best: IndexArray | None,
                      proba: FloatArray | None, versions: IntArray | int, topic: str, partitions: list[int],
                      offsets: list[int]) -> list[bytes]:
    """The JSON prediction of each message, as bytes.

    ids, partitions, offsets : one per message; classes : (n_classes,) labels, None while the
    model knows no class (then every prediction is null with no probabilities, and best and
    proba are None too); best : (n_messages,) index into classes of each prediction;
    proba : (n_messages, n_classes), a row of NaN for a message predicted before the model knew
    any class (null too); versions : (n_messages,) the examples the model predicting each had
    learned, or one number for all.
    """
    return named_prediction_values(ids, ModelPredictions(classes, best, proba, versions), topic, partitions, offsets)


def named_prediction_values(ids: list[FieldValue], predictions: ModelPredictions, topic: str, partitions: list[int],
                            offsets: list[int], served_by: ServedBy | None = None) -> list[bytes]:
    """The JSON prediction of each message, as ``prediction_values`` writes it, ending with what
    ``served_by`` names (None: nothing)."""
    n = len(ids)
    if n == 0:
        return []
    head = b',"topic":%b,"partition":' % orjson.dumps(topic)
    tails = [b""] * n if served_by is None else served_by.pieces(n)
    predicted, probabilities, version_pieces = _pieces(predictions, n)
    return [b'{"id":%b,"prediction":%b,"probabilities":{%b}%b%b%d,"offset":%d%b}' % (i, b, ps, v, head, p, o, t)
            for i, b, ps, v, p, o, t in zip(_id_pieces(ids), predicted, probabilities, version_pieces, partitions,
                                            offsets, tails, strict=True)]


def _explained(version_pieces: list[bytes], explanations: list[bytes] | None, keys: KeyAnswers | None) -> list[bytes]:
    """',"model_version":v' of each row, followed by its ',"explanation":[...]' when there are some,
    and its ',"key":K,"key_examples":N' when the rows are keyed."""
    if explanations is not None:
        version_pieces = [b'%b,"explanation":%b' % pair for pair in zip(version_pieces, explanations, strict=True)]
    if keys is not None:
        version_pieces = [a + b for a, b in zip(version_pieces, keys.pieces(), strict=True)]
    return version_pieces


def _pieces(predictions: ModelPredictions, n: int) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """Of each of n rows: the prediction (null where not scored), its probabilities ('"class":p,...')
    and ',"model_version":v' (and its ',"explanation":[...]' when the predictions have some)."""
    version_pieces = _explained([b',"model_version":%d' % v for v in
                                 np.broadcast_to(predictions.versions, (n,)).tolist()], predictions.explanations,
                                predictions.keys)
    classes, best, proba = predictions.classes, predictions.best, predictions.proba
    if classes is None or best is None or proba is None:
        return [b"null"] * n, [b""] * n, version_pieces
    labels = classes.tolist()
    named = [orjson.dumps(label) for label in labels]
    scored = ~np.isnan(proba[:, 0]) if proba.shape[1] else np.zeros(n, dtype=bool)
    probabilities = _probability_pieces(np.where(scored[:, None], proba, 0.0), labels)
    predicted = [named[b] for b in best.tolist()]
    for row in np.flatnonzero(~scored).tolist():
        predicted[row], probabilities[row] = b"null", b""
    return predicted, probabilities, version_pieces


def _fields(predictions: ModelPredictions, n: int) -> list[bytes]:
    """'"prediction":...,"probabilities":{...},"model_version":v' of each of n rows."""
    predicted, probabilities, version_pieces = _pieces(predictions, n)
    return [b'"prediction":%b,"probabilities":{%b}%b' % row
            for row in zip(predicted, probabilities, version_pieces, strict=True)]


def _id_pieces(ids: list[FieldValue]) -> list[bytes]:
    try:
        pieces = orjson.dumps(ids)[1:-1].split(b",")
    except orjson.JSONEncodeError:
        pieces = []
    return pieces if len(pieces) == len(ids) else [_id_piece(i) for i in ids]


def _id_piece(id_: object) -> bytes:
    try:
        return orjson.dumps(id_)
    except orjson.JSONEncodeError:  # beyond orjson's integers or depth
        return write_exactly(id_)


def _probability_pieces(proba: FloatArray, labels: list[FieldValue]) -> list[bytes]:
    """'"class":p,...' of each row (class names as strings, as JSON object keys must be)."""
    matrix = np.ascontiguousarray(proba, dtype=np.float64)
    rows = orjson.dumps(matrix, option=orjson.OPT_SERIALIZE_NUMPY)[2:-2].split(b"],[")
    # one template of the keys, filled with a row's values: one operation a row (a % in a key doubled)
    template = b",".join(orjson.dumps(str(label)).replace(b"%", b"%%") + b":%b" for label in labels)
    return [template % tuple(row.split(b",")) for row in rows]
