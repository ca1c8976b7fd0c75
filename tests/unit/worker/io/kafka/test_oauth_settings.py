"""SASL/OAUTHBEARER settings: the --sasl-oauth-* options, OIDC client credentials in a --kafka-config file
(librdkafka's names, or the Java clients' sasl.jaas.config), what each client is given, and the one-line
refusals of settings that cannot work."""

from __future__ import annotations

import pytest

from worker.errors import ConfigError
from worker.io.kafka import kafka_python
from worker.io.kafka.confluent import connection as confluent_connection
from worker.io.kafka.oauth import TokenSource
from worker.io.kafka.options import ConnectionGiven
from worker.io.kafka.settings import settings_from

URL = "https://idp.example.com/oauth2/token"
SECRET = "the-client-secret"


def settings(tmp_path, client="confluent", text: str | None = None, security_protocol="SASL_SSL",
             sasl_mechanism="OAUTHBEARER", sasl_username=None, ssl_cafile=None, **oauth):
    config = None
    if text is not None:
        config = tmp_path / "client.properties"
        config.write_text(text)
    return settings_from(ConnectionGiven("b:1", client, security_protocol, sasl_mechanism, sasl_username,
                                         ssl_cafile=ssl_cafile, kafka_config=config,
                                         **{f"sasl_oauth_{name}": value for name, value in oauth.items()}))


def test_the_options_give_librdkafka_its_oidc_properties(tmp_path):
    read = settings(tmp_path, token_url=URL, client_id="svc", scope="kafka", client_secret=SECRET)
    conf = confluent_connection(read)
    assert {key: conf[key] for key in conf if "oauthbearer" in key or key.startswith("sasl")} == {
        "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": URL, "sasl.oauthbearer.client.id": "svc",
        "sasl.oauthbearer.client.secret": SECRET, "sasl.oauthbearer.scope": "kafka"}
    assert "https.ca.location" not in conf and SECRET not in repr(read)


def test_an_https_token_endpoint_is_trusted_by_the_ssl_cafile(tmp_path):
    import ssl

    cafile = ssl.get_default_verify_paths().cafile
    if cafile is None:
        pytest.skip("no system CA file to stand for one")
    read = settings(tmp_path, ssl_cafile=cafile, token_url=URL, client_id="svc", client_secret=SECRET)
    assert confluent_connection(read)["https.ca.location"] == cafile
    plain = settings(tmp_path, ssl_cafile=cafile, token_url="http://idp:8080/token", client_id="svc",
                     client_secret=SECRET)
    assert "https.ca.location" not in confluent_connection(plain)


def test_the_secret_file_wins_over_the_environment(tmp_path):
    (tmp_path / "secret").write_text("from-the-file\n")
    read = settings(tmp_path, token_url=URL, client_id="svc", client_secret=SECRET,
                    client_secret_file=tmp_path / "secret")
    assert read.oauth.client_secret.reveal() == "from-the-file"


LIBRDKAFKA_FILE = f"""\
bootstrap.servers=pkc-1.confluent.cloud:9092
security.protocol=SASL_SSL
sasl.mechanisms=OAUTHBEARER
sasl.oauthbearer.method=OIDC
sasl.oauthbearer.token.endpoint.url={URL}
sasl.oauthbearer.client.id=svc
sasl.oauthbearer.client.secret={SECRET}
sasl.oauthbearer.scope=kafka
client.id=app
"""
JAVA_FILE = f"""\
security.protocol=SASL_SSL
sasl.mechanism=OAUTHBEARER
sasl.oauthbearer.token.endpoint.url={URL}
sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler
sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \\
    clientId="svc" clientSecret="{SECRET}" scope="kafka";
client.id=app
"""


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
@pytest.mark.parametrize("text", [LIBRDKAFKA_FILE, JAVA_FILE], ids=["librdkafka", "java"])
def test_oidc_client_credentials_in_a_kafka_config_file_work_on_both_clients(tmp_path, client, text):
    read = settings(tmp_path, client, text, security_protocol=None, sasl_mechanism=None)
    assert read.sasl_mechanism == "OAUTHBEARER" and read.security_protocol == "SASL_SSL"
    assert (read.oauth.token_url, read.oauth.client_id, read.oauth.scope) == (URL, "svc", "kafka")
    assert read.oauth.client_secret.reveal() == SECRET
    assert read.properties == {"client.id": "app"}  # the rest is nbstream's to pass on


def test_an_option_wins_over_the_files_oidc_property(tmp_path):
    read = settings(tmp_path, "kafka-python", LIBRDKAFKA_FILE, client_id="other", scope="admin")
    assert (read.oauth.client_id, read.oauth.scope, read.oauth.client_secret.reveal()) == ("other", "admin", SECRET)


def test_kafka_python_gets_a_token_provider_and_no_password(tmp_path):
    read = settings(tmp_path, "kafka-python", token_url=URL, client_id="svc", client_secret=SECRET)
    options = kafka_python.connection(read, TokenSource(read.oauth))
    assert options["sasl_mechanism"] == "OAUTHBEARER"
    assert options["sasl_oauth_token_provider"].source.client is read.oauth
    assert "sasl_plain_username" not in options and "sasl_plain_password" not in options


@pytest.mark.parametrize("options, expected", [
    ({}, r"^--sasl-mechanism OAUTHBEARER needs --sasl-oauth-token-url, --sasl-oauth-client-id and a client "
         r"secret \(NBSTREAM_SASL_OAUTH_CLIENT_SECRET or --sasl-oauth-client-secret-file\)\.$"),
    ({"token_url": URL, "client_id": "svc"},
     r"^OAUTHBEARER's client credentials need a client secret \(NBSTREAM_SASL_OAUTH_CLIENT_SECRET or "
     r"--sasl-oauth-client-secret-file\)\.$"),
    ({"client_id": "svc", "client_secret": SECRET},
     r"^OAUTHBEARER's client credentials need --sasl-oauth-token-url\.$"),
    ({"token_url": "idp.example.com/token", "client_id": "svc", "client_secret": SECRET},
     r"^--sasl-oauth-token-url must be an http:// or https:// URL; got 'idp\.example\.com/token'\.$"),
    ({"token_url": URL, "client_id": "svc", "client_secret": SECRET, "sasl_username": "alice"},
     r"^--sasl-username is for PLAIN and SCRAM; OAUTHBEARER signs in as --sasl-oauth-client-id\.$"),
    ({"token_url": URL, "client_id": "svc", "client_secret": SECRET, "sasl_mechanism": "PLAIN",
      "sasl_username": "alice"},
     r"^--sasl-oauth-token-url, --sasl-oauth-client-id, --sasl-oauth-scope and --sasl-oauth-client-secret-file "
     r"are for --sasl-mechanism OAUTHBEARER; got PLAIN\.$"),
    ({"scope": "kafka", "sasl_mechanism": None, "security_protocol": "PLAINTEXT"},
     r"need --sasl-oauth-token-url and --sasl-oauth-client-id and a client secret"),
    ({"token_url": URL, "client_id": "svc", "client_secret": SECRET, "security_protocol": "SSL"},
     r"^--sasl-mechanism and --sasl-username need --security-protocol SASL_PLAINTEXT or SASL_SSL; got SSL\.$"),
])
def test_oauthbearer_settings_that_cannot_work_are_one_line(tmp_path, options, expected):
    with pytest.raises(ConfigError, match=expected) as refused:
        settings(tmp_path, **options)
    assert SECRET not in str(refused.value)


def test_a_secret_in_the_environment_alone_asks_for_nothing(tmp_path):
    read = settings(tmp_path, "kafka-python", security_protocol="PLAINTEXT", sasl_mechanism=None,
                    client_secret=SECRET)
    assert read.oauth is None and read.sasl_mechanism is None
