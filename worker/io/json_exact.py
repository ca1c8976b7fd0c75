"""The standard library's JSON, for the few messages whose meaning orjson cannot settle alone.

orjson reads every message first (it is several times faster); it keeps the last of a key given
twice, and reads an integer beyond 64 bits as the nearest float. Those two cases, and only they,
are read again here, where every key pair is seen and every integer is exact:

- a key given twice is refused (Arrow's reader refuses it too, simdjson would keep the first), so a
  message means one thing whichever reader its poll goes through;
- an id is answered exactly as it was sent, 2**70 as 1180591620717411303424.

Writing falls back here too, for ids orjson cannot write: an integer beyond 64 bits, or nesting
deeper than its 254 levels.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

MAX_DEPTH = 1024  # nested arrays and objects orjson reads; deeper is malformed JSON everywhere
_INEXACT = 2.0 ** 63  # orjson reads integers from -2**63 to 2**64 - 1 exactly, others as floats this large


class DuplicateKey(ValueError):
    """A JSON object gives one key twice."""

    def __init__(self, key: str):
        super().__init__(f"duplicate key {key!r}")


def needs_exact_reading(value: bytes, message: dict[str, Any], id_field: str) -> bool:
    """Whether orjson's reading of ``value`` (``message``) may have dropped a key given twice, or
    rounded an integer of the id. Cheap, and sure when it says no."""
    return _may_repeat_a_key(value, message) or _may_be_rounded(message.get(id_field))


def read_exactly(value: bytes) -> Any:
    """``value`` read by the standard library: integers exact, a key given twice raises
    DuplicateKey. For values orjson accepted (so at most MAX_DEPTH deep)."""
    with _room_for_depth():
        return json.loads(value, object_pairs_hook=_object)


def write_exactly(value: object) -> bytes:
    """Compact JSON of a value read by ``read_exactly`` or orjson, whatever its integers and depth."""
    with _room_for_depth():
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _object(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object from its key pairs in order; DuplicateKey when a key comes twice."""
    found = dict(pairs)
    if len(found) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return found


_KEY_ENDINGS = (b'":', b" :", b"\t:", b"\n:", b"\r:")  # what the colon after a key follows


def _may_repeat_a_key(value: bytes, message: dict[str, Any]) -> bool:
    """Each key of the text ends with a quote, maybe white space, and a colon: the colons right after
    a quote or white space are at least as many as the keys written. When they are exactly as many as
    the keys of the objects reached through objects, no key was dropped. Such a colon inside a
    string, or an object inside a list, only makes the answer a maybe (a colon inside a string
    after anything else, as in "10:30", is not counted at all)."""
    colons = sum(value.count(ending) for ending in _KEY_ENDINGS)
    if colons == len(message):
        return False
    keys, objects = 0, [message]
    for found in objects:  # grows as it goes
        keys += len(found)
        objects += [child for child in found.values() if type(child) is dict]
    return colons != keys


def _may_be_rounded(value: object) -> bool:
    """Whether an id read by orjson holds a float that may be an integer it could not keep."""
    pending = [value]
    while pending:
        item = pending.pop()
        if type(item) is float:
            if abs(item) >= _INEXACT:
                return True
        elif type(item) is list:
            pending.extend(item)
        elif type(item) is dict:
            pending.extend(item.values())
    return False


@contextmanager
def _room_for_depth() -> Iterator[None]:
    """The standard library's reader and writer recurse once per level: let them go MAX_DEPTH
    levels below the caller (the interpreter's default allows 1000 in all)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + MAX_DEPTH)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)
