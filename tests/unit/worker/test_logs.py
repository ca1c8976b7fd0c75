"""Log lines of the service."""

from __future__ import annotations

import json


def test_json_logs_are_one_object_per_line(capsys):
    import logging

    from worker.service.logs import configure_logging

    configure_logging(json_lines=True)
    logging.getLogger("worker.test").info("checkpoint %s", "snapshot-1")
    line = capsys.readouterr().err.strip().splitlines()[-1]
    entry = json.loads(line)
    assert entry["message"] == "checkpoint snapshot-1" and entry["level"] == "INFO"
    logging.getLogger().handlers[:] = []
