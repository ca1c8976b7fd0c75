"""Texts the process must never write out: passwords, keys, tokens.

Each is registered as it is read (``keep_secret``); ``redact`` replaces every registered text in a
line about to be written with ``***``, as it appears raw, inside a Python repr (a client library
logging its configuration dict) or inside a JSON string (a JSON log line), where quotes,
backslashes and non-ASCII characters are escaped.
"""

from __future__ import annotations

import json
import threading
from collections import deque

MASK = "***"
PASSING_KEPT = 4  # short-lived secrets (access tokens) hidden at once: the newest, and a few it replaced

_lock = threading.Lock()
_lasting: set[str] = set()  # every written form of every lasting secret
_passing: deque[str] = deque(maxlen=PASSING_KEPT)  # the newest short-lived secrets
_forms: tuple[str, ...] = ()  # every written form of every secret hidden now, longest first


def _written_forms(secret: str) -> set[str]:
    """The ways ``secret`` can appear in a line: raw, in a repr, in JSON, in JSON of a repr."""
    in_repr = repr(secret)[1:-1]
    return {secret, in_repr, json.dumps(secret)[1:-1], json.dumps(in_repr)[1:-1]}


def keep_secret(secret: str, *, passing: bool = False) -> None:
    """Never write ``secret`` from now on (an empty string hides nothing and is ignored).

    passing : a short-lived secret, such as an access token refreshed every hour: only the newest
    PASSING_KEPT of them are hidden, so that a service running for months does not check every
    line against every token it ever had (one long expired is worth nothing)."""
    global _forms
    if not secret:
        return
    with _lock:
        if passing:
            _passing.append(secret)
        else:
            _lasting.update(_written_forms(secret))
        forms = _lasting.union(*(_written_forms(token) for token in _passing))
        # Longest first: a form that contains another (a repr's escapes) is replaced whole.
        _forms = tuple(sorted(forms, key=len, reverse=True))


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by ``***``."""
    for form in _forms:
        if form in text:
            text = text.replace(form, MASK)
    return text
