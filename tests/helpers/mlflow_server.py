"""A real MLflow tracking server for the tests: ``mlflow server`` with a SQLite backend and a local
artifact folder, bound to 127.0.0.1 on a free port, ended with the session.

NBSTREAM_MLFLOW_TRACKING_URI names a running server instead. In CI (CI set) a server that cannot
start fails the tests that need one (``tests/conftest.py``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from .service import free_port

STARTUP_SECONDS = 120  # the first start creates the SQLite schema (alembic migrations)


@contextmanager
def mlflow_server(workdir: Path):
    """Yield the tracking URI of the session's server."""
    configured = os.environ.get("NBSTREAM_MLFLOW_TRACKING_URI")
    if configured:
        yield configured
        return
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    with open(workdir / "server.log", "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
             "--backend-store-uri", f"sqlite:///{workdir / 'mlflow.db'}",
             "--artifacts-destination", str(workdir / "artifacts")],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # its workers share its process group
    try:
        _wait_until_healthy(uri, process, workdir / "server.log")
        yield uri
    finally:
        _stop(process)


def _wait_until_healthy(uri: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"mlflow server exited with status {process.returncode}: "
                               f"{log.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"mlflow server did not answer on {uri} within {STARTUP_SECONDS} s")


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (it and its workers), SIGKILL after 20 s."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=20)
    except ProcessLookupError:
        pass
