"""Prediction messages of the JSON format: one JSON object per predicted input message.

    {"id": ..., "prediction": ..., "probabilities": {class: p, ...}, "model_version": n,
     "topic": ..., "partition": p, "offset": o}

A poll's objects are assembled from JSON pieces made a column at a time, which costs a third of
serialising a dict per message: every probability by one ``orjson.dumps`` of the whole matrix
(cut into rows at ``],[``), each class label and the topic once, the ids by one dumps of their
list (cut at commas when no id's JSON holds a comma, else one by one). Each piece is exactly
what serialising the message's own dict with orjson writes, but for an id orjson cannot write
(an integer beyond 64 bits, nesting deeper than 254 levels): the standard library writes it,
as exactly as it was sent.
"""

from __future__ import annotations

import numpy as np
import orjson

from nbstream.ndarrays import AnyArray, FloatArray, IndexArray, IntArray

from .json_exact import write_exactly
from .records import FieldValue


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
    n = len(ids)
    if n == 0:
        return []
    head = b',"topic":%b,"partition":' % orjson.dumps(topic)
    version_pieces = [b',"model_version":%d' % v for v in np.broadcast_to(versions, (n,)).tolist()]
    nothing = b'{"id":%b,"prediction":null,"probabilities":{}%b%b%d,"offset":%d}'
    if classes is None or best is None or proba is None:
        return [nothing % (i, v, head, p, o)
                for i, v, p, o in zip(_id_pieces(ids), version_pieces, partitions, offsets, strict=True)]
    labels = classes.tolist()
    predicted = [orjson.dumps(label) for label in labels]
    scored = ~np.isnan(proba[:, 0]) if proba.shape[1] else np.zeros(n, dtype=bool)
    pieces = _probability_pieces(np.where(scored[:, None], proba, 0.0), labels)
    return [b'{"id":%b,"prediction":%b,"probabilities":{%b}%b%b%d,"offset":%d}' % (i, predicted[b], ps, v, head, p, o)
            if s else nothing % (i, v, head, p, o)
            for i, b, ps, s, v, p, o in zip(_id_pieces(ids), best.tolist(), pieces, scored.tolist(), version_pieces,
                                            partitions, offsets, strict=True)]


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
