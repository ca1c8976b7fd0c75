"""Prediction messages of the JSON format: one JSON object per predicted input message.

    {"id": ..., "prediction": ..., "probabilities": {class: p, ...}, "model_version": n,
     "topic": ..., "partition": p, "offset": o}

A poll's objects are serialised by one ``orjson.dumps`` of them all and cut apart where one
object ends and the next begins, which costs a third of serialising them one by one. The cut is
exact: ``},{"id":`` holds a bare quote, so it never occurs inside a JSON string, and outside
strings it occurs only between two objects — as long as no id is itself an object or array,
which is checked (such ids are serialised one by one).
"""

from __future__ import annotations

import numpy as np
import orjson

_BETWEEN = b'},{"id":'


def prediction_values(ids: list, predictions: list, probabilities: np.ndarray | None, classes: list | None,
                      version: int, topic: str, partitions: list[int], offsets: list[int]) -> list[bytes]:
    """The JSON prediction of each message, as bytes.

    ids, predictions, partitions, offsets : one per message (predictions None while the model
    knows no class); probabilities : (n_messages, n_classes) or None, whose columns are
    ``classes`` (named as strings in the JSON).
    """
    if probabilities is None:
        per_class = [{}] * len(ids)
    else:
        labels = [str(c) for c in classes]
        per_class = [dict(zip(labels, p)) for p in probabilities.tolist()]
    objects = [{"id": i, "prediction": prediction, "probabilities": p, "model_version": version, "topic": topic,
                "partition": partition, "offset": offset}
               for i, prediction, p, partition, offset in zip(ids, predictions, per_class, partitions, offsets)]
    if len(objects) < 2 or any(isinstance(i, (dict, list)) for i in ids):
        return [orjson.dumps(o) for o in objects]
    pieces = orjson.dumps(objects)[1:-1].split(_BETWEEN)
    head, tail = _BETWEEN[2:], _BETWEEN[:1]  # '{"id":' and '}'
    return [pieces[0] + tail, *(head + piece + tail for piece in pieces[1:-1]), head + pieces[-1]]
