"""Texts the process must never write out: passwords, keys, tokens.

Each is registered as it is read (``keep_secret``); ``redact`` replaces every registered text in a
line about to be written with ``***``, as it appears raw, inside a Python repr (a client library
logging its configuration dict) or inside a JSON string (a JSON log line), where quotes,
backslashes and non-ASCII characters are escaped.
"""

from __future__ import annotations

import json
import threading

MASK = "***"

_lock = threading.Lock()
_forms: tuple[str, ...] = ()  # every written form of every secret, longest first


def _written_forms(secret: str) -> set[str]:
    """The ways ``secret`` can appear in a line: raw, in a repr, in JSON, in JSON of a repr."""
    in_repr = repr(secret)[1:-1]
    return {secret, in_repr, json.dumps(secret)[1:-1], json.dumps(in_repr)[1:-1]}


def keep_secret(secret: str) -> None:
    """Never write ``secret`` from now on (an empty string hides nothing and is ignored)."""
    global _forms
    if not secret:
        return
    with _lock:
        # Longest first: a form that contains another (a repr's escapes) is replaced whole.
        _forms = tuple(sorted(set(_forms) | _written_forms(secret), key=len, reverse=True))


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by ``***``."""
    for form in _forms:
        if form in text:
            text = text.replace(form, MASK)
    return text
