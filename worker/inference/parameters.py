"""The parameters of an infer request the server reads, checked: explain, key, min_position, timeout_ms."""

from __future__ import annotations

import re

from ..key_names import key_problem
from .errors import RequestError

MOST_EXPLAINED_FEATURES = 1000  # the largest k of "explain": k
LONGEST_WAIT_MS = 60_000  # the most a request may ask to wait for a position (timeout_ms)
DEFAULT_WAIT_MS = 5_000
_TOPIC_PARTITION = re.compile(r".+:[0-9]{1,10}")


def explain_of(value: object) -> int | None:
    """k of "explain": k (None: no explanation asked)."""
    if value is None:
        return None
    if type(value) is not int or not 1 <= value <= MOST_EXPLAINED_FEATURES:
        raise RequestError(f"the parameter \"explain\" must be an integer from 1 to {MOST_EXPLAINED_FEATURES} "
                           f"(features per row); got {str(value)[:40]}.")
    return value


def key_of(value: object, model: str, keyed: bool) -> str | int | None:
    """The key of "key": K, whose model is to answer (None: the model's own, the group's); keyed :
    whether the model ``model`` keeps a model per key."""
    if value is None:
        return None
    if not keyed:
        raise RequestError(f"model {model!r} keeps no model per key (it was not trained or served with "
                           f"--model-key); drop the parameter \"key\".")
    problem = key_problem(value)
    if problem is not None or not isinstance(value, str | int) or isinstance(value, bool):
        raise RequestError(f"the parameter \"key\" must name a key: {problem or 'a string or an integer'}; got "
                           f"{str(value)[:40]!r}.")
    return value


def min_position_of(value: object, topics: set[str] | None) -> dict[str, int] | None:
    """{"TOPIC:PARTITION": next offset} of min_position (None: not given); topics : those the model
    reads (None: not known yet), a position of another topic being no position of its state."""
    if value is None:
        return None
    if not isinstance(value, dict) or not value or not all(
            isinstance(key, str) and _TOPIC_PARTITION.fullmatch(key) and type(offset) is int and offset >= 0
            for key, offset in value.items()):
        raise RequestError("min_position must map \"TOPIC:PARTITION\" to an offset (an integer >= 0), as a "
                           "response's position does.")
    others = sorted({key.rpartition(":")[0] for key in value} - topics) if topics else []
    if others:
        raise RequestError(f"min_position names the topic {others[0][:80]!r}; this model learns from "
                           f"{sorted(topics or [])}.")
    return value


def wait_ms_of(value: object) -> int:
    """The parameter timeout_ms, checked (the default when not given)."""
    if value is None:
        return DEFAULT_WAIT_MS
    if type(value) is not int or not 0 <= value <= LONGEST_WAIT_MS:
        raise RequestError(f"timeout_ms must be an integer from 0 to {LONGEST_WAIT_MS}; got {str(value)[:40]}.")
    return value
