"""Text from outside (a server's error, a record's value) cut short before it goes into an error
message, a log line or a header: a 10 MB error description must not become a 10 MB line."""

from __future__ import annotations

MOST_CHARACTERS = 1_000


def excerpt(text: str, most: int = MOST_CHARACTERS) -> str:
    """``text`` as it is when it has at most ``most`` characters, else its first ``most`` and its size.

    >>> excerpt("abcdef", 3)
    'abc... (6 characters)'
    """
    return text if len(text) <= most else f"{text[:most]}... ({len(text):,} characters)"
