"""The Kafka connection options are declared once (``ConnectionGiven``): serve, produce and export
take each with its variable and help, and a value it refuses is refused before any connection."""

from __future__ import annotations

import pytest
import typer.main

from worker.cli import app
from worker.errors import ConfigError
from worker.io.kafka.options import ConnectionGiven
from worker.io.kafka.settings import settings_given
from worker.setting import settings_of


@pytest.mark.parametrize("command", ["serve", "produce", "export"])
def test_every_kafka_command_takes_every_connection_option_as_declared(command):
    params = {param.opts[0]: param for param in typer.main.get_command(app).commands[command].params}
    for _, rule in settings_of(ConnectionGiven):
        param = params[rule.flag]
        assert (param.envvar, param.help, param.rich_help_panel) == (rule.variable, rule.help, rule.panel)
        assert param.opts == [rule.flag, *rule.aliases]


def test_an_unknown_client_is_refused_by_its_declaration():
    with pytest.raises(ConfigError, match="^--kafka-client must be one of auto, kafka-python, confluent; got 'nope'.$"):
        ConnectionGiven("b:1", "nope")


def test_the_secrets_come_from_the_environment_only(monkeypatch):
    monkeypatch.setenv("NBSTREAM_SASL_PASSWORD", "from-the-environment")
    read = settings_given(bootstrap="b:1", security_protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_username="u")
    assert read.sasl() == ("PLAIN", "u", "from-the-environment")
    assert not any(rule.flag.endswith(("-password", "-secret")) for _, rule in settings_of(ConnectionGiven))
