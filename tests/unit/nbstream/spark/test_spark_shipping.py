"""nbstream's own package as the executors receive it, and the one line for an executor Python that
cannot serve (no Spark needed: these are the parts that run on the driver before and after a job)."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from nbstream import __version__
from nbstream.spark import executors, shipping

CANNOT_RUN = """py4j.protocol.Py4JJavaError: An error occurred while calling o98.collectToPython.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 failed 4 times,
most recent failure: Lost task 0.3 in stage 1.0 (TID 4) (127.0.0.1 executor 0): java.io.IOException:
Cannot run program "/opt/py/bin/python": error=2, No such file or directory
\tat java.base/java.lang.ProcessBuilder.start(ProcessBuilder.java:1143)"""
NO_NUMPY = """org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/tmp/spark/work/nbstream-0.1.0-abc.zip/nbstream/__init__.py", line 12, in <module>
    import numpy as np
ModuleNotFoundError: No module named 'numpy'
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:641)"""
OTHER_VERSION = ("[PYTHON_VERSION_MISMATCH] Python in worker has different version: 3.10 than that in driver: "
                 "3.11, PySpark cannot run with different minor versions.")
OLD_PYARROW = "[UNSUPPORTED_PACKAGE_VERSION] PyArrow >= 15.0.0 must be installed; however, your version is 12.0.1."


def test_the_zip_holds_the_package_importable_and_is_made_once(tmp_path):
    archive = shipping.package_zip()
    assert archive.name.startswith(f"nbstream-{__version__}-") and shipping.package_zip() == archive
    names = zipfile.ZipFile(archive).namelist()
    assert "nbstream/__init__.py" in names and "nbstream/spark/tasks.py" in names
    assert "threadpoolctl.py" in names  # what the library needs beside numpy, shipped for executors that lack it
    assert not [name for name in names if "__pycache__" in name or not name.endswith(".py")]
    program = (f"import sys; sys.path.insert(0, {str(archive)!r}); import nbstream.spark.tasks, threadpoolctl; "
               "print(nbstream.__file__); print(threadpoolctl.__file__)")
    imported = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=tmp_path)
    assert imported.stdout.split() == [f"{archive}/nbstream/__init__.py", f"{archive}/threadpoolctl.py"], \
        imported.stderr


def test_a_missing_executor_python_is_one_line_naming_the_settings():
    line = executors.explain(CANNOT_RUN)
    assert line == ("the executors cannot run Python '/opt/py/bin/python' (error=2, No such file or directory): "
                    f"{executors.SETTINGS}.")
    assert "spark.pyspark.python" in line and "spark.archives" in line and "\n" not in line


def test_executors_without_numpy_other_python_or_old_pyarrow_are_one_line_each():
    assert executors.explain(NO_NUMPY).startswith("the executors' Python has no module 'numpy' (")
    assert executors.explain(OTHER_VERSION).startswith("the executors' Python is 3.10, the driver's 3.11; ")
    assert executors.explain(OLD_PYARROW).startswith("the executors need PyArrow >= 15.0.0; your version is 12.0.1: ")


def test_other_failures_are_not_explained_away():
    assert executors.explain("ModuleNotFoundError: No module named 'nbstream'") is None  # a shipping bug: as it is
    assert executors.explain("java.lang.OutOfMemoryError: Java heap space") is None
    try:
        with executors.explained():
            raise KeyError("an internal bug")
    except KeyError as error:
        assert error.args == ("an internal bug",)
