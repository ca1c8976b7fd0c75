"""Client properties, as the Java clients and librdkafka name them, as kafka-python's options.

kafka-python takes a different set of keyword arguments for each of its consumer, producer and
admin client, and refuses any other. A property is passed to each client that has an equivalent
of it: the consumers (the group member and the readers of whole topics), the producers, or all
three. A property kafka-python has no equivalent of — or one its admin client lacks, when the
property concerns the connection (every command needs an admin client) — is refused by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nbstream.utils.checked import shown

from ...errors import ConfigError

CONSUMER, PRODUCER, ADMIN = "consumer", "producer", "admin"
EVERY_CLIENT = (CONSUMER, PRODUCER, ADMIN)


def _whole(value: str) -> int:
    return int(value.strip())


def _buffer_bytes(least_is_default: int) -> Callable[[str], int | None]:
    """A socket buffer size; the OS default (Java: -1, librdkafka: 0) is kafka-python's None."""
    def convert(value: str) -> int | None:
        size = _whole(value)
        return None if size == least_is_default else size
    return convert


def _flag(value: str) -> bool:
    if value.strip().lower() not in ("true", "false"):
        raise ValueError(value)
    return value.strip().lower() == "true"


def _one_of(*choices: str) -> Callable[[str], str]:
    def convert(value: str) -> str:
        if value.strip() not in choices:
            raise ValueError(value)
        return value.strip()
    return convert


def _checks_hostname(value: str) -> bool:
    """ssl.endpoint.identification.algorithm: https (check the broker's name), or none (Java: empty)."""
    return _one_of("https", "none", "")(value.lower()) == "https"


@dataclass(frozen=True)
class Equivalent:
    option: str  # kafka-python's keyword argument
    convert: Callable[[str], object]  # raises ValueError on a value kafka-python cannot take
    clients: tuple[str, ...] = EVERY_CLIENT


EQUIVALENTS: dict[str, Equivalent] = {
    "client.id": Equivalent("client_id", str),
    "client.dns.lookup": Equivalent("client_dns_lookup",
                                    _one_of("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")),
    "request.timeout.ms": Equivalent("request_timeout_ms", _whole),
    "metadata.max.age.ms": Equivalent("metadata_max_age_ms", _whole),
    "reconnect.backoff.ms": Equivalent("reconnect_backoff_ms", _whole),
    "reconnect.backoff.max.ms": Equivalent("reconnect_backoff_max_ms", _whole),
    "retry.backoff.ms": Equivalent("retry_backoff_ms", _whole),
    "connections.max.idle.ms": Equivalent("connections_max_idle_ms", _whole),
    "max.in.flight.requests.per.connection": Equivalent("max_in_flight_requests_per_connection", _whole),
    "max.in.flight": Equivalent("max_in_flight_requests_per_connection", _whole),  # librdkafka's alias
    "receive.buffer.bytes": Equivalent("receive_buffer_bytes", _buffer_bytes(-1)),
    "send.buffer.bytes": Equivalent("send_buffer_bytes", _buffer_bytes(-1)),
    "socket.receive.buffer.bytes": Equivalent("receive_buffer_bytes", _buffer_bytes(0)),  # librdkafka's names
    "socket.send.buffer.bytes": Equivalent("send_buffer_bytes", _buffer_bytes(0)),
    "ssl.key.password": Equivalent("ssl_password", str),
    "ssl.endpoint.identification.algorithm": Equivalent("ssl_check_hostname", _checks_hostname),
    "ssl.crl.location": Equivalent("ssl_crlfile", str),
    "fetch.min.bytes": Equivalent("fetch_min_bytes", _whole, (CONSUMER,)),
    "fetch.wait.max.ms": Equivalent("fetch_max_wait_ms", _whole, (CONSUMER,)),
    "fetch.max.wait.ms": Equivalent("fetch_max_wait_ms", _whole, (CONSUMER,)),  # Java's name
    "max.poll.interval.ms": Equivalent("max_poll_interval_ms", _whole, (CONSUMER,)),
    "client.rack": Equivalent("client_rack", str, (CONSUMER,)),
    "check.crcs": Equivalent("check_crcs", _flag, (CONSUMER,)),
    "retries": Equivalent("retries", _whole, (PRODUCER,)),
    "message.send.max.retries": Equivalent("retries", _whole, (PRODUCER,)),  # librdkafka's name
}
# Connection properties kafka-python's consumer and producer take, but not its admin client.
NOT_FOR_ITS_ADMIN = {"ssl.cipher.suites"}


def options_by_client(properties: dict[str, str]) -> dict[str, dict[str, object]]:
    """kafka-python's keyword arguments for each client (CONSUMER, PRODUCER, ADMIN) from the
    properties; ConfigError naming the first property it has no equivalent of, or a value it cannot take."""
    options: dict[str, dict[str, object]] = {client: {} for client in EVERY_CLIENT}
    for name, value in properties.items():
        equivalent = EQUIVALENTS.get(name)
        if equivalent is None:
            lacking = "kafka-python's admin client" if name in NOT_FOR_ITS_ADMIN else "kafka-python"
            raise ConfigError(f"--kafka-config: {lacking} has no equivalent of the property {name}; "
                              f"--kafka-client confluent takes every librdkafka property.")
        try:
            converted = equivalent.convert(value)
        except ValueError:
            raise ConfigError(f"--kafka-config: {name}={shown(value)} is not a value kafka-python takes.") from None
        for client in equivalent.clients:
            options[client][equivalent.option] = converted
    return options
