"""Option definitions shared by several commands, and small parsing helpers.

Every option can also come from an environment variable NBSTREAM_<OPTION> (shown in --help).
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from ..config import LONGEST_NGRAMS, MOST_CLASSES
from ..io.kafka.settings import KafkaSettings, OAuthGiven, settings_from
from ..io.registry.settings import RegistrySettings, registry_settings_from


def env(name: str) -> str:
    return f"NBSTREAM_{name}"


def columns(value: str | None) -> list[str]:
    """A comma-separated list of names, blanks dropped."""
    return [c.strip() for c in value.split(",") if c.strip()] if value else []


def option_group(name: str, build: Callable[..., Any], options: dict[str, tuple[Any, Any]]
                 ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator adding ``options`` (parameter name -> (type, typer option)) to a command, which
    receives them as one parameter ``name`` = build(**their values); in --help they follow its own."""
    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command)
        own = [p for p in signature.parameters.values() if p.name != name]
        added = [inspect.Parameter(option, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)
                 for option, (kind, default) in options.items()]

        @functools.wraps(command)
        def with_group(**values: Any) -> Any:
            group = build(**{option: values.pop(option) for option in options})
            return command(**values, **{name: group})

        with_group.__signature__ = signature.replace(parameters=own + added)  # type: ignore[attr-defined]
        with_group.__annotations__ = {**{k: v for k, v in command.__annotations__.items() if k != name},
                                      **{option: kind for option, (kind, _) in options.items()}}
        return with_group
    return decorate


MODEL_PANEL = "Model parameters"  # --help groups these options under their own headings
KAFKA_PANEL = "Kafka connection"

SNAPSHOT = typer.Argument(..., help="Snapshot written by worker train.", show_default=False)
PATHS = typer.Argument(..., help="Parquet files, directories or globs.", show_default=False)
BATCH_SIZE = typer.Option(65_536, "--batch-size", min=1, envvar=env("BATCH_SIZE"),
                          help="Rows per record batch; bounds memory.")
SKIP_INVALID = typer.Option(False, "--skip-invalid", envvar=env("SKIP_INVALID"),
                            help="Set bad rows aside (counted, written out) instead of stopping.")
PROGRESS = typer.Option(None, "--progress/--no-progress", envvar=env("PROGRESS"),
                        help="Progress bar with rows/s (default: on when stderr is a terminal).")

MLFLOW = typer.Option(False, "--mlflow", envvar=env("MLFLOW"),
                      help="Log the run (parameters, metrics, the model) to the MLflow tracking server "
                           "MLFLOW_TRACKING_URI names (pip install 'nbstream\\[mlflow]').")
REGISTER = typer.Option(None, "--register", envvar=env("REGISTER"),
                        help="With --mlflow: register the logged model as a new version of this name.")

HASH_BITS = typer.Option(20, "--hash-bits", min=1, max=31, envvar=env("HASH_BITS"),
                         help="Text is hashed into 2**hash_bits features.")
NGRAMS = typer.Option(1, "--ngrams", min=1, max=LONGEST_NGRAMS, envvar=env("NGRAMS"),
                      help="Use word n-grams up to this length.")
ALPHA = typer.Option(None, "--alpha", min=0, envvar=env("ALPHA"), help="Additive smoothing (default: 1.0).",
                     rich_help_panel=MODEL_PANEL)
BINARIZE = typer.Option(None, "--binarize", envvar=env("BINARIZE"),
                        help="Bernoulli: features > this become 1 (default: 0.0).", rich_help_panel=MODEL_PANEL)
FIT_PRIOR = typer.Option(None, "--fit-prior/--uniform-prior", envvar=env("FIT_PRIOR"),
                         help="Learn class priors, or use uniform ones (default: learn).", rich_help_panel=MODEL_PANEL)
NORM = typer.Option(None, "--norm/--no-norm", envvar=env("NORM"),
                    help="Complement: normalise the weights (default: no).", rich_help_panel=MODEL_PANEL)
VAR_SMOOTHING = typer.Option(None, "--var-smoothing", min=0, envvar=env("VAR_SMOOTHING"),
                             help="Gaussian: variance smoothing (default: 1e-9).", rich_help_panel=MODEL_PANEL)
MIN_CATEGORIES = typer.Option(None, "--min-categories", min=1, envvar=env("MIN_CATEGORIES"),
                              help="Categorical: minimum categories per feature.", rich_help_panel=MODEL_PANEL)
MAX_CLASSES = typer.Option(1_000, "--max-classes", min=1, max=MOST_CLASSES, envvar=env("MAX_CLASSES"),
                           help="Most classes the model may hold: a label that would add one more is a bad "
                                "row (train: an error, or set aside with --skip-invalid; serve: a dead "
                                "letter). With sparse counts (hashed text) a class costs 16 bytes per (class, "
                                "feature) pair its examples bring, and about 20 bytes in every prediction (each "
                                "carries every class's probability); with dense counts 8 to 24 bytes per feature.")
HALF_LIFE = typer.Option(None, "--half-life", min=0, envvar=env("HALF_LIFE"),
                         help="Forget: an example's weight halves every N newer examples.", rich_help_panel=MODEL_PANEL)
WINDOW = typer.Option(None, "--window", min=2, envvar=env("WINDOW"),
                      help="Keep a sliding window: the model of exactly the last N examples (less at most a "
                           "bucket).", rich_help_panel=MODEL_PANEL)
WINDOW_BUCKETS = typer.Option(None, "--window-buckets", min=1, envvar=env("WINDOW_BUCKETS"),
                              help="The window moves a bucket of N/K examples at a time, and costs K + 1 models' "
                                   "memory (default: 10, or N when smaller).", rich_help_panel=MODEL_PANEL)
COUNTS = typer.Option(None, "--counts", envvar=env("COUNTS"),
                      help="Bernoulli, multinomial, complement: hold the counts as a dense table of classes x "
                           "features, or sparse, only the (class, feature) pairs seen; auto (default): sparse "
                           "from 2^16 features on (hashed text). Predictions are the same.",
                      rich_help_panel=MODEL_PANEL)


model_parameters = option_group("model_parameters", dict, {
    "alpha": (float | None, ALPHA), "binarize": (float | None, BINARIZE),
    "fit_prior": (bool | None, FIT_PRIOR), "norm": (bool | None, NORM),
    "var_smoothing": (float | None, VAR_SMOOTHING), "min_categories": (int | None, MIN_CATEGORIES),
    "half_life": (float | None, HALF_LIFE), "window": (int | None, WINDOW),
    "window_buckets": (int | None, WINDOW_BUCKETS), "counts": (str | None, COUNTS)})
"""Gives a command the model parameters, received as one dict ``model_parameters`` (ModelOptions' fields)."""


# ---- Kafka connection (serve, produce, export) ----------------------------------------------
BOOTSTRAP = typer.Option(None, "--bootstrap", "--bootstrap-server", envvar=env("BOOTSTRAP"),
                         help="Kafka bootstrap servers HOST:PORT[,HOST:PORT...] (or bootstrap.servers in "
                              "--kafka-config).", rich_help_panel=KAFKA_PANEL)
KAFKA_CLIENT = typer.Option("kafka-python", "--kafka-client", envvar=env("KAFKA_CLIENT"),
                            help="kafka-python, or confluent (librdkafka, faster; pip install "
                                 "'nbstream\\[confluent]').", rich_help_panel=KAFKA_PANEL)
SECURITY_PROTOCOL = typer.Option(None, "--security-protocol", envvar=env("SECURITY_PROTOCOL"),
                                 help="PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL.",
                                 rich_help_panel=KAFKA_PANEL)
SASL_MECHANISM = typer.Option(None, "--sasl-mechanism", envvar=env("SASL_MECHANISM"),
                              help="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (with --sasl-username), or OAUTHBEARER "
                                   "(with --sasl-oauth-token-url and --sasl-oauth-client-id).",
                              rich_help_panel=KAFKA_PANEL)
SASL_USERNAME = typer.Option(None, "--sasl-username", envvar=env("SASL_USERNAME"), help="SASL user name.",
                             rich_help_panel=KAFKA_PANEL)
SASL_PASSWORD_FILE = typer.Option(None, "--sasl-password-file", envvar=env("SASL_PASSWORD_FILE"),
                                  help="File holding the SASL password; or set NBSTREAM_SASL_PASSWORD. "
                                       "There is no password flag.", rich_help_panel=KAFKA_PANEL)
SASL_OAUTH_TOKEN_URL = typer.Option(None, "--sasl-oauth-token-url", envvar=env("SASL_OAUTH_TOKEN_URL"),
                                    help="OAUTHBEARER: the OIDC provider's token endpoint (client credentials "
                                         "grant).", rich_help_panel=KAFKA_PANEL)
SASL_OAUTH_CLIENT_ID = typer.Option(None, "--sasl-oauth-client-id", envvar=env("SASL_OAUTH_CLIENT_ID"),
                                    help="OAUTHBEARER: the OIDC client id.", rich_help_panel=KAFKA_PANEL)
SASL_OAUTH_SCOPE = typer.Option(None, "--sasl-oauth-scope", envvar=env("SASL_OAUTH_SCOPE"),
                                help="OAUTHBEARER: the scope to ask tokens for (space-separated; default: none).",
                                rich_help_panel=KAFKA_PANEL)
SASL_OAUTH_CLIENT_SECRET_FILE = typer.Option(None, "--sasl-oauth-client-secret-file",
                                             envvar=env("SASL_OAUTH_CLIENT_SECRET_FILE"),
                                             help="OAUTHBEARER: file holding the OIDC client secret; or set "
                                                  "NBSTREAM_SASL_OAUTH_CLIENT_SECRET. There is no secret flag.",
                                             rich_help_panel=KAFKA_PANEL)
SSL_CAFILE = typer.Option(None, "--ssl-cafile", envvar=env("SSL_CAFILE"),
                          help="PEM file of the CA certificates that sign the brokers' certificates (and an https "
                               "OAuth token endpoint's).",
                          rich_help_panel=KAFKA_PANEL)
SSL_CERTFILE = typer.Option(None, "--ssl-certfile", envvar=env("SSL_CERTFILE"),
                            help="PEM client certificate (mutual TLS).", rich_help_panel=KAFKA_PANEL)
SSL_KEYFILE = typer.Option(None, "--ssl-keyfile", envvar=env("SSL_KEYFILE"), help="PEM key of the client certificate.",
                           rich_help_panel=KAFKA_PANEL)
KAFKA_CONFIG = typer.Option(None, "--kafka-config", envvar=env("KAFKA_CONFIG"),
                            help="A client.properties file (key=value lines) for any other client property, in "
                                 "librdkafka's or the Java clients' names; confluent takes every one, kafka-python "
                                 "those it has an equivalent of.", rich_help_panel=KAFKA_PANEL)


@dataclass(frozen=True)
class KafkaOptions:
    """The connection options of a Kafka command, as given (``settings()`` checks and reads them)."""
    bootstrap: str | None
    kafka_client: str
    security_protocol: str | None
    sasl_mechanism: str | None
    sasl_username: str | None
    sasl_password_file: Path | None
    sasl_oauth_token_url: str | None
    sasl_oauth_client_id: str | None
    sasl_oauth_scope: str | None
    sasl_oauth_client_secret_file: Path | None
    ssl_cafile: Path | None
    ssl_certfile: Path | None
    ssl_keyfile: Path | None
    kafka_config: Path | None

    def settings(self) -> KafkaSettings:
        """Connection settings, with NBSTREAM_SASL_PASSWORD and NBSTREAM_SASL_OAUTH_CLIENT_SECRET (raises
        ConfigError)."""
        oauth = OAuthGiven(self.sasl_oauth_token_url, self.sasl_oauth_client_id, self.sasl_oauth_scope,
                           os.environ.get("NBSTREAM_SASL_OAUTH_CLIENT_SECRET"), self.sasl_oauth_client_secret_file)
        return settings_from(self.bootstrap, self.kafka_client, self.security_protocol, self.sasl_mechanism,
                             self.sasl_username, os.environ.get("NBSTREAM_SASL_PASSWORD"), self.sasl_password_file,
                             self.ssl_cafile, self.ssl_certfile, self.ssl_keyfile, self.kafka_config, oauth)


kafka_options = option_group("kafka", KafkaOptions, {
    "bootstrap": (str | None, BOOTSTRAP), "kafka_client": (str, KAFKA_CLIENT),
    "security_protocol": (str | None, SECURITY_PROTOCOL), "sasl_mechanism": (str | None, SASL_MECHANISM),
    "sasl_username": (str | None, SASL_USERNAME), "sasl_password_file": (Path | None, SASL_PASSWORD_FILE),
    "sasl_oauth_token_url": (str | None, SASL_OAUTH_TOKEN_URL),
    "sasl_oauth_client_id": (str | None, SASL_OAUTH_CLIENT_ID), "sasl_oauth_scope": (str | None, SASL_OAUTH_SCOPE),
    "sasl_oauth_client_secret_file": (Path | None, SASL_OAUTH_CLIENT_SECRET_FILE),
    "ssl_cafile": (Path | None, SSL_CAFILE), "ssl_certfile": (Path | None, SSL_CERTFILE),
    "ssl_keyfile": (Path | None, SSL_KEYFILE), "kafka_config": (Path | None, KAFKA_CONFIG)})
"""Gives a command the Kafka connection options, received as one ``kafka: KafkaOptions``."""


# ---- Schema Registry (serve and produce with --format avro) ---------------------------------
REGISTRY_PANEL = "Schema Registry"
SCHEMA_REGISTRY = typer.Option(None, "--schema-registry", envvar=env("SCHEMA_REGISTRY"),
                               help="URL of a Confluent-compatible Schema Registry's API (--format avro, "
                                    "json-schema, protobuf; --output-format avro).",
                               rich_help_panel=REGISTRY_PANEL)
SCHEMA_REGISTRY_USER = typer.Option(None, "--schema-registry-user", envvar=env("SCHEMA_REGISTRY_USER"),
                                    help="User name for the registry (HTTP basic).", rich_help_panel=REGISTRY_PANEL)
SCHEMA_REGISTRY_PASSWORD_FILE = typer.Option(None, "--schema-registry-password-file",
                                             envvar=env("SCHEMA_REGISTRY_PASSWORD_FILE"),
                                             help="File holding the registry password; or set "
                                                  "NBSTREAM_SCHEMA_REGISTRY_PASSWORD. There is no password flag.",
                                             rich_help_panel=REGISTRY_PANEL)
SCHEMA_REGISTRY_CAFILE = typer.Option(None, "--schema-registry-cafile", envvar=env("SCHEMA_REGISTRY_CAFILE"),
                                      help="PEM file of the CA certificates that sign the registry's certificate "
                                           "(https).", rich_help_panel=REGISTRY_PANEL)


@dataclass(frozen=True)
class RegistryOptions:
    """The Schema Registry options of a command, as given (``settings()`` checks and reads them)."""
    schema_registry: str | None
    schema_registry_user: str | None
    schema_registry_password_file: Path | None
    schema_registry_cafile: Path | None

    def settings(self) -> RegistrySettings | None:
        """Registry settings, with NBSTREAM_SCHEMA_REGISTRY_PASSWORD; None without --schema-registry."""
        return registry_settings_from(self.schema_registry, self.schema_registry_user,
                                      os.environ.get("NBSTREAM_SCHEMA_REGISTRY_PASSWORD"),
                                      self.schema_registry_password_file, self.schema_registry_cafile)


registry_options = option_group("registry", RegistryOptions, {
    "schema_registry": (str | None, SCHEMA_REGISTRY), "schema_registry_user": (str | None, SCHEMA_REGISTRY_USER),
    "schema_registry_password_file": (Path | None, SCHEMA_REGISTRY_PASSWORD_FILE),
    "schema_registry_cafile": (Path | None, SCHEMA_REGISTRY_CAFILE)})
"""Gives a command the Schema Registry options, received as one ``registry: RegistryOptions``."""
