"""Log lines of the service: ISO 8601 UTC times, structured fields, JSON when asked, client noise off."""

from __future__ import annotations

import json
import logging
import re

import pytest

from worker.service.telemetry.logs import configure_logging


@pytest.fixture(autouse=True)
def restore_logging():
    yield
    logging.getLogger().handlers[:] = []
    logging.captureWarnings(False)


def test_json_logs_are_one_object_per_line_with_fields_as_keys(capsys):
    configure_logging(json_lines=True)
    logging.getLogger("worker.test").info("partitions assigned", extra={"partitions": [0, 1], "starts": {"0": 4}})
    entry = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert entry["message"] == "partitions assigned" and entry["level"] == "INFO"
    assert entry["partitions"] == [0, 1] and entry["starts"] == {"0": 4}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry["time"])
    logging.getLogger("worker.test").info("checkpoint %s", "snapshot-1")
    assert json.loads(capsys.readouterr().err.strip())["message"] == "checkpoint snapshot-1"


def test_a_crash_is_one_json_line_with_its_traceback(capsys):
    configure_logging(json_lines=True)
    try:
        raise RuntimeError("a bug")
    except RuntimeError:
        logging.getLogger("worker.test").critical("stopped by an unexpected error", exc_info=True)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    entry = json.loads(lines[0])
    assert "RuntimeError: a bug" in entry["exception"] and entry["level"] == "CRITICAL"


def test_text_logs_put_fields_after_the_message(capsys):
    configure_logging(json_lines=False)
    logging.getLogger("worker.test").warning("the broker does not answer", extra={"cause": "timed out"})
    line = capsys.readouterr().err.strip()
    assert re.fullmatch(r"\S+Z WARNING worker\.test: the broker does not answer cause=\"timed out\"", line)


def test_the_kafka_clients_own_lines_are_off_unless_debugging(capsys):
    configure_logging(json_lines=False, level="info")
    logging.getLogger("kafka.net.connection").error("Connection refused")
    assert capsys.readouterr().err == ""
    configure_logging(json_lines=False, level="debug")
    logging.getLogger("kafka.net.connection").error("Connection refused")
    assert "Connection refused" in capsys.readouterr().err


SECRET = "pa'ss\"wörd\\-for-the-log-tests"  # quotes, a backslash and non-ASCII: escaped in reprs and JSON


@pytest.mark.parametrize("json_lines", [True, False])
def test_a_secret_is_masked_wherever_a_line_would_show_it(capsys, json_lines):
    from worker.io.kafka.settings import Secret

    Secret(SECRET)
    configure_logging(json_lines=json_lines, level="debug")
    client = logging.getLogger("kafka.admin.client")
    client.debug("Starting KafkaAdminClient with configuration: %s", {"sasl_plain_password": SECRET})
    client.info(f"raw {SECRET} in the message", extra={"cause": f"refused {SECRET}", "nested": {"key": [SECRET]}})
    try:
        raise RuntimeError(f"failed with {SECRET!r}")
    except RuntimeError:
        logging.getLogger("worker.test").critical("stopped", exc_info=True)
    written = capsys.readouterr().err
    assert written.count("***") >= 5, written
    for shown in (SECRET, repr(SECRET)[1:-1], json.dumps(SECRET)[1:-1], "wörd", "w\\u00f6rd"):
        assert shown not in written


def test_a_property_whose_name_says_it_is_a_secret_is_masked_too(capsys):
    from worker.io.kafka.settings import KafkaSettings

    KafkaSettings("127.0.0.1:9", client="confluent", properties={
        "ssl.key.password": "key-pass-for-the-log-tests", "sasl.oauthbearer.client.secret": "oauth-for-the-log-tests",
        "ssl.key.location": "/not-a-secret/for-the-log-tests.pem", "client.id": "not-a-secret-for-the-log-tests"})
    configure_logging(json_lines=False, level="debug")
    logging.getLogger("kafka.librdkafka").debug("key-pass-for-the-log-tests oauth-for-the-log-tests "
                                                "/not-a-secret/for-the-log-tests.pem not-a-secret-for-the-log-tests")
    assert capsys.readouterr().err.strip().endswith(
        "kafka.librdkafka: *** *** /not-a-secret/for-the-log-tests.pem not-a-secret-for-the-log-tests")


def test_a_record_a_library_could_not_format_is_one_json_line_not_a_traceback(capsys):
    import warnings

    configure_logging(json_lines=True, level="debug")
    logging.getLogger("kafka.conn").info("%s connected to %s", "only one argument")
    warnings.warn("a library's warning", UserWarning, stacklevel=1)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2, lines
    unformatted, warned = map(json.loads, lines)
    assert unformatted["message"] == "a log record could not be formatted" and unformatted["logger"] == "kafka.conn"
    assert unformatted["template"] == "%s connected to %s" and "not enough arguments" in unformatted["error"]
    assert warned["logger"] == "py.warnings" and "a library's warning" in warned["message"]
