"""--kafka-config read as librdkafka and the Java clients write it: aliases, a SASL mechanism for
librdkafka alone, properties the service sets itself, and kafka-python's equivalents by client."""

from __future__ import annotations

import logging

import pytest

from worker.errors import ConfigError
from worker.io.kafka.confluent import connection as confluent_connection
from worker.io.kafka.kafka_python_properties import ADMIN, CONSUMER, EQUIVALENTS, PRODUCER, options_by_client
from worker.io.kafka.options import ConnectionGiven
from worker.io.kafka.settings import settings_from


def settings(tmp_path, text: str, client: str = "confluent", **options):
    path = tmp_path / "client.properties"
    path.write_text(text)
    return settings_from(ConnectionGiven(client=client, kafka_config=path, **options))


CONFLUENT_CLOUD = """\
# Required connection configs for Kafka producer, consumer, and admin
bootstrap.servers=pkc-00000.eu-west-1.aws.confluent.cloud:9092
security.protocol=SASL_SSL
sasl.mechanisms=PLAIN
sasl.username=KEY
sasl.password=SECRET
# Best practice for higher availability in librdkafka clients prior to 1.7
session.timeout.ms=45000
client.id=ccloud-python-client-1
"""


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_a_confluent_cloud_file_is_read_with_its_plural_mechanism(tmp_path, client, caplog):
    with caplog.at_level(logging.WARNING):
        read = settings(tmp_path, CONFLUENT_CLOUD, client)
    assert read.bootstrap == "pkc-00000.eu-west-1.aws.confluent.cloud:9092"
    assert read.sasl() == ("PLAIN", "KEY", "SECRET") and read.security_protocol == "SASL_SSL"
    assert read.properties == {"client.id": "ccloud-python-client-1"}
    (warning,) = caplog.records
    assert warning.property == "session.timeout.ms" and warning.option == "--session-timeout"


def test_metadata_broker_list_is_the_bootstrap_and_the_option_wins_over_either(tmp_path):
    assert settings(tmp_path, "metadata.broker.list=b1:9092,b2:9092\n").bootstrap == "b1:9092,b2:9092"
    read = settings(tmp_path, "metadata.broker.list=b1:9092\n", bootstrap="option:9092")
    assert read.bootstrap == "option:9092" and read.properties == {}


@pytest.mark.parametrize("text", ["bootstrap.servers=a:1\nmetadata.broker.list=b:2\n",
                                  "bootstrap.servers=a:1\nsasl.mechanism=PLAIN\nsasl.mechanisms=SCRAM-SHA-256\n"])
def test_two_names_of_one_setting_that_disagree_are_refused(tmp_path, text):
    with pytest.raises(ConfigError, match="name one setting twice, differently; keep one"):
        settings(tmp_path, text)


def test_a_mechanism_nbstream_does_not_handle_goes_to_librdkafka_as_written(tmp_path):
    read = settings(tmp_path, "bootstrap.servers=b:1\nsecurity.protocol=SASL_SSL\nsasl.mechanisms=OAUTHBEARER\n"
                              "sasl.oauthbearer.method=default\nsasl.oauthbearer.config=principal=me\n")
    conf = confluent_connection(read)
    assert conf["sasl.mechanisms"] == "OAUTHBEARER" and conf["sasl.oauthbearer.method"] == "default"
    assert conf["sasl.oauthbearer.config"] == "principal=me" and read.oauth is None
    assert conf["security.protocol"] == "sasl_ssl" and "sasl.mechanism" not in conf


def test_kafka_python_refuses_a_mechanism_it_has_no_equivalent_of_by_name(tmp_path):
    with pytest.raises(ConfigError, match=r"^--kafka-config: kafka-python has no equivalent of "
                                          r"sasl.mechanisms=GSSAPI \(it takes PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, and "
                                          r"OAUTHBEARER with OIDC client credentials\)"):
        settings(tmp_path, "bootstrap.servers=b:1\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanisms=GSSAPI\n",
                 "kafka-python")


def test_every_other_property_reaches_librdkafka_as_written(tmp_path):
    text = "bootstrap.servers=b:1\nsocket.keepalive.enable=true\nbroker.address.family=v4\nclient.id=x\n"
    conf = confluent_connection(settings(tmp_path, text))
    assert {key: conf[key] for key in ("socket.keepalive.enable", "broker.address.family", "client.id")} == \
        {"socket.keepalive.enable": "true", "broker.address.family": "v4", "client.id": "x"}


def test_an_option_wins_over_the_files_value_of_the_same_setting(tmp_path):
    """The file's value had stayed among the properties, and overrode the option for librdkafka."""
    read = settings(tmp_path, "bootstrap.servers=b:1\nsecurity.protocol=SSL\n", security_protocol="PLAINTEXT")
    assert confluent_connection(read)["security.protocol"] == "plaintext" and read.properties == {}


def test_kafka_python_gets_each_property_on_the_clients_that_have_its_equivalent():
    options = options_by_client({"client.id": "me", "fetch.max.wait.ms": "200", "retries": "3",
                                 "socket.receive.buffer.bytes": "0", "send.buffer.bytes": "-1",
                                 "ssl.endpoint.identification.algorithm": "none", "check.crcs": "false"})
    assert options[CONSUMER] == {"client_id": "me", "fetch_max_wait_ms": 200, "receive_buffer_bytes": None,
                                 "send_buffer_bytes": None, "ssl_check_hostname": False, "check_crcs": False}
    assert options[PRODUCER] == {"client_id": "me", "retries": 3, "receive_buffer_bytes": None,
                                 "send_buffer_bytes": None, "ssl_check_hostname": False}
    assert options[ADMIN] == {"client_id": "me", "receive_buffer_bytes": None, "send_buffer_bytes": None,
                              "ssl_check_hostname": False}


@pytest.mark.parametrize("name, lacking", [("socket.keepalive.enable", "kafka-python"),
                                           ("ssl.cipher.suites", "kafka-python's admin client")])
def test_kafka_python_refuses_a_property_it_has_no_equivalent_of_naming_it(name, lacking):
    with pytest.raises(ConfigError, match=rf"^--kafka-config: {lacking} has no equivalent of the property {name}; "
                                          r"--kafka-client confluent takes every librdkafka property\.$"):
        options_by_client({name: "x"})


def test_kafka_python_refuses_a_value_it_cannot_take_naming_it():
    with pytest.raises(ConfigError, match=r"client.dns.lookup='default' is not a value kafka-python takes"):
        options_by_client({"client.dns.lookup": "default"})


def test_every_equivalent_is_an_option_of_each_kafka_python_client_it_is_given_to():
    """A consumer-only option given to the admin client makes kafka-python refuse it (ssl.cipher.suites had)."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

    accepted = {CONSUMER: KafkaConsumer.DEFAULT_CONFIG, PRODUCER: KafkaProducer.DEFAULT_CONFIG,
                ADMIN: KafkaAdminClient.DEFAULT_CONFIG}
    for name, equivalent in EQUIVALENTS.items():
        for client in equivalent.clients:
            assert equivalent.option in accepted[client], (name, client)
