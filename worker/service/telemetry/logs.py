"""Log lines for the service: ISO 8601 UTC times, structured fields, plain text or one JSON object per line.

Structured fields are passed as ``extra={...}``: under --json-logs each becomes a JSON key;
in text they follow the message as ``key=value``. The Kafka client libraries' own loggers
are quiet unless --log-level debug: during an outage they write a line for every
reconnection attempt, while the service itself writes one line when Kafka stops answering
and one when it is back.

Whoever logs (the service, a client library, Python's warnings), no line shows a secret (see
worker/redaction.py), and under JSON every line is one JSON object: a record a library could
not have formatted is reported as a line of its own instead of a traceback among them.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from typing import Any

from pythonjsonlogger.json import JsonFormatter

from ...redaction import redact

LEVELS = ("debug", "info", "warning", "error")
CLIENT_LOGGERS = ("kafka.",)  # kafka-python's loggers, and librdkafka's (kafka.librdkafka)
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def utc_iso(created: float) -> str:
    """2026-11-22T04:00:35.998Z"""
    return dt.datetime.fromtimestamp(created, dt.UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def fields(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields a log call passed in ``extra``."""
    return {key: value for key, value in vars(record).items() if key not in _STANDARD}


class TextFormatter(logging.Formatter):
    """``TIME LEVEL logger: message key=value ...``, the traceback (if any) on the lines after."""

    def format(self, record: logging.LogRecord) -> str:
        extra = " ".join(f"{key}={json.dumps(value, default=str)}" for key, value in fields(record).items())
        line = f"{utc_iso(record.created)} {record.levelname} {record.name}: {record.getMessage()}"
        line += f" {extra}" if extra else ""
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonLineFormatter(JsonFormatter):
    """{"time", "level", "logger", "message", ...fields, "exception"} on one line."""

    def __init__(self) -> None:
        super().__init__("{levelname}{name}{message}", style="{",
                         rename_fields={"levelname": "level", "name": "logger", "exc_info": "exception"})

    def add_fields(self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]) -> None:
        log_data["time"] = utc_iso(record.created)
        super().add_fields(log_data, record, message_dict)


class QuietClients(logging.Filter):
    """Drops the Kafka client libraries' lines (the service summarises what matters)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.name.startswith(CLIENT_LOGGERS)


class LineHandler(logging.StreamHandler):  # type: ignore[type-arg]  # of stderr, a TextIO
    """Writes records to stderr as the formatter makes them, with every secret masked."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))

    def handleError(self, record: logging.LogRecord) -> None:
        """A record that cannot be formatted (a log call whose arguments do not fit its message)
        becomes a warning line, instead of the traceback logging would print."""
        unformatted = logging.makeLogRecord({
            "name": record.name, "levelno": logging.WARNING, "levelname": "WARNING", "created": record.created,
            "msg": "a log record could not be formatted", "template": str(record.msg),
            "error": repr(sys.exc_info()[1])})
        try:
            self.stream.write(self.format(unformatted) + self.terminator)
            self.flush()
        except Exception:  # noqa: BLE001 - stderr itself is failing: nowhere left to say so
            pass


def configure_logging(json_lines: bool, level: str = "info") -> None:
    """Log to stderr as text or JSON lines; the client libraries' lines only at level debug."""
    handler = LineHandler(sys.stderr)
    handler.setFormatter(JsonLineFormatter() if json_lines else TextFormatter())
    if level != "debug":
        handler.addFilter(QuietClients())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.captureWarnings(True)  # a library's warning is a log line too, not a line of its own
