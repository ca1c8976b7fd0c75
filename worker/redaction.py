"""Texts the process must never write out: passwords, keys, tokens.

Each is registered as it is read (``keep_secret``); ``redact`` replaces every registered text in a
line about to be written with ``***``, as it appears raw, inside a Python repr (a client library
logging its configuration dict) or inside a JSON string (a JSON log line), where quotes,
backslashes and non-ASCII characters are escaped. It also masks credentials by their shape,
whoever wrote the text (a library's exception repeating a URL it was given): the password of a
URL (``http://user:***@host``), the value of a query or setting named like a secret
(``token=***``, ``password=***``, ``X-Amz-Signature=***``) and the credentials of an
Authorization header (``Authorization: Bearer ***``).
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from collections import deque

MASK = "***"
LINE_CHARS = 300  # a line shown of a text from elsewhere (a server's error body) is cut there
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


# (pattern, replacement): what is kept of each match is its groups; the credential itself is MASK.
_SHAPES = (
    # scheme://user:password@host: the password, up to the last @ before the host (it may hold an @)
    (re.compile(r"(?P<head>(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://[^\s/?#@:]*:)[^\s/?#]*@", re.IGNORECASE),
     rf"\g<head>{MASK}@"),
    # name=value where the name ends like a secret's: token, access_token, password, client_secret, api_key...
    (re.compile(r"(?P<head>(?<![\w.-])(?:[\w.-]*[_.-])?(?:token|password|passwd|pwd|secret|api[_-]?key|signature"
                r"|sig|credential)=)[^\s&;'\",]+", re.IGNORECASE), rf"\g<head>{MASK}"),
    # Authorization: Basic xyz, 'authorization': 'Bearer xyz', Proxy-Authorization=...
    (re.compile(r"(?P<head>(?<![\w-])(?:proxy-)?authorization['\"]?\s*[:=]\s*['\"]?"
                r"(?:(?:basic|bearer|token|digest|negotiate)\s+)?)[^\s'\",}]+", re.IGNORECASE), rf"\g<head>{MASK}"),
)


def redact(text: str) -> str:
    """``text`` with every registered secret, and every credential known by its shape, replaced by ``***``."""
    for form in _forms:
        if form in text:
            text = text.replace(form, MASK)
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    return text


def shown_line(text: str, limit: int = LINE_CHARS) -> str:
    """``text`` as one line to print: redacted (before it is cut, so that no piece of a secret is
    left), runs of white space as one space, at most ``limit`` characters (then ending in "...")."""
    line = " ".join(redact(text).split())
    return line if len(line) <= limit else line[:limit - 3].rstrip() + "..."


def without_userinfo(uri: str) -> str:
    """``uri`` without its user name and password (``https://host:8443/base``), to print or to
    request without them."""
    parts = urllib.parse.urlsplit(uri)
    if parts.username is None and parts.password is None:
        return uri
    host = parts.hostname or ""
    return urllib.parse.urlunsplit(parts._replace(netloc=host + (f":{parts.port}" if parts.port else "")))


def keep_uri_secrets(uri: str) -> None:
    """Never write the password of ``uri``, as written or decoded (``p%40ss`` is ``p@ss``)."""
    password = urllib.parse.urlsplit(uri).password or ""
    keep_secret(password)
    keep_secret(urllib.parse.unquote(password))
