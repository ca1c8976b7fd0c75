"""uvicorn's HTTP/1.1 protocol (httptools), with a deadline and a size for a request's headers.

uvicorn bounds the time between requests of a kept-alive connection, but neither the time a client
takes to send a request's headers nor their size: one that trickles a header byte now and then
holds its connection for ever, and one that sends headers without end fills the memory. Here each
connection has ``seconds`` from its start, and from the end of each answer, to finish the headers of
its next request, in at most ``HEADER_BYTES``; past either it is closed (431 for the size). (The
body has its own bounds: ``app.py``.)
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HEADER_BYTES = 16 << 10
_TOO_LARGE = b'{"error": "the request\'s headers are over 16 KiB."}'
_TOO_LARGE_ANSWER = (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
                     b"content-length: %d\r\nconnection: close\r\n\r\n%b" % (len(_TOO_LARGE), _TOO_LARGE))


class HeadersTooLarge(Exception):
    """Raised in the parser's callbacks to stop it (it reports a parse error, answered 431 here)."""


class HeaderDeadlineProtocol(HttpToolsProtocol):
    """HttpToolsProtocol closing a connection whose request headers are not in within ``seconds``."""

    seconds: float = 30.0  # set on a subclass made by ``with_header_deadline``

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._headers_due: asyncio.TimerHandle | None = None
        self._received = 0  # bytes received since the headers were awaited, while they are
        self._header_bytes = 0  # what the parser read of the headers so far

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._headers_due is None:  # the headers are in (or the connection is closing)
            return
        self._received += len(data)  # headers still coming: all of it is theirs
        if self._received > HEADER_BYTES:
            self._refuse_headers()

    def on_url(self, url: bytes) -> None:
        self._count_header_bytes(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_header_bytes(len(name) + len(value) + 4)
        super().on_header(name, value)

    def send_400_response(self, msg: str) -> None:
        if self._header_bytes > HEADER_BYTES:  # the parser stopped at a header too many
            self._refuse_headers()
        else:
            super().send_400_response(msg)

    def _count_header_bytes(self, size: int) -> None:
        """Count what a request's headers hold (headers that came whole in one piece with a body are
        seen here, not by ``data_received``); past the bound, stop the parser."""
        self._header_bytes += size
        if self._header_bytes > HEADER_BYTES:
            raise HeadersTooLarge

    def _refuse_headers(self) -> None:
        self._disarm()
        if not self.transport.is_closing():
            self.transport.write(_TOO_LARGE_ANSWER)
            self.transport.close()

    def on_message_begin(self) -> None:
        self._header_bytes = 0
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._received = self._header_bytes = 0
        self._headers_due = self.loop.call_later(self.seconds, self._headers_late)

    def _disarm(self) -> None:
        if self._headers_due is not None:
            self._headers_due.cancel()
            self._headers_due = None

    def _headers_late(self) -> None:
        if not self.transport.is_closing():
            self.transport.close()


def with_header_deadline(seconds: float) -> type[HeaderDeadlineProtocol]:
    """The protocol class for a server whose clients have ``seconds`` to send a request's headers."""
    return type("HeaderDeadline", (HeaderDeadlineProtocol,), {"seconds": seconds})
