"""The inference API's HTTP server: uvicorn running the ASGI application of ``app.py``.

The socket is bound before uvicorn starts, so an address that cannot be listened on, a token file
or a TLS certificate that cannot be used is one ConfigError line at start, not a thread that dies.
Beside `worker serve`, the server runs in a daemon thread of its own with its own event loop: a
request never waits for the Kafka loop, nor the loop for a request (they share only the GIL).
Bounds: ``--http-max-connections`` connections at once (more are answered 503), keep-alive
connections closed after 5 s idle, headers of at most 16 KiB sent within ``--http-request-timeout``
(``protocol.py``), bodies by ``Limits``.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from pathlib import Path

import uvicorn

from ..errors import ConfigError
from ..io.files import cannot_because, read_small_text
from .app import Limits, inference_app
from .config import InferenceApiConfig
from .protocol import with_header_deadline
from .sources import ModelSource

log = logging.getLogger(__name__)

KEEP_ALIVE_SECONDS = 5


class InferenceServer:
    """An inference API bound to its address, not yet answering (``start``); its requests
    use at most ``cpu_share`` of a CPU (``budget.py``; None: no bound)."""

    def __init__(self, config: InferenceApiConfig, source: ModelSource, cpu_share: float | None = None):
        assert config.http_port is not None
        self.config = config
        token = _token(config.http_token_file) if config.http_token_file is not None else None
        if config.http_tls_cert is not None:
            _check_tls(config.http_tls_cert, config.http_tls_key)
        self._socket = _bound(config.http_host, config.http_port)
        limits = Limits(max_rows=config.http_max_rows, max_bytes=config.http_max_bytes,
                        body_seconds=config.http_request_timeout)
        self._server = uvicorn.Server(uvicorn.Config(
            inference_app(source, limits, token, cpu_share), log_config=None, access_log=False, lifespan="off",
            limit_concurrency=config.http_max_connections, timeout_keep_alive=KEEP_ALIVE_SECONDS,
            proxy_headers=False, server_header=False,
            ssl_certfile=config.http_tls_cert, ssl_keyfile=config.http_tls_key, ws="none",
            http=with_header_deadline(config.http_request_timeout)))
        self._thread: threading.Thread | None = None
        quiet_uvicorn()

    @property
    def port(self) -> int:
        """The port listened on (the one the system chose for --http-port 0)."""
        port: int = self._socket.getsockname()[1]
        return port

    @property
    def url(self) -> str:
        scheme = "https" if self.config.http_tls_cert is not None else "http"
        host = self.config.http_host
        return f"{scheme}://{f'[{host}]' if ':' in host else host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> None:
        """Answer from a daemon thread, once it does (RuntimeError when it did not start within
        timeout_s); ``stop`` ends it."""
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                        daemon=True, name="inference-api")
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the inference API's server did not start (its log says why)")
            time.sleep(0.01)
        log.info("inference API listening", extra={"url": self.url})

    @property
    def running(self) -> bool:
        """Whether the server's thread still answers."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)
        self._socket.close()


def _bound(host: str, port: int) -> socket.socket:
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                                 flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, protocol)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except (OSError, OverflowError) as error:
        reason = cannot_because(error) if isinstance(error, OSError) else str(error)
        raise ConfigError(f"--http-host {host} --http-port {port}: cannot listen there ({reason}).") from None
    return sock


def _token(path: Path) -> bytes:
    token = read_small_text(path, "--http-token-file").strip()
    if not token or any(c.isspace() for c in token):
        raise ConfigError(f"--http-token-file {path}: the token must be one word, without spaces "
                          f"({'empty' if not token else 'it has spaces'}).")
    return token.encode()


def _check_tls(cert: Path, key: Path | None) -> None:
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as error:
        reason = cannot_because(error) if isinstance(error, OSError) and error.errno else str(error)
        raise ConfigError(f"--http-tls-cert {cert} --http-tls-key {key}: not a usable certificate and key "
                          f"({reason}).") from None


def quiet_uvicorn() -> None:
    """uvicorn's own lines (its start, each connection it drops) only when they warn."""
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).setLevel(logging.WARNING)
