"""When the executors' Python cannot run nbstream's tasks: one line naming the setting to change.

Spark reports such a failure as a job error whose text holds the executors' own traceback
(hundreds of lines of Java and Python). The few causes a user fixes by configuring the
cluster are recognised in that text and raised as ``ExecutorEnvironmentError``; any other
error goes on as it came.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

SETTINGS = ("set spark.pyspark.python (PYSPARK_PYTHON) to a Python that every executor host has, "
            "or ship one with spark.archives (see docs/spark.md)")

_MISSING_PROGRAM = re.compile(r'Cannot run program "([^"]*)"(?:[^:\n]*): ([^\n]*)')
_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")
_VERSION = r"(\d[\w.]*\w|\d)"  # 3.11, 15.0.0: what follows (a comma, a full stop) left out
_OTHER_VERSION = re.compile(rf"Python in worker has different version: {_VERSION} than that in driver: {_VERSION}")
_MISSING_PACKAGE = re.compile(rf"(\w+) >= {_VERSION} must be installed; however, (it was not found|your version is "
                              rf"{_VERSION})")


class ExecutorEnvironmentError(RuntimeError):
    """The executors' Python is missing, cannot run, or lacks what nbstream's tasks import."""


def explain(text: str) -> str | None:
    """The one line for a failure whose text shows an executor Python that cannot serve, else None."""
    if found := _MISSING_PROGRAM.search(text):
        return f"the executors cannot run Python {found[1]!r} ({found[2].strip()}): {SETTINGS}."
    if (found := _MISSING_MODULE.search(text)) and found[1].split(".")[0] != "nbstream":
        return (f"the executors' Python has no module {found[1]!r} (nbstream's tasks need numpy and pyarrow, "
                f"and scipy for text or sparse vectors; nbstream itself is shipped): {SETTINGS}.")
    if found := _OTHER_VERSION.search(text):
        return f"the executors' Python is {found[1]}, the driver's {found[2]}; they must be the same: {SETTINGS}."
    if found := _MISSING_PACKAGE.search(text):
        return f"the executors need {found[1]} >= {found[2]}; {found[3]}: {SETTINGS}."
    return None


@contextmanager
def explained() -> Iterator[None]:
    """Run Spark jobs, raising ExecutorEnvironmentError (one line) for a failure that ``explain``
    recognises; any other error is raised as it came."""
    try:
        yield
    except Exception as error:  # noqa: BLE001 - Py4J, PySpark and Spark Connect errors alike; others re-raised
        line = explain(str(error))
        if line is None:
            raise
        raise ExecutorEnvironmentError(line) from None
