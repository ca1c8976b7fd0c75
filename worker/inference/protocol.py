"""uvicorn's HTTP/1.1 protocol (httptools), with a deadline for a request's headers.

uvicorn bounds the time between requests of a kept-alive connection, but not the time a client
takes to send a request's headers: one that trickles a header byte now and then holds its
connection for ever, and enough of them hold every connection the server takes. Here each
connection has ``seconds`` from its start, and from the end of each answer, to finish the
headers of its next request; past that it is closed. (The body has its own deadline: ``app.py``.)
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class HeaderDeadlineProtocol(HttpToolsProtocol):
    """HttpToolsProtocol closing a connection whose request headers are not in within ``seconds``."""

    seconds: float = 30.0  # set on a subclass made by ``with_header_deadline``

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._headers_due: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

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
