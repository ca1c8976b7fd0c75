"""A keyed model's part of a snapshot: the header's ``keyed`` object and the keys' arrays.

The snapshot is its group model's, so ``load`` reads the group's model from it; beside it lie

    header "keyed": {"prior_weight": m, "keys": "str" or "int", "n_keys": K, "classes": the labels of
                     the keys' class rows (as the header's "classes")}
    keyed.key_text (uint8) and keyed.key_end (K,) int64: string keys, UTF-8, end to end
    keyed.key_int (K,) int64: integer keys
    keyed.examples, keyed.class_count, keyed.seen, keyed.pair_end, keyed.pair_feature, keyed.pair_class,
    keyed.pair_count: the keys' counts (``KeyedCounts.arrays``)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..naive_bayes.keyed import KeyedNB, KeyedState
from ..naive_bayes.state import ModelState, is_natural
from ..stats.keyed_counts import Key
from ..utils.ndarrays import AnyArray

KEYED_PREFIX = "keyed."
ValueCodec = Callable[..., Any]  # the snapshot's own encoding of a header value (arrays go beside it)
_COUNTS = ("examples", "class_count", "seen", "pair_end", "pair_feature", "pair_class", "pair_count")
_INT64 = np.iinfo(np.int64)


def keyed_header(state: KeyedState, arrays: dict[str, AnyArray], encode_value: ValueCodec) -> dict[str, Any]:
    """The header's ``keyed`` object; the keys' arrays are added to ``arrays``."""
    keys = state.keys
    if keys and isinstance(keys[0], int):
        if not all(_INT64.min <= key <= _INT64.max for key in keys):  # type: ignore[operator]
            raise ValueError("integer keys must fit in 64 bits to be stored")
        arrays[KEYED_PREFIX + "key_int"] = np.array(keys, dtype=np.int64)
        kind = "int"
    else:
        encoded = [str(key).encode("utf-8", "surrogatepass") for key in keys]
        arrays[KEYED_PREFIX + "key_text"] = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        arrays[KEYED_PREFIX + "key_end"] = np.cumsum([len(key) for key in encoded], dtype=np.int64)
        kind = "str"
    for name in _COUNTS:
        arrays[KEYED_PREFIX + name] = state.statistics[name]
    return {"prior_weight": state.prior_weight, "keys": kind, "n_keys": len(keys),
            "classes": encode_value(state.classes, KEYED_PREFIX + "classes", arrays)}


def keyed_from(group: ModelState, keyed: dict[str, Any], arrays: dict[str, AnyArray], decode_value: ValueCodec
               ) -> KeyedNB:
    """The keyed model a snapshot's group state, ``keyed`` header object and arrays describe
    (ValueError or KeyError when they do not fit)."""
    n_keys, m = keyed.get("n_keys"), keyed.get("prior_weight")
    if not is_natural(n_keys) or not isinstance(m, int | float) or isinstance(m, bool):
        raise ValueError("the keyed header needs n_keys (an integer >= 0) and prior_weight (a number)")
    keys = _keys(keyed.get("keys"), n_keys, arrays)  # type: ignore[arg-type]  # checked natural above
    statistics = {name: arrays[KEYED_PREFIX + name] for name in _COUNTS}
    classes = decode_value(keyed.get("classes"), arrays)
    if not isinstance(classes, np.ndarray):
        raise ValueError("the keyed header needs the labels of the keys' classes")
    return KeyedNB.from_state(KeyedState(group, float(m), keys, classes, statistics))


def _keys(kind: object, n_keys: int, arrays: dict[str, AnyArray]) -> list[Key]:
    if kind == "int":
        ints = arrays[KEYED_PREFIX + "key_int"]
        if ints.shape != (n_keys,) or ints.dtype.kind != "i":
            raise ValueError(f"key_int must be {n_keys} integers")
        return ints.tolist()  # type: ignore[no-any-return]
    if kind != "str":
        raise ValueError(f"keyed keys must be 'str' or 'int'; got {kind!r}")
    text, ends = arrays[KEYED_PREFIX + "key_text"], arrays[KEYED_PREFIX + "key_end"]
    if text.ndim != 1 or text.dtype != np.uint8 or ends.shape != (n_keys,) or ends.dtype.kind != "i" \
            or (n_keys and (ends[0] < 0 or (np.diff(ends) < 0).any() or int(ends[-1]) != len(text))):
        raise ValueError("key_text and key_end do not describe the keys")
    data = text.tobytes()
    starts = [0, *ends[:-1].tolist()]
    try:
        return [data[start:end].decode("utf-8", "surrogatepass") for start, end in zip(starts, ends.tolist(),
                                                                                      strict=True)]
    except UnicodeDecodeError:
        raise ValueError("a key is not UTF-8") from None
