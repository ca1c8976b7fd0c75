"""What names a key of a model per key (--model-key) across the worker's commands.

A key is UTF-8 text of 1 to ``MOST_KEY_BYTES`` bytes (a Kafka record key, a request's parameter)
or, for a model trained on an integer key column, a 64-bit integer.
"""

from __future__ import annotations

from nbstream.arrow.keys import MOST_KEY_BYTES

__all__ = ["MOST_KEY_BYTES", "key_problem"]
_INT64 = (-(2**63), 2**63 - 1)


def key_problem(key: object) -> str | None:
    """Why ``key`` (a str or an int) names no key, or None when it does."""
    if type(key) is int:
        return None if _INT64[0] <= key <= _INT64[1] else "an integer key beyond 64 bits"
    if not isinstance(key, str):
        return f"a key is a string or an integer, not {type(key).__name__}"
    size = len(key.encode("utf-8", "surrogatepass"))
    if size == 0:
        return "an empty key"
    if size > MOST_KEY_BYTES:
        return f"a key of {size:,} bytes, over the {MOST_KEY_BYTES:,} a key may have"
    return None
