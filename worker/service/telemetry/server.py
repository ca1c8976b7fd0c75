"""The HTTP endpoints of `worker serve`, on one small server (a daemon thread).

The server is bounded: connections open at once, and the time a client may take to send its
request; it never stops the service.

/metrics  Prometheus text format: the service's metrics (docs/metrics.md), the process and Python ones
/healthz  200 while the service's loop turns (working, or waiting to start a new Kafka session), else 503
/readyz   200 while partitions are assigned and the broker answers, else 503
"""

from __future__ import annotations

import io
import logging
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ...io.files import cannot_because
from .metrics import ServiceMetrics

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

log = logging.getLogger(__name__)

REQUEST_SECONDS = 5.0  # a client has this long to send its whole request, however it trickles in
MAX_CONNECTIONS = 64  # open at once; each holds a thread and a file descriptor
ACCEPT_WARNING_SECONDS = 60.0  # between two warnings that connections cannot be accepted


class _DeadlineReader(io.RawIOBase):
    """The reading side of a connection, every read within one deadline: a client sending a
    header line every few seconds would reset a per-read timeout forever."""

    def __init__(self, connection: socket.socket, seconds: float):
        self.connection, self.deadline = connection, time.monotonic() + seconds

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive in time")
        self.connection.settimeout(left)
        return self.connection.recv_into(buffer)


class _Connections:
    """The endpoint's open connections, about ``limit`` at most.

    A connection beyond the limit takes the place of the one that has waited longest for its
    request to arrive, which is hung up: however many clients stall, a scrape gets through.
    Connections hung up count until their thread has closed them; beyond twice the limit, or
    when every connection is being answered, a new one is refused."""

    def __init__(self, limit: int):
        self.limit = limit
        self._lock = threading.Lock()
        self._open = 0
        self._waiting: dict[socket.socket, None] = {}  # still sending their request, oldest first

    def admit(self, connection: socket.socket) -> bool:
        with self._lock:
            if self._open >= self.limit:
                if not self._waiting or self._open >= 2 * self.limit:
                    return False
                oldest = next(iter(self._waiting))
                del self._waiting[oldest]
                try:
                    oldest.shutdown(socket.SHUT_RDWR)  # its thread's read ends, and it closes the connection
                except OSError:
                    pass
            self._open += 1
            self._waiting[connection] = None
            return True

    def answering(self, connection: socket.socket) -> None:
        """The request has arrived: no longer one to hang up."""
        with self._lock:
            self._waiting.pop(connection, None)

    def closed(self, connection: socket.socket) -> None:
        with self._lock:
            self._open -= 1
            self._waiting.pop(connection, None)


class _MetricsServer(ThreadingHTTPServer):
    """A thread per connection, for a bounded number of connections (see _Connections); IPv4 or
    IPv6. It never stops the service: a failed accept (out of file descriptors) is a warning and
    a short pause, and a client that goes away mid-request (a scrape that timed out) is a debug
    line, not a traceback on stderr among the structured logs."""

    daemon_threads = True
    request_queue_size = 64  # connections waiting to be accepted (the default 5 makes a burst wait for SYN retries)

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], family: int,
                 max_connections: int):
        self.address_family = family
        self.connections = _Connections(max_connections)
        self._next_accept_warning = 0.0
        super().__init__(address, handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        try:
            return super().get_request()
        except OSError as error:  # socketserver passes over it, and would try again at once
            now = time.monotonic()
            if now >= self._next_accept_warning:
                log.warning("the metrics endpoint cannot accept connections",
                            extra={"error": cannot_because(error)})
                self._next_accept_warning = now + ACCEPT_WARNING_SECONDS
            time.sleep(0.1)
            raise

    def process_request(self, request: socket.socket, client_address: Any) -> None:  # type: ignore[override]
        if not self.connections.admit(request):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)  # starts its thread
        except BaseException:
            self.connections.closed(request)
            raise

    def process_request_thread(self, request: socket.socket, client_address: Any) -> None:  # type: ignore[override]
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.connections.closed(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("a metrics request failed", extra={"client": f"{client_address[0]}:{client_address[1]}",
                                                     "error": repr(sys.exc_info()[1])})


def serve_metrics(metrics: ServiceMetrics, port: int, host: str = "127.0.0.1", stall_seconds: float = 60.0,
                  max_connections: int = MAX_CONNECTIONS) -> ThreadingHTTPServer:
    """Start the endpoints on host:port (an IPv4 or IPv6 address or a name; port 0 picks a free
    one) in a daemon thread."""

    class Handler(BaseHTTPRequestHandler):
        timeout = 10  # seconds each write of an answer may take

        def setup(self) -> None:
            super().setup()
            self.rfile.close()
            self.rfile = io.BufferedReader(_DeadlineReader(self.connection, REQUEST_SECONDS))

        def parse_request(self) -> bool:
            parsed = super().parse_request()
            if parsed:
                server.connections.answering(self.connection)
                self.connection.settimeout(self.timeout)
            return parsed

        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._reply(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
            elif self.path == "/healthz":
                alive = time.monotonic() - metrics.heartbeat < stall_seconds
                self._reply(200 if alive else 503, b"ok\n" if alive else b"stalled\n")
            elif self.path == "/readyz":
                self._reply(200 if metrics.ready else 503, b"ready\n" if metrics.ready else b"not ready\n")
            else:
                self._reply(404, b"not found\n")

        def _reply(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # requests are not worth a log line each
            pass

    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
        server = _MetricsServer((host, port), Handler, family, max_connections)
    except (OSError, OverflowError) as error:
        from ...errors import ConfigError

        raise ConfigError(f"--metrics-host {host} --metrics-port {port}: cannot listen there "
                          f"({getattr(error, 'strerror', None) or error}).") from None
    threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
    return server
