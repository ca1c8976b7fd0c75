"""Option definitions shared by several commands, and small parsing helpers.

Every option can also come from an environment variable NBSTREAM_<OPTION> (shown in --help).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

import nbstream

from ..io.kafka.settings import ConnectionGiven, KafkaSettings, OAuthGiven, settings_from
from ..io.registry.settings import RegistrySettings, registry_settings_from
from ..model_settings import MODEL_OPTIONS, parameter_rule
from ..setting import Setting, settings_of
from ..tracking import REQUEST_SECONDS, TIMEOUT_SECONDS


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


@dataclass(frozen=True)
class Given:
    """A config dataclass's options as given, built when asked: inside the command, where its
    errors are reported as one line. ``make`` builds it (the dataclass, or a builder of it);
    ``parsers`` turn the text of the values that are given as text into their value (field name
    -> parse), when it is built too: a value that does not parse is reported as any other error."""
    make: Callable[..., Any]
    values: dict[str, Any]
    parsers: dict[str, Callable[[Any], Any]] = field(default_factory=dict)

    def build(self, **more: Any) -> Any:
        parsed = {name: self.parsers[name](value) if name in self.parsers else value
                  for name, value in self.values.items()}
        return self.make(**parsed, **more)


def settings_options(name: str, parts: dict[str, type | tuple[type, Callable[..., Any]]]
                     ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator adding the options of the settings (``worker/setting.py``) of several config
    dataclasses to a command, which receives them as one parameter ``name``: part -> ``Given``.
    A part is a dataclass, or (the dataclass, what builds it from its settings). A setting that
    parses its text and is not given takes the dataclass's default (so does one that may be given
    several times and is not given at all)."""
    makers = {part: spec if isinstance(spec, tuple) else (spec, spec) for part, spec in parts.items()}
    options: dict[str, tuple[Any, Any]] = {}  # by the option's words (its field's name may be another's too)
    for cls, _ in makers.values():
        hints = typing.get_type_hints(cls)
        for f, rule in settings_of(cls):
            if rule.parameter in options:
                raise ValueError(f"two settings take {rule.flag} ({cls.__name__}.{f.name} and another)")
            options[rule.parameter] = _typer_option(f, rule, hints[f.name])

    def given(**values: Any) -> dict[str, Given]:
        found: dict[str, Given] = {}
        for part, (cls, make) in makers.items():
            mine, parsers = {}, {}
            for f, rule in settings_of(cls):
                value = values[rule.parameter]
                if rule.many and not value:
                    value = None
                if rule.parse is not None and value is not None:
                    parsers[f.name] = rule.parse
                if rule.parse is None or value is not None:
                    mine[f.name] = value
            found[part] = Given(make, mine, parsers)
        return found

    return option_group(name, given, options)


def setting_option(cls: type, name: str) -> Any:
    """The Typer option of one setting of ``cls``, for a command that takes it alone."""
    f, rule = next((f, rule) for f, rule in settings_of(cls) if f.name == name)
    return _typer_option(f, rule, typing.get_type_hints(cls)[name])[1]


def _typer_option(f: dataclasses.Field[Any], rule: Setting, annotation: Any) -> tuple[Any, Any]:
    """(the parameter's type, its typer.Option) for one setting."""
    default: Any
    if rule.many:  # the texts given, each time the option was
        annotation, default = list[str] | None, None
    elif rule.parse is not None:  # the text given, or shown: the default as one would write it
        annotation, default = str | None, rule.shown
    elif f.default is not dataclasses.MISSING:
        default = f.default
    elif f.default_factory is not dataclasses.MISSING:
        default = f.default_factory()
    else:
        default = ...  # required
    flag = f"{rule.flag}/{rule.negative}" if rule.negative else rule.flag
    numeric = rule.parse is None  # a parsed value's range is checked once parsed, by the dataclass
    option = typer.Option(default, flag, min=rule.low if numeric else None, max=rule.high if numeric else None,
                          envvar=rule.variable, help=rule.help or None, rich_help_panel=rule.panel)
    return annotation, option


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
                           "MLFLOW_TRACKING_URI names (pip install 'nbstream\\[mlflow]'). A run that cannot be "
                           "logged once the work is done is one line and exit status 3; the work (the "
                           "snapshot) is kept.")
MLFLOW_TIMEOUT = typer.Option(TIMEOUT_SECONDS, "--mlflow-timeout", min=0.1, envvar=env("MLFLOW_TIMEOUT"),
                              help=f"With --mlflow: seconds the whole logging of the run may take; each request "
                                   f"(the server's health check before the work too) at most {REQUEST_SECONDS} "
                                   f"of them.")
REGISTER = typer.Option(None, "--register", envvar=env("REGISTER"),
                        help="With --mlflow: register the logged model as a new version of this name.")
_STRICTER_MINIMUM = {"window": 2}  # the commands' own: a window of one example keeps nothing to learn from
_ANNOTATIONS = {"bool": bool | None, "int": int | None, "float": float | None, "choice": str | None}


def _parameter_option(name: str, negative: str | None) -> tuple[Any, Any]:
    """(type, typer.Option) of one model parameter, from the library's rule of it: its help, default,
    least value (where that end is a number that belongs to it), and the kinds that take it. A value
    over the rule's high end (--min-categories past what the tables hold) is refused by the rule
    itself, in one line that gives the bound."""
    rule, kinds = parameter_rule(name)
    takers = "" if len(kinds) == len(nbstream.MODEL_KINDS) else f"{', '.join(k.capitalize() for k in kinds)}: "
    choices = f" ({', '.join(rule.choices)})" if rule.choices else ""
    bounds = rule.bounds
    low = bounds.low if bounds and isinstance(bounds.low, int | float) and bounds.closed in ("both", "left") else None
    low = _STRICTER_MINIMUM.get(name, low)
    flag = f"--{name.replace('_', '-')}" + (f"/{negative}" if negative else "")
    return _ANNOTATIONS[rule.kind], typer.Option(
        None, flag, min=low, envvar=env(name.upper()), rich_help_panel=MODEL_PANEL,
        help=f"{takers}{rule.help}{choices}" + ("" if rule.default is None else f" Default: {rule.default}."))


model_parameters = option_group("model_parameters", dict, {
    name: _parameter_option(name, negative) for name, negative in MODEL_OPTIONS.items()})
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
        return settings_from(ConnectionGiven(
            self.bootstrap, self.kafka_client, self.security_protocol, self.sasl_mechanism, self.sasl_username,
            os.environ.get("NBSTREAM_SASL_PASSWORD"), self.sasl_password_file, self.ssl_cafile, self.ssl_certfile,
            self.ssl_keyfile, self.kafka_config, oauth))


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
