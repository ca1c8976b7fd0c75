"""What the local servers of the tests and demos (scripts/kafka_broker.py, scripts/schema_registry.py)
share: a free port, Maven's resolution of their jars, and ending their process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def maven_classpath(pom: Path, directory: Path, name: str) -> str:
    """The classpath of ``pom``'s dependencies, resolved by Maven (quietly; its log goes to
    DIR/maven.log, the list to DIR/``name``)."""
    target = directory / name
    with open(directory / "maven.log", "wb") as log:
        subprocess.run(["mvn", "-q", "-B", "--no-transfer-progress", "-Dstyle.color=never", "-f", str(pom),
                        "dependency:build-classpath", f"-Dmdep.outputFile={target}"], check=True, stdout=log,
                       stderr=subprocess.STDOUT)
    return target.read_text().strip()


def send_signal(pid: int, sig: int) -> None:
    """``sig`` to ``pid``, if it is still there."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def wait_gone(pid: int, timeout: float) -> bool:
    """Whether ``pid`` ended within ``timeout`` seconds (reaped, if it is our child)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.1)
    return False


def terminate(pid: int, timeout: float) -> None:
    """SIGTERM (after a SIGCONT: a paused process would not act on it), and SIGKILL if ``pid`` has not
    ended within ``timeout`` seconds."""
    send_signal(pid, signal.SIGCONT)
    send_signal(pid, signal.SIGTERM)
    if not wait_gone(pid, timeout):
        send_signal(pid, signal.SIGKILL)
        wait_gone(pid, 30)
