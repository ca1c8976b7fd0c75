"""Spark's own console output under `--engine spark`: none by default, as the command reports
what it did and its errors itself, each once (a failed task would otherwise print its Java stack
as it happens, before the command's one line).

The JVM that a command starts gets a log4j2 configuration that logs nothing;
``--spark-conf spark.log.level=WARN`` (or any other level) brings Spark's log back, as Spark
configures it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

QUIET_START = """\
rootLogger.level = off
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""


def quiet_unless_asked(settings: dict[str, str]) -> None:
    """Spark logs nothing unless ``settings`` name a ``spark.log.level``: the JVM about to start
    (its options come from SPARK_SUBMIT_OPTS) is configured to log nothing."""
    if "spark.log.level" in settings:
        return
    option = f"-Dlog4j2.configurationFile={_quiet_configuration()}"
    given = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if "log4j2.configurationFile" not in given:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{given} {option}".strip()


def _quiet_configuration() -> Path:
    """QUIET_START as a file (written once: its content never changes)."""
    path = Path(tempfile.gettempdir()) / "nbstream-spark-quiet-log4j2.properties"
    if not path.exists() or path.read_text() != QUIET_START:
        handle, partial = tempfile.mkstemp(dir=path.parent, prefix=".nbstream-log4j2.")
        with os.fdopen(handle, "w") as output:
            output.write(QUIET_START)
        os.replace(partial, path)
    return path
