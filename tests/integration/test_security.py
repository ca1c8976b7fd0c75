"""`worker serve`, `produce` and `export` on a secured broker: TLS, SASL_SSL with SCRAM; refusals are one
line; the password is never shown."""

from __future__ import annotations

import json

import pytest

from tests.helpers.cli import run_worker
from tests.helpers.kafka import json_message, new_topic, read_all, send
from tests.helpers.paths import SMS
from tests.helpers.service import Service

PASSWORD = "alice-secret"  # the broker's SCRAM user (scripts/kafka_broker.py)


def sasl_options(broker, mechanism="SCRAM-SHA-512"):
    return ["--bootstrap", broker.address("SASL_SSL"), "--security-protocol", "SASL_SSL", "--sasl-mechanism",
            mechanism, "--sasl-username", "alice", "--ssl-cafile", broker.ca_file]


def tls_options(broker):
    return ["--bootstrap", broker.address("SSL"), "--security-protocol", "SSL", "--ssl-cafile", broker.ca_file]


@pytest.mark.parametrize("listener", ["SASL_SSL", "SSL"])
def test_serve_produce_and_export_on_a_secured_listener(own_broker, kafka_client, listener, tmp_path, monkeypatch):
    monkeypatch.setenv("NBSTREAM_SASL_PASSWORD", PASSWORD)
    options = sasl_options(own_broker) if listener == "SASL_SSL" else tls_options(own_broker)
    topic = new_topic(own_broker.bootstrap, f"secure-{listener.lower()}")
    produced = run_worker("produce", SMS / "test.parquet", "--topic", topic, "--text", "text", "--label", "label",
                          "--id", "id", "--limit", 300, "--kafka-client", kafka_client, *options, timeout=120)
    assert produced.returncode == 0 and "sent 300 messages" in produced.stdout, produced.stderr
    service = Service(own_broker.bootstrap, topic, tmp_path, "--text-features", client=kafka_client,
                      connection=options).start()
    try:
        predictions = read_all(own_broker.bootstrap, service.output, expected=300, timeout=120, committed_only=True)
        assert sorted(json.loads(r.value)["offset"] for r in predictions) == list(range(300)), service.log_tail()
        assert service.terminate() == 0
    finally:
        if service.running():
            service.kill()
    exported = run_worker("export", "--input", topic, "--group", service.group, "--out", tmp_path / "m.nbs",
                          "--kafka-client", kafka_client, *options, timeout=120)
    assert exported.returncode == 0 and "exported 300 examples" in exported.stdout, exported.stderr
    for text in (service.log.read_text(), produced.stdout + produced.stderr, exported.stdout + exported.stderr):
        assert PASSWORD not in text


def test_no_log_line_shows_a_secret_even_at_debug_level(own_broker, kafka_client, tmp_path, monkeypatch):
    """kafka-python logs its whole configuration at debug level, the SASL password and the TLS key's
    password with it; every line of every library goes through one mask."""
    monkeypatch.setenv("NBSTREAM_SASL_PASSWORD", PASSWORD)
    key_password = "tls-key-secret"
    (tmp_path / "client.properties").write_text(f"ssl.key.password={key_password}\n")
    topic = new_topic(own_broker.bootstrap, "secure-debug")
    send(own_broker.bootstrap, topic, [json_message(text=f"message {i}", label="ham", id=i) for i in range(20)])
    service = Service(own_broker.bootstrap, topic, tmp_path, "--text-features", "--log-level", "debug",
                      client=kafka_client,
                      connection=[*sasl_options(own_broker), "--kafka-config", tmp_path / "client.properties"]).start()
    try:
        predictions = read_all(own_broker.bootstrap, service.output, expected=20, timeout=120, committed_only=True)
        assert len(predictions) == 20, service.log_tail()
        assert service.terminate() == 0
    finally:
        if service.running():
            service.kill()
    written = service.log.read_text()  # its stdout and stderr
    assert PASSWORD not in written and key_password not in written
    if kafka_client == "kafka-python":
        assert "'sasl_plain_password': '***'" in written and "'ssl_password': '***'" in written


def test_the_password_file_and_a_client_properties_file_work_too(own_broker, kafka_client, tmp_path):
    topic = new_topic(own_broker.bootstrap, "secure-files")
    (tmp_path / "password").write_text(PASSWORD + "\n")
    result = run_worker("produce", SMS / "test.parquet", "--topic", topic, "--text", "text", "--limit", 10,
                        "--kafka-client", kafka_client, *sasl_options(own_broker, "SCRAM-SHA-256"),
                        "--sasl-password-file", tmp_path / "password", timeout=120)
    assert result.returncode == 0, result.stderr
    properties = tmp_path / "client.properties"
    properties.write_text("\n".join([
        f"bootstrap.servers={own_broker.address('SASL_SSL')}", "security.protocol=SASL_SSL",
        "sasl.mechanism=SCRAM-SHA-512", f"ssl.ca.location={own_broker.ca_file}",
        "# as Confluent Cloud hands them out:",
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\',
        f'    username="alice" password="{PASSWORD}";']))
    result = run_worker("produce", SMS / "test.parquet", "--topic", topic, "--text", "text", "--limit", 10,
                        "--kafka-client", kafka_client, "--kafka-config", properties, timeout=120)
    assert result.returncode == 0, result.stderr
    assert len(read_all(own_broker.bootstrap, topic)) == 20


@pytest.mark.parametrize("case", ["wrong password", "untrusted certificate"])
def test_a_refusal_is_one_clear_line_and_a_non_zero_exit(own_broker, kafka_client, case, tmp_path, monkeypatch):
    wrong = "not-the-password"
    monkeypatch.setenv("NBSTREAM_SASL_PASSWORD", wrong)
    options = sasl_options(own_broker) if case == "wrong password" else \
        ["--bootstrap", own_broker.address("SSL"), "--security-protocol", "SSL"]
    expected = "Authentication failed" if case == "wrong password" else "certificate verify failed"
    for command in (["produce", SMS / "test.parquet", "--topic", "t", "--text", "text"],
                    ["export", "--input", "t", "--group", "g", "--out", tmp_path / "m.nbs"],
                    ["serve", "--input", "t", "--output", "o", "--group", "g"]):
        result = run_worker(*command, "--kafka-client", kafka_client, *options, timeout=180)
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:") or " ERROR " in line]
        assert result.returncode == 2, (command[0], result.stderr[-2000:])
        assert len(errors) == 1 and "Kafka refused access" in errors[0] and expected in errors[0], (command[0], errors)
        assert "Traceback" not in result.stderr
        assert wrong not in result.stderr + result.stdout


def test_security_settings_that_cannot_work_are_refused_before_connecting(monkeypatch, tmp_path):
    monkeypatch.delenv("NBSTREAM_SASL_PASSWORD", raising=False)
    (tmp_path / "not-a-ca.pem").write_text("-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n")
    cases = [
        (["--security-protocol", "SSL", "--ssl-cafile", tmp_path / "not-a-ca.pem"],
         f"--ssl-cafile {tmp_path / 'not-a-ca.pem'}: not a file of PEM certificates"),
        (["--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "alice"],
         "needs --sasl-username and a password"),
        (["--security-protocol", "SASL_SSL", "--sasl-username", "alice"], "needs --sasl-mechanism"),
        (["--sasl-username", "alice"], "need --security-protocol SASL_PLAINTEXT or SASL_SSL"),
        (["--security-protocol", "TLS"], "--security-protocol must be one of"),
        (["--security-protocol", "SSL", "--ssl-cafile", "/nonexistent/ca.pem"],
         "--ssl-cafile /nonexistent/ca.pem: No such file or directory"),
        (["--kafka-client", "kafka-go"], "--kafka-client must be one of"),
    ]
    for options, expected in cases:
        result = run_worker("export", "--input", "t", "--group", "g", "--out", "/tmp/never.nbs", "--bootstrap",
                            "127.0.0.1:9", *options, timeout=60)
        assert result.returncode == 2 and expected in result.stderr, (options, result.stderr)
