"""Values read from JSON that anyone may have written: each checked for type and range before use.

Every check raises ValueError with one line naming the field, what it must be and what came.
``bool`` is never taken for an integer (JSON ``true`` is not 1 here), nor a float for an integer.
"""

from __future__ import annotations

import math

INT64_MAX = (1 << 63) - 1  # Kafka's offsets and counts are int64
INT32_MAX = (1 << 31) - 1  # Java's int: Kafka's partition numbers, and the numbers of most client settings


def required(data: dict, key: str) -> object:
    """data[key], or ValueError when the key is missing."""
    if key not in data:
        raise ValueError(f"no {key!r} field")
    return data[key]


def integer(value: object, name: str, low: int, high: int) -> int:
    """value when it is an integer from low to high (both included)."""
    if type(value) is not int or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low:,} to {high:,}; got {shown(value)}")
    return value


def number(value: object, name: str) -> float:
    """value as a float when it is a finite, non-negative number (an integer or a float)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        as_float = float(value) if abs(value) < 1e300 else math.inf  # a 400-digit integer does not fit a float
        if math.isfinite(as_float) and as_float >= 0:
            return as_float
    raise ValueError(f"{name} must be a finite non-negative number; got {shown(value)}")


def optional_text(value: object, name: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{name} must be a string or null; got {shown(value)}")


def shown(value: object, width: int = 40) -> str:
    """A short rendering of a JSON value for an error message (a key of 5,000 digits is not repeated whole)."""
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    text = repr(value)
    return text if len(text) <= width else f"{text[:width - 3]}..."
