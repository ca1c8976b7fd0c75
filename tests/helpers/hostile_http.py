"""Hostile HTTP servers, for the tests of the worker's outbound HTTP (the Schema Registry, the
OAuth token endpoint): each on 127.0.0.1, on a free port, in threads of the test process.

A ``HostileServer`` answers every request as its ``behaviour`` says (a test may change it at any
time) and keeps what each request carried (``requests``). Behaviours: ``answer`` (any status, any
body), ``json_answer``, ``trickle`` (the headers, then one byte of the body every few seconds; or
the headers themselves so), ``redirect`` (a 3xx to another URL), ``padded_json`` (a JSON object
with one string of any size, written as it is read), ``relay`` (the request passed on to a real
server, as a proxy would) and ``routes`` (a behaviour by path).
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Behaviour = Callable[[BaseHTTPRequestHandler, threading.Event], None]
PIECE_BYTES = 1 << 16


@dataclass(frozen=True)
class Request:
    """What a request carried."""
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class HostileServer:
    """An HTTP server answering by ``behaviour(handler, stopping)``; ``stopping`` is set by ``stop()``,
    so that a behaviour that takes its time ends with the server."""

    def __init__(self, behaviour: Behaviour | None = None):
        self.behaviour: Behaviour = behaviour or json_answer({})
        self.requests: list[Request] = []
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the standard library's name
                server._answer(self)

            do_POST = do_GET

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.block_on_close = False  # a trickling answer does not hold up stop()
        threading.Thread(target=self._server.serve_forever, args=(0.05,), name="hostile-http", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        self.requests.append(Request(handler.command, handler.path, dict(handler.headers), body))
        handler.request_body = body  # type: ignore[attr-defined]  (for relay)
        try:
            self.behaviour(handler, self.stopping)
        except (BrokenPipeError, ConnectionResetError):  # the client hung up, as it may
            pass


def answer(status: int, body: bytes, content_type: str = "application/json") -> Behaviour:
    def behave(handler: BaseHTTPRequestHandler, stopping: threading.Event) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
    return behave


def json_answer(value, status: int = 200) -> Behaviour:
    return answer(status, json.dumps(value).encode())


def trickle(body: bytes, every_s: float, *, headers_too: bool = False) -> Behaviour:
    """A 200 answer of ``body`` whose body (``headers_too``: whole answer) comes one byte every ``every_s``."""
    def behave(handler: BaseHTTPRequestHandler, stopping: threading.Event) -> None:
        head = f"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        if not headers_too:
            handler.wfile.write(head)
        for byte in (head if headers_too else b"") + body:
            if stopping.wait(every_s):
                return
            handler.wfile.write(bytes([byte]))
    return behave


def redirect(status: int, location: str) -> Behaviour:
    def behave(handler: BaseHTTPRequestHandler, stopping: threading.Event) -> None:
        handler.send_response(status)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()
    return behave


def padded_json(status: int, fields: dict, key: str, size: int) -> Behaviour:
    """A JSON object of ``fields`` and ``key``: a string of ``size`` x's, written piece by piece."""
    head = json.dumps(fields)[:-1].encode() + (b", " if fields else b"") + json.dumps(key).encode() + b': "'
    tail = b'"}'

    def behave(handler: BaseHTTPRequestHandler, stopping: threading.Event) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(head) + size + len(tail)))
        handler.end_headers()
        handler.wfile.write(head)
        for start in range(0, size, PIECE_BYTES):
            handler.wfile.write(b"x" * min(PIECE_BYTES, size - start))
        handler.wfile.write(tail)
    return behave


def relay(upstream: str) -> Behaviour:
    """The request passed on to ``upstream`` + its path, and its answer passed back."""
    def behave(handler: BaseHTTPRequestHandler, stopping: threading.Event) -> None:
        request = urllib.request.Request(upstream + handler.path, method=handler.command, headers={
            "Content-Type": handler.headers.get("Content-Type", "application/json")},
            data=handler.request_body or None)  # type: ignore[attr-defined]
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                status, body = reply.status, reply.read()
        except urllib.error.HTTPError as error:
            status, body = error.code, error.read()
        answer(status, body)(handler, stopping)
    return behave


def routes(by_path: dict[str, Behaviour], otherwise: Behaviour) -> Behaviour:
    """The behaviour of the request's path, else ``otherwise``."""
    def behave(handler: BaseHTTPRequestHandler, stopping: threading.Event) -> None:
        by_path.get(handler.path, otherwise)(handler, stopping)
    return behave
