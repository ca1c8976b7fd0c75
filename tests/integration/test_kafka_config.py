"""--kafka-config values no client can work with are one line and exit status 2 before connecting (each
was a traceback or a retry loop against a broker that answers); a stop takes seconds whatever the file
says; librdkafka's refusals are one log line."""

from __future__ import annotations

import json
import time

import pytest

from tests.helpers.cli import run_worker
from tests.helpers.kafka import new_topic
from tests.helpers.service import Service

MAX_INT = "2,147,483,647"


def serve(bootstrap: str, client: str, properties, line: str, *options: str):
    """`worker serve` with a --kafka-config file of one property line; its result once it ends."""
    properties.write_text(f"# one value alone\n{line}\n")
    return run_worker("serve", "--bootstrap", bootstrap, "--input", "t", "--output", "t.out", "--group", "g",
                      "--text-features", "--kafka-client", client, "--kafka-config", properties, *options, timeout=120)


def written_lines(done) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.strip()]


def error_lines(done) -> list[str]:
    """Every line but the INFO and WARNING ones (a text line split in two is two lines)."""
    return [line for line in written_lines(done) if not any(f" {level} " in line for level in ("INFO", "WARNING"))]


@pytest.mark.parametrize("line, expected", [
    ("request.timeout.ms=99999999999999999999999",
     f"request.timeout.ms='99999999999999999999999' is out of range (1 to {MAX_INT})."),
    ("request.timeout.ms=-5", f"request.timeout.ms='-5' is out of range (1 to {MAX_INT})."),
    ("request.timeout.ms=30s", "request.timeout.ms='30s' is not a whole number."),
    ("receive.buffer.bytes=-2", f"receive.buffer.bytes='-2' is out of range (-1 to {MAX_INT})."),
    ("client.id=" + "x" * 500_000, "client.id has 500,000 characters; at most 1,000."),
    ("client.id=caf\u00e9", "client.id='caf\u00e9' must be printable ASCII."),
    ("client.id=tab\there", "client.id='tab\\there' must be printable ASCII."),
    ("fetch.wait.max.ms=300000", "fetch.wait.max.ms='300000' is out of range (0 to 5,000)."),
], ids=["beyond Java's int", "negative", "not a number", "buffer below -1", "long client.id",
        "non-ASCII client.id", "control character in client.id", "fetch wait that delays a stop"])
def test_a_property_value_no_client_works_with_is_one_line_naming_it(kafka_bootstrap, kafka_client, tmp_path, line,
                                                                     expected):
    done = serve(kafka_bootstrap, kafka_client, tmp_path / "client.properties", line)
    lines = written_lines(done)  # refused before connecting: nothing else was logged
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-3000:]
    assert f"--kafka-config: {expected}" in lines[0] and " ERROR " in lines[0]


def test_kafka_python_names_settings_that_contradict_each_other_as_such(kafka_bootstrap, tmp_path):
    """kafka-python wants request.timeout.ms above its fetch wait (500 ms): its refusal is a setting
    to fix, not a refusal of access."""
    done = serve(kafka_bootstrap, "kafka-python", tmp_path / "client.properties", "request.timeout.ms=100")
    lines = error_lines(done)
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-3000:]
    assert "Kafka client configuration: KafkaConfigurationError:" in lines[0] and "request_timeout_ms (100)" in lines[0]


def test_a_stop_takes_seconds_at_the_longest_fetch_wait_allowed(kafka_bootstrap, tmp_path):
    """librdkafka waits out a fetch when it closes a consumer (54 s at fetch.wait.max.ms=300000)."""
    topic = new_topic(kafka_bootstrap, "fetch-wait")
    (tmp_path / "client.properties").write_text("fetch.wait.max.ms=5000\n")
    service = Service(kafka_bootstrap, topic, tmp_path, "--text-features", "--kafka-config",
                      tmp_path / "client.properties", client="confluent").start()
    try:
        time.sleep(3)  # a stop asked for while it reads its state or joins the group
        started = time.monotonic()
        assert service.terminate(timeout=60) == 0, service.log_tail()
        assert time.monotonic() - started < 10, service.log_tail()
    finally:
        if service.running():
            service.kill()


@pytest.mark.parametrize("json_logs", [True, False], ids=["json", "text"])
def test_a_refusal_of_librdkafka_is_one_log_line(kafka_bootstrap, tmp_path, json_logs):
    """librdkafka ends its messages with a newline: it split a text line in two, and ended a JSON one's message."""
    done = serve(kafka_bootstrap, "confluent", tmp_path / "client.properties", "socket.timeout.ms=5",
                 *(["--json-logs"] if json_logs else []))
    expected = 'Kafka client configuration: Configuration property "socket.timeout.ms" value 5 is outside allowed range'
    assert done.returncode == 2, done.stderr[-3000:]
    if json_logs:
        errors = [entry for entry in map(json.loads, written_lines(done)) if entry["level"] not in ("INFO", "WARNING")]
        assert len(errors) == 1, done.stderr[-3000:]
        assert errors[0]["message"].startswith(expected) and errors[0]["message"].endswith("300000"), errors
    else:
        lines = error_lines(done)
        assert len(lines) == 1, done.stderr[-3000:]
        assert expected in lines[0] and lines[0].endswith("300000 exit_status=2"), lines[0]
