"""How to reach a Kafka cluster: bootstrap servers, which client library, security, extra properties.

The options that say so are declared once, in ``options.py``; ``settings_from`` turns them, as a
command was given them, into ``KafkaSettings``, with a --kafka-config file filling what they leave out.

The password never appears in a repr, a log line or a snapshot: it is a ``Secret``, read
from NBSTREAM_SASL_PASSWORD or --sasl-password-file (or a sasl.jaas.config property). So is the
client secret of SASL/OAUTHBEARER's OIDC client credentials (``OAuthClient``), read from
NBSTREAM_SASL_OAUTH_CLIENT_SECRET or --sasl-oauth-client-secret-file (or the properties
sasl.oauthbearer.client.secret, or clientSecret in sasl.jaas.config).
Extra client properties come from a Java-style ``client.properties`` file (--kafka-config),
as Kafka's own tools take them; those whose name says they hold a secret (a key password, a
token) are kept out of log lines too. The values of the properties listed in ``NUMBERS`` and
``NAMES`` are checked before connecting: a client given one out of range fails on every
attempt, and would be retried forever.

Property names are librdkafka's or the Java clients' (they share most): librdkafka's aliases
``metadata.broker.list`` (for ``bootstrap.servers``) and ``sasl.mechanisms`` (for
``sasl.mechanism``) are read as such. The confluent client gets every property as written; a SASL
mechanism nbstream does not handle itself (GSSAPI, or OAUTHBEARER by a method other than OIDC
client credentials) goes to librdkafka with the rest of the file, which librdkafka checks.
OIDC client credentials in the file (librdkafka's sasl.oauthbearer.* names, or the Java clients'
sasl.jaas.config) are read as the --sasl-oauth-* options are, for either client. kafka-python gets
the properties it has an equivalent of (``kafka_python_properties.py``) and refuses the others by
name. Properties the service sets itself (``SET_BY_NBSTREAM``: the group, offsets, transactions,
batching) keep its values, on both clients, with a warning.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import ssl
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbstream.utils.checked import INT32_MAX, shown

from ...errors import ConfigError
from ...redaction import keep_secret
from ..files import not_a_regular_file, read_small_text
from .options import AUTO, CLIENTS, ConnectionGiven, OAuthGiven

log = logging.getLogger(__name__)

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
PASSWORD_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # a user name and a password
OAUTHBEARER = "OAUTHBEARER"  # an access token of OIDC client credentials
SASL_MECHANISMS = (*PASSWORD_MECHANISMS, OAUTHBEARER)
OAUTH_OPTIONS = "--sasl-oauth-token-url, --sasl-oauth-client-id, --sasl-oauth-scope and --sasl-oauth-client-secret-file"


class Secret:
    """A string that does not show itself: repr and str give asterisks, and so does any log line
    it would appear in; ``reveal()`` gives the value."""

    def __init__(self, value: str):
        self._value = value
        keep_secret(value)

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True)
class OAuthClient:
    """OIDC client credentials for SASL/OAUTHBEARER: where access tokens come from, and who asks."""
    token_url: str
    client_id: str
    client_secret: Secret
    scope: str | None = None

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.token_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"--sasl-oauth-token-url must be an http:// or https:// URL; got {self.token_url!r}.")

    @property
    def uses_https(self) -> bool:
        return self.token_url.lower().startswith("https:")


@dataclass(frozen=True)
class KafkaSettings:
    """Connection settings shared by every command that talks to Kafka."""
    bootstrap: str
    client: str = "kafka-python"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: Secret | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    properties: dict[str, str] = field(default_factory=dict)  # librdkafka's or Java's names, e.g. "client.id"
    oauth: OAuthClient | None = None  # under OAUTHBEARER

    def __post_init__(self) -> None:
        if self.client not in CLIENTS:
            raise ConfigError(f"--kafka-client must be one of {', '.join(CLIENTS)}; got {self.client!r}.")
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"--security-protocol must be one of {', '.join(SECURITY_PROTOCOLS)}; "
                              f"got {self.security_protocol!r}.")
        if self.oauth is not None and self.sasl_mechanism != OAUTHBEARER:
            raise ConfigError(f"{OAUTH_OPTIONS} are for --sasl-mechanism OAUTHBEARER; got "
                              f"{self.sasl_mechanism or 'no --sasl-mechanism'}.")
        self._check_sasl()
        self._check_files()
        for name, value in self.properties.items():
            if holds_a_secret(name):
                keep_secret(value)
            _check_property(name, value)

    def _check_sasl(self) -> None:
        uses_sasl = self.security_protocol.startswith("SASL_")
        if uses_sasl and not self.passes_sasl_through:  # (librdkafka checks the settings of its own mechanisms)
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise ConfigError(f"--security-protocol {self.security_protocol} needs --sasl-mechanism, one of "
                                  f"{', '.join(SASL_MECHANISMS)}; got {self.sasl_mechanism!r}.")
            if self.sasl_mechanism == OAUTHBEARER:
                _check_oauthbearer(self.oauth, self.sasl_username)
            elif not self.sasl_username or self.sasl_password is None:
                raise ConfigError(f"--security-protocol {self.security_protocol} needs --sasl-username and a "
                                  "password (NBSTREAM_SASL_PASSWORD or --sasl-password-file).")
        elif not uses_sasl and (self.sasl_mechanism or self.sasl_username):
            raise ConfigError(f"--sasl-mechanism and --sasl-username need --security-protocol SASL_PLAINTEXT or "
                              f"SASL_SSL; got {self.security_protocol}.")

    def _check_files(self) -> None:
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            path = getattr(self, name)
            problem = None if path is None else not_a_regular_file(Path(path))
            if problem is not None:
                raise ConfigError(f"--{name.replace('_', '-')} {path}: {problem}.")
        if self.ssl_cafile is not None:
            _check_certificates(self.ssl_cafile)

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def passes_sasl_through(self) -> bool:
        """Whether the SASL mechanism is one for librdkafka alone, given in ``properties``."""
        return self.client == "confluent" and self.sasl_mechanism is None and PASSED_MECHANISM in self.properties

    def sasl(self) -> tuple[str, str, str] | None:
        """(mechanism, user name, password) under a SASL protocol with a password mechanism (checked
        complete above), else None (see ``oauth`` for OAUTHBEARER)."""
        if not self.sasl_mechanism or not self.sasl_username or self.sasl_password is None:
            return None
        return self.sasl_mechanism, self.sasl_username, self.sasl_password.reveal()

    def describe(self) -> str:
        """Where and how it connects, for a log line (no secret)."""
        mechanism = self.sasl_mechanism or self.properties.get(PASSED_MECHANISM)
        user = self.sasl_username or (self.oauth and self.oauth.client_id)
        who = f" as {user} ({mechanism})" if user else f" ({mechanism})" if mechanism else ""
        return f"{self.bootstrap} over {self.security_protocol}{who} with {self.client}"


def _check_oauthbearer(oauth: OAuthClient | None, username: str | None) -> None:
    if oauth is None:
        raise ConfigError("--sasl-mechanism OAUTHBEARER needs --sasl-oauth-token-url, --sasl-oauth-client-id and a "
                          "client secret (NBSTREAM_SASL_OAUTH_CLIENT_SECRET or --sasl-oauth-client-secret-file).")
    if username:
        raise ConfigError("--sasl-username is for PLAIN and SCRAM; OAUTHBEARER signs in as --sasl-oauth-client-id.")


def _check_certificates(path: str) -> None:
    """A CA file that holds no certificate is a setting to fix, not a broker to wait for."""
    try:
        ssl.create_default_context().load_verify_locations(cafile=path)
    except (ssl.SSLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", None) or getattr(error, "strerror", None) or error
        raise ConfigError(f"--ssl-cafile {path}: not a file of PEM certificates ({reason}).") from None


# Integer properties, with the least and the most value each may have: Kafka's own bounds, or
# tighter ones where a value the client accepts breaks the service.
NUMBERS = {
    "request.timeout.ms": (1, INT32_MAX),  # 0 or less: every request times out at once
    "metadata.max.age.ms": (0, INT32_MAX), "reconnect.backoff.ms": (0, INT32_MAX),
    "reconnect.backoff.max.ms": (0, INT32_MAX), "connections.max.idle.ms": (0, INT32_MAX),
    "retry.backoff.ms": (0, INT32_MAX), "socket.timeout.ms": (0, INT32_MAX),
    "socket.connection.setup.timeout.ms": (0, INT32_MAX), "statistics.interval.ms": (0, INT32_MAX),
    "fetch.min.bytes": (0, INT32_MAX),
    "receive.buffer.bytes": (-1, INT32_MAX), "send.buffer.bytes": (-1, INT32_MAX),  # -1: the OS default
    # librdkafka waits this long on a fetch when it closes a consumer, and for each fetch of an
    # empty partition while the state is read: a large value makes a stop take minutes.
    "fetch.wait.max.ms": (0, 5_000), "fetch.max.wait.ms": (0, 5_000),  # librdkafka's name, and Java's
}
# Names sent to the broker: printable ASCII (librdkafka refuses a member id made of anything
# else, forever), and short (a Kafka string holds at most 32,767 bytes; the broker adds to it).
NAMES = {"client.id": 1_000, "client.rack": 1_000}
_SECRET_NAME = re.compile(r"password|secret|token|credential|jaas|oauthbearer\.config|(^|\.)key(\.|$)")


def holds_a_secret(name: str) -> bool:
    """Whether a client property's value is a secret, from its name (ssl.key.password, ssl.key.pem,
    sasl.oauthbearer.client.secret...); a property that names where one is (.location, .url) is not."""
    return bool(_SECRET_NAME.search(name)) and not name.endswith((".location", ".url"))


def _check_property(name: str, value: str) -> None:
    """A value of a property listed in NUMBERS or NAMES that no client can work with: one line."""
    if name in NUMBERS:
        least, most = NUMBERS[name]
        if not re.fullmatch(r"[+-]?[0-9]+", value.strip()):
            raise ConfigError(f"--kafka-config: {name}={shown(value)} is not a whole number.")
        if not least <= int(value) <= most:
            raise ConfigError(f"--kafka-config: {name}={shown(value)} is out of range ({least:,} to {most:,}).")
    elif name in NAMES:
        if not value.isascii() or not value.isprintable():
            raise ConfigError(f"--kafka-config: {name}={shown(value)} must be printable ASCII.")
        if len(value) > NAMES[name]:
            raise ConfigError(f"--kafka-config: {name} has {len(value):,} characters; at most {NAMES[name]:,}.")


_JAAS = re.compile(r"""(username|password|clientId|clientSecret|scope)\s*=\s*(?:"([^"]*)"|'([^']*)')""")


def read_properties(path: Path) -> dict[str, str]:
    """A Java ``.properties`` file: ``key=value`` or ``key: value`` lines, ``#``/``!`` comments,
    backslash line continuations."""
    text = read_small_text(path, "--kafka-config")
    properties, pending = {}, ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        pending = ""
        if not line or line[0] in "#!":
            continue
        match = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)", line)
        if not match:
            raise ConfigError(f"--kafka-config {path}: cannot read the line {line!r} (expected key=value).")
        properties[match.group(1)] = match.group(2)
    return properties


# The names librdkafka takes for one setting (its aliases), by the name nbstream uses.
ALIASES = {"bootstrap.servers": ("bootstrap.servers", "metadata.broker.list"),
           "sasl.mechanism": ("sasl.mechanism", "sasl.mechanisms")}
PASSED_MECHANISM = "sasl.mechanisms"  # how a mechanism for librdkafka alone goes on (see passes_sasl_through)

# Properties the service sets itself, with the option that sets them ("" where none does): the
# file's value would break the guarantees, or fight the option.
SET_BY_NBSTREAM = {
    "group.id": "--group", "group.instance.id": "--instance-id", "auto.offset.reset": "--start",
    "session.timeout.ms": "--session-timeout", "heartbeat.interval.ms": "--session-timeout",
    "transaction.timeout.ms": "--transaction-timeout", "transactional.id": "--instance-id",
    "max.poll.records": "--max-poll-records", "enable.auto.commit": "", "enable.auto.offset.store": "",
    "isolation.level": "", "enable.idempotence": "", "acks": "", "request.required.acks": "",
    "partition.assignment.strategy": "", "enable.partition.eof": "", "fetch.max.bytes": "",
    "max.partition.fetch.bytes": "", "linger.ms": "", "queue.buffering.max.ms": "", "batch.size": "",
    "message.max.bytes": "", "max.request.size": "", "compression.type": "", "compression.codec": "",
    "message.timeout.ms": "", "delivery.timeout.ms": "", "queue.buffering.max.messages": "", "max.block.ms": "",
}


def _aliased(properties: dict[str, str], name: str) -> str | None:
    """The value of the setting ``name``, given under any of its ALIASES (taken out of
    ``properties``); ConfigError when two of them disagree."""
    given = {alias: properties.pop(alias) for alias in ALIASES[name] if alias in properties}
    if len(set(given.values())) > 1:
        shown_values = " and ".join(f"{alias}={value}" for alias, value in given.items())
        raise ConfigError(f"--kafka-config: {shown_values} name one setting twice, differently; keep one.")
    return next(iter(given.values()), None)


def _drop_set_by_nbstream(properties: dict[str, str]) -> None:
    for name in [name for name in properties if name in SET_BY_NBSTREAM]:
        log.warning("a --kafka-config property is set by nbstream itself: the file's value is not used",
                    extra={"property": name, **({"option": SET_BY_NBSTREAM[name]} if SET_BY_NBSTREAM[name] else {})})
        del properties[name]


def _mechanism(given: str | None, client: str, properties: dict[str, str], oidc: bool) -> str | None:
    """The SASL mechanism a --kafka-config file names, when nbstream handles it itself (OAUTHBEARER
    when ``oidc``: given client credentials); one it does not is left in ``properties`` for
    librdkafka (as PASSED_MECHANISM), or refused for kafka-python."""
    if given is None or given.upper() in PASSWORD_MECHANISMS or given.upper() == OAUTHBEARER and oidc:
        return given.upper() if given else None
    if client != "confluent":
        raise ConfigError(f"--kafka-config: kafka-python has no equivalent of sasl.mechanisms={given} (it takes "
                          f"{', '.join(PASSWORD_MECHANISMS)}, and OAUTHBEARER with OIDC client credentials); "
                          f"--kafka-client confluent passes it to librdkafka.")
    properties[PASSED_MECHANISM] = given
    return None


# librdkafka's names of OIDC client credentials (the Java clients share the URL's, and give the
# others in sasl.jaas.config), by OAuthGiven's field.
OIDC_PROPERTIES = {"token_url": "sasl.oauthbearer.token.endpoint.url", "client_id": "sasl.oauthbearer.client.id",
                   "scope": "sasl.oauthbearer.scope", "client_secret": "sasl.oauthbearer.client.secret"}
_OIDC_METHOD = "sasl.oauthbearer.method"  # librdkafka's: "oidc", or "default" (a token of its own making)
_JAVA_OIDC_LOGIN = "sasl.login.callback.handler.class"  # the Java clients' client-credentials login


def _oidc_from_file(properties: dict[str, str], jaas: dict[str, str]) -> dict[str, str | None]:
    """The OIDC client credentials a --kafka-config file gives (taken out of ``properties``), by
    OAuthGiven's field; none when it asks librdkafka for OAUTHBEARER by another method."""
    if properties.get(_OIDC_METHOD, "oidc").strip().lower() != "oidc":
        return {}
    properties.pop(_OIDC_METHOD, None)
    if properties.get(_JAVA_OIDC_LOGIN, "").endswith(".OAuthBearerLoginCallbackHandler"):
        del properties[_JAVA_OIDC_LOGIN]
    from_jaas = {"client_id": jaas.get("clientId"), "scope": jaas.get("scope"),
                 "client_secret": jaas.get("clientSecret")}
    return {field_: properties.pop(name, None) or from_jaas.get(field_) for field_, name in OIDC_PROPERTIES.items()}


def _oauth_client(given: OAuthGiven, in_file: dict[str, str | None]) -> OAuthClient | None:
    """The OIDC client of the options (each wins over the file's value), None when neither asks for
    one; ConfigError naming what is missing."""
    secret: str | None
    if given.client_secret_file is not None:
        secret = read_small_text(given.client_secret_file, "--sasl-oauth-client-secret-file").rstrip("\r\n")
    else:
        secret = given.client_secret or in_file.get("client_secret")
    token_url, client_id = given.token_url or in_file.get("token_url"), given.client_id or in_file.get("client_id")
    if not (given.options_given or token_url or client_id):
        return None
    if not (token_url and client_id and secret):
        missing = [name for name, value in (
            ("--sasl-oauth-token-url", token_url), ("--sasl-oauth-client-id", client_id),
            ("a client secret (NBSTREAM_SASL_OAUTH_CLIENT_SECRET or --sasl-oauth-client-secret-file)", secret))
            if not value]
        raise ConfigError(f"OAUTHBEARER's client credentials need {' and '.join(missing)}.")
    return OAuthClient(token_url, client_id, Secret(secret), given.scope or in_file.get("scope") or None)


def settings_given(**options: Any) -> KafkaSettings:
    """Settings from a command's connection options (``ConnectionGiven``'s settings), with the
    secrets of NBSTREAM_SASL_PASSWORD and NBSTREAM_SASL_OAUTH_CLIENT_SECRET."""
    return settings_from(ConnectionGiven(**options, sasl_password=os.environ.get("NBSTREAM_SASL_PASSWORD"),
                                         sasl_oauth_client_secret=os.environ.get("NBSTREAM_SASL_OAUTH_CLIENT_SECRET")))


def client_library(asked: str) -> str:
    """The client library --kafka-client names; for auto, confluent (librdkafka) where the
    confluent-kafka package is installed, else kafka-python."""
    if asked != AUTO:
        return asked
    return "confluent" if importlib.util.find_spec("confluent_kafka") is not None else "kafka-python"


def settings_from(given: ConnectionGiven) -> KafkaSettings:
    """Settings from command-line options; a --kafka-config file fills what the options leave out."""
    kafka_config, client, oauth = given.kafka_config, client_library(given.client), given.oauth
    properties = read_properties(kafka_config) if kafka_config else {}
    _drop_set_by_nbstream(properties)
    jaas = dict((m.group(1), m.group(2) if m.group(2) is not None else m.group(3))
                for m in _JAAS.finditer(properties.pop("sasl.jaas.config", "")))
    oauth_client = _oauth_client(oauth, _oidc_from_file(properties, jaas))
    # every setting the options give too is taken out of the file's properties: the option wins
    in_file = {name: properties.pop(name, None) for name in ("security.protocol", "sasl.username", "sasl.password",
                                                             "ssl.ca.location", "ssl.certificate.location",
                                                             "ssl.key.location")}
    file_bootstrap = _aliased(properties, "bootstrap.servers")
    bootstrap = given.bootstrap or file_bootstrap
    if not bootstrap:
        raise ConfigError("give --bootstrap HOST:PORT (or bootstrap.servers in --kafka-config).")
    file_mechanism = _aliased(properties, "sasl.mechanism")
    mechanism = given.sasl_mechanism or _mechanism(file_mechanism, client, properties, oidc=oauth_client is not None)
    sasl_password = given.sasl_password
    if given.sasl_password_file is not None:
        sasl_password = read_small_text(given.sasl_password_file, "--sasl-password-file").rstrip("\r\n")
    password = sasl_password or in_file["sasl.password"] or jaas.get("password")
    return KafkaSettings(
        bootstrap=bootstrap, client=client,
        security_protocol=(given.security_protocol or in_file["security.protocol"] or "PLAINTEXT").upper(),
        sasl_mechanism=mechanism,
        sasl_username=given.sasl_username or in_file["sasl.username"] or jaas.get("username"),
        sasl_password=Secret(password) if password else None,
        ssl_cafile=str(given.ssl_cafile) if given.ssl_cafile else in_file["ssl.ca.location"],
        ssl_certfile=str(given.ssl_certfile) if given.ssl_certfile else in_file["ssl.certificate.location"],
        ssl_keyfile=str(given.ssl_keyfile) if given.ssl_keyfile else in_file["ssl.key.location"],
        properties=properties, oauth=oauth_client)
