"""Log lines of the service: ISO 8601 UTC times, structured fields, JSON when asked, client noise off."""

from __future__ import annotations

import json
import logging
import re

import pytest

from worker.service.logs import configure_logging


@pytest.fixture(autouse=True)
def restore_logging():
    yield
    logging.getLogger().handlers[:] = []


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
