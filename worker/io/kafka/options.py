"""The Kafka connection options of serve, produce and export, each declared once.

``ConnectionGiven`` holds them as a command was given them (any may be missing): every field made
by ``setting`` is an option, its environment variable, help and check (``worker/setting.py``);
the two secrets are not options (there is no password flag) but variables the command reads.
``settings_from`` (``settings.py``) reads a --kafka-config file into what they leave out, and
checks the whole.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from ...setting import Checked, setting

CLIENTS = ("kafka-python", "confluent")  # the client libraries
AUTO = "auto"  # --kafka-client's default: confluent where it is installed (the worker extra installs it)
KAFKA_PANEL = "Kafka connection"  # --help shows these options under this heading

_option = functools.partial(setting, None, panel=KAFKA_PANEL)  # an option that may be missing


@dataclass(frozen=True)
class OAuthGiven:
    """The --sasl-oauth-* options as given (any may be missing); the client secret's value comes from
    NBSTREAM_SASL_OAUTH_CLIENT_SECRET, or the file."""
    token_url: str | None = None
    client_id: str | None = None
    scope: str | None = None
    client_secret: str | None = None
    client_secret_file: Path | None = None

    @property
    def options_given(self) -> bool:
        """Whether an option asks for OAUTHBEARER (a secret alone, say in the environment of every
        deployment, does not)."""
        return any(value is not None for value in (self.token_url, self.client_id, self.scope,
                                                   self.client_secret_file))


@dataclass(frozen=True)
class ConnectionGiven(Checked):
    """The connection options as a command was given them (any may be missing); the SASL
    password's value comes from NBSTREAM_SASL_PASSWORD, or the file, and OAUTHBEARER's client
    secret from NBSTREAM_SASL_OAUTH_CLIENT_SECRET, or its file."""
    bootstrap: str | None = _option("--bootstrap", aliases=("--bootstrap-server",),
                                    help="Kafka bootstrap servers HOST:PORT[,HOST:PORT...] (or bootstrap.servers in "
                                         "--kafka-config).")
    client: str = setting(AUTO, "--kafka-client", choices=(AUTO, *CLIENTS), panel=KAFKA_PANEL,
                          help="confluent (librdkafka, the fastest: the worker extra installs it) or kafka-python "
                               "(pure Python); auto: confluent where it is installed, else kafka-python. The "
                               "start-up log line names the one in use.")
    security_protocol: str | None = _option("--security-protocol",
                                            help="PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL.")
    sasl_mechanism: str | None = _option("--sasl-mechanism",
                                         help="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (with --sasl-username), or "
                                              "OAUTHBEARER (with --sasl-oauth-token-url and --sasl-oauth-client-id).")
    sasl_username: str | None = _option("--sasl-username", help="SASL user name.")
    sasl_password_file: Path | None = _option("--sasl-password-file",
                                              help="File holding the SASL password; or set NBSTREAM_SASL_PASSWORD. "
                                                   "There is no password flag.")
    sasl_oauth_token_url: str | None = _option("--sasl-oauth-token-url",
                                               help="OAUTHBEARER: the OIDC provider's token endpoint (client "
                                                    "credentials grant).")
    sasl_oauth_client_id: str | None = _option("--sasl-oauth-client-id", help="OAUTHBEARER: the OIDC client id.")
    sasl_oauth_scope: str | None = _option("--sasl-oauth-scope",
                                           help="OAUTHBEARER: the scope to ask tokens for (space-separated; default: "
                                                "none).")
    sasl_oauth_client_secret_file: Path | None = _option(
        "--sasl-oauth-client-secret-file",
        help="OAUTHBEARER: file holding the OIDC client secret; or set NBSTREAM_SASL_OAUTH_CLIENT_SECRET. There is no "
             "secret flag.")
    ssl_cafile: Path | None = _option("--ssl-cafile",
                                      help="PEM file of the CA certificates that sign the brokers' certificates "
                                           "(and an https OAuth token endpoint's).")
    ssl_certfile: Path | None = _option("--ssl-certfile", help="PEM client certificate (mutual TLS).")
    ssl_keyfile: Path | None = _option("--ssl-keyfile", help="PEM key of the client certificate.")
    kafka_config: Path | None = _option("--kafka-config",
                                        help="A client.properties file (key=value lines) for any other client "
                                             "property, in librdkafka's or the Java clients' names; confluent takes "
                                             "every one, kafka-python those it has an equivalent of.")
    sasl_password: str | None = None  # NBSTREAM_SASL_PASSWORD's value
    sasl_oauth_client_secret: str | None = None  # NBSTREAM_SASL_OAUTH_CLIENT_SECRET's value

    @property
    def oauth(self) -> OAuthGiven:
        """The OIDC client credentials given."""
        return OAuthGiven(self.sasl_oauth_token_url, self.sasl_oauth_client_id, self.sasl_oauth_scope,
                          self.sasl_oauth_client_secret, self.sasl_oauth_client_secret_file)
