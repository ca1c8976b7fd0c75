"""The worker runs BLAS on one thread unless the user set its thread variables."""

import os
import subprocess
import sys

import pytest

from tests.helpers.paths import REPO
from worker.blas_threads import THREAD_VARIABLES, one_blas_thread_unless_set

# worker.main with a command that reports numpy's BLAS threads instead of running
PROGRAM = """
import sys, types
command = types.ModuleType("worker.cli")

def report():
    import numpy, threadpoolctl
    print(sorted({lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"}))

command.main = report
sys.modules["worker.cli"] = command
import worker
worker.main()
"""


def test_one_thread_is_set_where_the_user_set_none():
    environ = {"PATH": "/bin"}
    assert one_blas_thread_unless_set(environ)
    assert environ == {"PATH": "/bin", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@pytest.mark.parametrize("variable", THREAD_VARIABLES)
def test_a_variable_the_user_set_leaves_every_one_as_it_is(variable):
    environ = {variable: "4"}
    assert not one_blas_thread_unless_set(environ)
    assert environ == {variable: "4"}


@pytest.mark.parametrize("given, threads", [({}, [1]), ({"OPENBLAS_NUM_THREADS": "2"}, [2]),
                                            ({"OMP_NUM_THREADS": "2"}, [2])])
def test_the_worker_s_numpy_starts_with_those_threads(given, threads):
    environ = {name: value for name, value in os.environ.items() if name not in THREAD_VARIABLES}
    result = subprocess.run([sys.executable, "-c", PROGRAM], env={**environ, **given}, capture_output=True,
                            text=True, cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(threads)
