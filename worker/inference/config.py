"""The settings of the inference API, taken alike by `worker serve --http-port` and `worker serve-model`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..setting import Checked, setting

PANEL = "Inference API (Open Inference Protocol v2)"


@dataclass(frozen=True)
class InferenceApiConfig(Checked):
    """Where the API listens, what it takes, and who may ask."""
    http_port: int | None = setting(None, "--http-port", low=0, high=65535, panel=PANEL,
                                    help="Answer Open Inference Protocol (v2 REST) requests on this port: "
                                         "/v2/models/NAME/infer and the rest (none: no API).")
    http_host: str = setting("127.0.0.1", "--http-host", panel=PANEL,
                             help="Address the API listens on (0.0.0.0 in a container).")
    http_max_rows: int = setting(10_000, "--http-max-rows", low=1, panel=PANEL,
                                 help="The most rows one request may ask about.")
    http_max_bytes: int = setting(64 << 20, "--http-max-bytes", low=1024, panel=PANEL,
                                  help="The largest request body taken, in bytes.")
    http_max_connections: int = setting(256, "--http-max-connections", low=1, panel=PANEL,
                                        help="Connections served at once; more are answered 503.")
    http_request_timeout: float = setting(30.0, "--http-request-timeout", low=0.1, panel=PANEL,
                                          help="Seconds a client has to send a request's headers, and then its body.")
    http_token_file: Path | None = setting(None, "--http-token-file", panel=PANEL,
                                           help="Require 'Authorization: Bearer TOKEN', the token being this "
                                                "file's content (health checks excepted).")
    http_tls_cert: Path | None = setting(None, "--http-tls-cert", panel=PANEL,
                                         help="Serve HTTPS with this certificate chain (PEM); with --http-tls-key.")
    http_tls_key: Path | None = setting(None, "--http-tls-key", panel=PANEL,
                                        help="The private key (PEM) of --http-tls-cert.")

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.http_tls_cert is None) != (self.http_tls_key is None):
            raise ConfigError("--http-tls-cert and --http-tls-key go together: give both, or neither.")
        given = [flag for flag, value in (("--http-token-file", self.http_token_file),
                                          ("--http-tls-cert", self.http_tls_cert)) if value is not None]
        if self.http_port is None and given:
            raise ConfigError(f"{given[0]} needs --http-port: without it there is no API.")


@dataclass(frozen=True)
class BesideTheLoop(Checked):
    """What the API of `worker serve` may take from the Kafka loop beside it."""
    http_cpu_share: float = setting(0.25, "--http-cpu-share", low=0.01, high=1.0, panel=PANEL,
                                    help="The share of a CPU the API's requests may use, so that the Kafka "
                                         "loop keeps the rest: past it, requests wait their turn.")
