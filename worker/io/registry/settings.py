"""How to reach a Schema Registry: its URL, a user and password (HTTP basic), a CA file for TLS.

The options that say so are declared once, on ``RegistryGiven`` (``worker/setting.py``). The
password never appears in a repr or a log line: it is a ``Secret``, read from
NBSTREAM_SCHEMA_REGISTRY_PASSWORD or --schema-registry-password-file, never from a flag.
"""

from __future__ import annotations

import functools
import os
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...setting import setting
from ..files import read_small_text
from ..kafka.settings import Secret


@dataclass(frozen=True)
class RegistrySettings:
    """Where the registry is and how to reach it; the password is a Secret (never shown)."""
    url: str
    user: str | None = None
    password: Secret | None = None
    cafile: str | None = None
    timeout_s: float = 5.0

    def describe(self) -> dict[str, str | None]:
        """Where and how it connects, for a log line (no secret)."""
        return {"url": self.url, "user": self.user, "cafile": self.cafile}


REGISTRY_PANEL = "Schema Registry"  # --help shows these options under this heading
_option = functools.partial(setting, None, panel=REGISTRY_PANEL)


@dataclass(frozen=True)
class RegistryGiven:
    """The Schema Registry options of a command (serve and produce), as given."""
    url: str | None = _option("--schema-registry",
                              help="URL of a Confluent-compatible Schema Registry's API (--format avro, json-schema, "
                                   "protobuf; --output-format avro).")
    user: str | None = _option("--schema-registry-user", help="User name for the registry (HTTP basic).")
    password_file: Path | None = _option("--schema-registry-password-file",
                                         help="File holding the registry password; or set "
                                              "NBSTREAM_SCHEMA_REGISTRY_PASSWORD. There is no password flag.")
    cafile: Path | None = _option("--schema-registry-cafile",
                                  help="PEM file of the CA certificates that sign the registry's certificate (https).")


def registry_given(**options: Any) -> RegistrySettings | None:
    """Settings from a command's registry options (``RegistryGiven``'s settings), with
    NBSTREAM_SCHEMA_REGISTRY_PASSWORD; None without --schema-registry."""
    given = RegistryGiven(**options)
    return registry_settings_from(given.url, given.user, os.environ.get("NBSTREAM_SCHEMA_REGISTRY_PASSWORD"),
                                  given.password_file, given.cafile)


def registry_settings_from(url: str | None, user: str | None, password: str | None, password_file: Path | None,
                           cafile: Path | None) -> RegistrySettings | None:
    """Settings from the command-line options (None without --schema-registry); password : the
    environment's NBSTREAM_SCHEMA_REGISTRY_PASSWORD, which --schema-registry-password-file replaces."""
    if not url:
        if user or password_file or cafile:
            raise ConfigError("--schema-registry-user, --schema-registry-password-file and --schema-registry-cafile "
                              "need --schema-registry URL.")
        return None
    parts = urllib.parse.urlsplit(url)
    if parts.username or parts.password:  # a URL is shown in log lines; a password must not be
        raise ConfigError("--schema-registry: give the user with --schema-registry-user and the password in "
                          "NBSTREAM_SCHEMA_REGISTRY_PASSWORD or --schema-registry-password-file, not in the URL.")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"--schema-registry must be an http:// or https:// URL; got {url!r}.")
    if password_file is not None:
        password = read_small_text(password_file, "--schema-registry-password-file").rstrip("\r\n")
    if password and not user:
        raise ConfigError("a Schema Registry password needs --schema-registry-user.")
    if cafile is not None:
        read_small_text(cafile, "--schema-registry-cafile")  # readable now, not at the first record
    return RegistrySettings(url, user, Secret(password) if password else None, str(cafile) if cafile else None)
