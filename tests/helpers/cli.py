"""Running the ``worker`` command: in-process through Typer's CliRunner, or as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys

from typer.testing import CliRunner

from worker.cli import app

from .paths import REPO

runner = CliRunner()


def invoke(*args, env=None):
    """``worker ARGS...`` in-process; returns Typer's Result (exit_code, output)."""
    return runner.invoke(app, [str(a) for a in args], env=env)


def worker_env() -> dict[str, str]:
    """The environment for a ``python -m worker`` subprocess."""
    return {**os.environ, "PYTHONPATH": str(REPO)}


def run_worker(*args, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    """``python -m worker ARGS...`` as a subprocess, output captured as text."""
    return subprocess.run([sys.executable, "-m", "worker", *[str(a) for a in args]], capture_output=True,
                          text=True, env=worker_env(), timeout=timeout, **kwargs)
