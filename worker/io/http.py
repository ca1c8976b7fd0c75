"""Every outbound HTTP request of the worker (the Schema Registry, the OAuth token endpoint), bounded
whatever the server does.

- One deadline for the whole request: connecting, the TLS handshake, sending, the status line, the
  headers and the body. Each socket operation waits at most for the time left, so a server that
  trickles a byte every second is cut off at the deadline, not only when a single read waits too long.
- At most ``max_bytes`` of an answer are read, whatever its status (``AnswerTooLarge`` beyond).
- Redirects are followed within the origin asked (its scheme, host and port) and never out of it:
  the request's headers (its credentials) go to no other server (``RedirectRefused``).
- Nothing a server wrote reaches an error message uncut (``excerpt``).

The environment's proxies (``https_proxy``, ``no_proxy``, ...) are used, as urllib uses them.
"""

from __future__ import annotations

import functools
import http.client
import io
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from email.message import Message
from typing import IO, TYPE_CHECKING, Any, Protocol

from .excerpts import excerpt

if TYPE_CHECKING:
    from http.client import _DataType  # what HTTPConnection.send takes

    from _typeshed import WriteableBuffer

READ_BYTES = 64 << 10  # an answer is read in pieces of this size, so that its cap is never allocated whole


class HttpFailure(Exception):
    """No usable answer came; the message says why, after the server's name (which callers give)."""


class NoAnswer(HttpFailure):
    """The server could not be reached, or did not answer in full before the deadline."""


class UntrustedCertificate(HttpFailure):
    """The server's TLS certificate is not signed by a trusted CA; the message is the check's own."""


class RedirectRefused(HttpFailure):
    """The server redirected the request to another origin, where it was not sent."""


class AnswerTooLarge(HttpFailure):
    """The answer is larger than the request allowed; status : its HTTP status."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Reply:
    """A server's answer, whatever its status: reason is the status line's words, cut short."""
    status: int
    reason: str
    body: bytes


def request(url: str, *, deadline_s: float, max_bytes: int, method: str = "GET", headers: dict[str, str] | None = None,
            data: bytes | None = None, context: ssl.SSLContext | None = None) -> Reply:
    """One request to ``url``, answered within ``deadline_s`` seconds (redirects within its origin
    included) by at most ``max_bytes`` bytes. context : how an https server's certificate is
    checked (None: against the system's CA certificates).

    Raises NoAnswer, UntrustedCertificate, RedirectRefused or AnswerTooLarge."""
    deadline = time.monotonic() + deadline_s
    opener = urllib.request.build_opener(_HttpHandler(deadline), _HttpsHandler(deadline, context),
                                         _SameOriginRedirects())
    asked = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        try:
            answer = opener.open(asked, timeout=deadline_s)
        except urllib.error.HTTPError as error:  # a status other than 2xx: an answer all the same
            answer = error
        with answer:
            return Reply(answer.status, excerpt(str(answer.reason)), _body(answer, max_bytes))
    except urllib.error.URLError as error:  # while connecting or sending
        if isinstance(error.reason, ssl.SSLCertVerificationError):
            raise UntrustedCertificate(error.reason.verify_message) from None
        raise _no_answer(f"cannot be reached: {excerpt(str(error.reason))}", deadline, deadline_s) from None
    except (OSError, http.client.HTTPException) as error:  # while answering: timed out, reset, cut short, garbled
        raise _no_answer(f"did not answer: {excerpt(str(error)) or type(error).__name__}", deadline,
                         deadline_s) from None


def origin(url: str) -> str:
    """scheme://host:port of ``url``, the port given even where it is the scheme's default.

    >>> origin("https://Registry.example/apis/ccompat/v7"), origin("http://127.0.0.1:8081/x")
    ('https://registry.example:443', 'http://127.0.0.1:8081')
    """
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: no origin of ours has it
        port = None
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme.lower()}://{host}:{port or {'http': 80, 'https': 443}.get(parts.scheme.lower(), 0)}"


class _Answer(Protocol):
    """What is read of an answer: an HTTPResponse, or the HTTPError of a status other than 2xx."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Message: ...

    def read(self, size: int, /) -> bytes: ...


def _body(answer: _Answer, max_bytes: int) -> bytes:
    """The answer's body, or AnswerTooLarge once more than ``max_bytes`` came, or IncompleteRead
    when the connection ended before the Content-Length it gave (a read of a size does not say)."""
    pieces, size = [], 0
    while piece := answer.read(READ_BYTES):
        size += len(piece)
        if size > max_bytes:
            raise AnswerTooLarge(f"answered HTTP {answer.status} with more than {max_bytes:,} bytes, "
                                 f"the most read", answer.status)
        pieces.append(piece)
    body = b"".join(pieces)
    stated, chunked = answer.headers.get("Content-Length", ""), "chunked" in answer.headers.get("Transfer-Encoding", "")
    if stated.isascii() and stated.isdigit() and int(stated) > size and not chunked:
        raise http.client.IncompleteRead(body, int(stated) - size)
    return body


def _no_answer(message: str, deadline: float, deadline_s: float) -> NoAnswer:
    """NoAnswer saying ``message``, or that the deadline passed when it has."""
    return NoAnswer(f"did not answer within {deadline_s:g} s" if time.monotonic() >= deadline else message)


def _time_left(deadline: float) -> float:
    """Seconds until ``deadline``; TimeoutError once it has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the request's deadline has passed")
    return left


class _DeadlineReader(io.RawIOBase):
    """A socket's reading end whose every read waits at most until the deadline."""

    def __init__(self, raw: io.RawIOBase, sock: socket.socket, deadline: float):
        self.raw, self.sock, self.deadline = raw, sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int | None:
        self.sock.settimeout(_time_left(self.deadline))
        return self.raw.readinto(buffer)

    def close(self) -> None:
        self.raw.close()
        super().close()


class _Response(http.client.HTTPResponse):
    """An answer read by a _DeadlineReader: its status line and headers too."""

    def __init__(self, sock: socket.socket, *args: Any, deadline: float, **kwargs: Any):
        super().__init__(sock, *args, **kwargs)
        self.fp = io.BufferedReader(_DeadlineReader(self.fp.detach(), sock, deadline))


class _Bounded:
    """What both connection classes add: the deadline for connecting, sending and reading."""
    sock: socket.socket | None
    timeout: float | None
    response_class: Any  # an HTTPResponse class, given the deadline

    def __init__(self, *args: Any, deadline: float, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.deadline = deadline
        self.response_class = functools.partial(_Response, deadline=deadline)

    def connect(self) -> None:
        self.timeout = _time_left(self.deadline)  # create_connection's, and the TLS handshake's in all
        super().connect()  # type: ignore[misc]

    def send(self, data: _DataType | str) -> None:
        if self.sock is not None:
            self.sock.settimeout(_time_left(self.deadline))  # sendall's in all
        super().send(data)  # type: ignore[misc]


class _BoundedHTTPConnection(_Bounded, http.client.HTTPConnection):
    pass


class _BoundedHTTPSConnection(_Bounded, http.client.HTTPSConnection):
    pass


class _HttpHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: float):
        super().__init__()
        self.deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_BoundedHTTPConnection, deadline=self.deadline), req)


class _HttpsHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: float, context: ssl.SSLContext | None):
        super().__init__(context=context)
        self.deadline, self.tls = deadline, context

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_BoundedHTTPSConnection, deadline=self.deadline), req,
                            context=self.tls)


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only within the origin of the request it answers."""

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: http.client.HTTPMessage, newurl: str) -> urllib.request.Request | None:
        target = origin(newurl)
        if target != origin(req.full_url):
            fp.close()
            raise RedirectRefused(f"redirects to another origin ({excerpt(target, 200)}), where requests (and "
                                  f"their credentials) are never sent")
        return super().redirect_request(req, fp, code, msg, headers, newurl)
