"""Values read from JSON that anyone may have written (a snapshot's header, a stored state):
each checked for type and range before use.

Every check raises ValueError with one line naming the value, what it must be and what came.
``bool`` is never taken for a number (JSON ``true`` is not 1 here), nor a float for an integer.
"""

from __future__ import annotations

import math

import numpy as np

INT64_MAX = (1 << 63) - 1  # Kafka's offsets and counts are int64
INT32_MAX = (1 << 31) - 1  # Java's int: Kafka's partition numbers, and the numbers of most client settings


def required(data: dict[str, object], key: str, context: str = "") -> object:
    """data[key], or ValueError when the key is missing (``context`` prefixes the message)."""
    if key not in data:
        raise ValueError(f"{context}no {key!r} field")
    return data[key]


def integer(value: object, name: str, low: int, high: int) -> int:
    """value as an int when it is an integer of Python or numpy from low to high (both included)."""
    as_int = int(value) if isinstance(value, int | np.integer) and not isinstance(value, bool) else None
    if as_int is None or not low <= as_int <= high:
        raise ValueError(f"{name} must be an integer from {low:,} to {high:,}; got {shown(value)}")
    return as_int


def number(value: object, name: str, low: float = 0.0, high: float = math.inf, *, open_low: bool = False,
           open_high: bool = False) -> float:
    """value as a float when it is a finite real number (not a bool) from low to high, each bound
    included unless open (the default: finite and non-negative)."""
    as_float = as_number(value)
    if as_float is None or not math.isfinite(as_float) \
            or not (low < as_float if open_low else low <= as_float) \
            or not (as_float < high if open_high else as_float <= high):
        if (low, high, open_low) == (0.0, math.inf, False):
            raise ValueError(f"{name} must be a finite non-negative number; got {shown(value)}")
        interval = f"{'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}"
        raise ValueError(f"{name} must be a number in {interval}; got {shown(value)}")
    return as_float


def finite(value: object, name: str) -> float:
    """value as a float when it is a finite int or float (JSON writes 2.0 as 2 at times)."""
    return number(value, name, -math.inf, math.inf, open_low=True, open_high=True)


def floats(values: object, name: str, most: int) -> list[float]:
    """values as a list of floats when it is a list of at most ``most`` finite numbers."""
    if not isinstance(values, list) or len(values) > most:
        raise ValueError(f"{name} must be a list of at most {most:,} numbers; got {shown(values)}")
    return [finite(value, f"{name}[{i}]") for i, value in enumerate(values)]


def optional_text(value: object, name: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{name} must be a string or null; got {shown(value)}")


def as_number(value: object) -> float | None:
    """value as a float when it is an int or a float of Python or numpy (not a bool), else None;
    an int too large for a float is infinite."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
        return None
    try:
        return float(value)
    except OverflowError:  # an int of 400 digits
        return math.inf


def shown(value: object, width: int = 40) -> str:
    """A short rendering of a value for an error line (a key of 5,000 digits is not repeated whole)."""
    if isinstance(value, dict | list):
        return f"{'an object' if isinstance(value, dict) else 'a list'} of {len(value):,} " \
            f"{'entry' if len(value) == 1 else 'entries'}"
    text = repr(value)
    return text if len(text) <= width else f"{text[:width - 3]}..."
