"""A Spark standalone cluster and a Spark Connect server on this machine, started from the pyspark
package (its jars and launch scripts: no Spark download), for the tests, the benchmark and the
recipes of docs/spark.md.

    python scripts/spark_cluster.py python             # prints the executors' Python (made once, cached)
    python scripts/spark_cluster.py start [--workers N] [--cores C] [--memory 1g]   # prints spark://...
    python scripts/spark_cluster.py connect            # prints sc://... (a Spark Connect server, local[1])
    python scripts/spark_cluster.py stop               # stops what start and connect started

Everything binds to 127.0.0.1 on free ports; each process's output and the state file are in
--dir (default /tmp/nbstream-spark). Needs Java 17 and pyspark in the Python that runs this.

The executors' Python is a small virtual environment of its own with numpy, pyarrow and scipy
(the driver's versions, so pip's cache serves them) and no nbstream, made once in
~/.cache/nbstream: as on a real cluster, nbstream arrives by being shipped. The workers and the
Connect server run their Python tasks with it (PYSPARK_PYTHON); a driver chooses it with
``--spark-conf spark.pyspark.python=...`` (or PYSPARK_PYTHON).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: scripts.* import
from scripts.local_process import free_port, terminate  # noqa: E402

DEFAULT_DIR = Path(os.environ.get("NBSTREAM_SPARK_DIR", "/tmp/nbstream-spark"))
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nbstream"
EXECUTOR_PACKAGES = ("numpy", "pyarrow", "scipy")
CONNECT_SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"


def spark_home() -> Path:
    """The pyspark package's folder: its bin/, sbin/ and jars/ are a Spark distribution."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def executor_python() -> Path:
    """The executors' interpreter: a virtual environment of this Python's version with only
    EXECUTOR_PACKAGES, at the driver's versions; made once and kept."""
    return _virtual_environment("executor-python", [f"{name}=={version(name)}" for name in EXECUTOR_PACKAGES])


def bare_python() -> Path:
    """An interpreter of this Python's version with nothing installed (no numpy): the executors'
    Python of a cluster that was never prepared for PySpark's Arrow path."""
    return _virtual_environment("bare-python", [])


def _virtual_environment(name: str, pins: list[str]) -> Path:
    """CACHE/NAME-TAG's interpreter with ``pins`` installed, made whole or not at all."""
    tag = "-".join([f"py{sys.version_info.major}.{sys.version_info.minor}", *(pin.replace("==", "") for pin in pins)])
    home = CACHE / f"{name}-{tag}"
    python = home / "bin" / "python"
    if python.exists():
        return python
    making = home.with_name(f"{home.name}.{os.getpid()}")
    shutil.rmtree(making, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(making)], check=True)  # on the base Python, not this venv
    if pins:
        subprocess.run([str(making / "bin" / "python"), "-m", "pip", "install", "--quiet",
                        "--disable-pip-version-check", *pins], check=True)
    try:
        making.rename(home)  # another process may have made it meanwhile: then keep theirs
    except OSError:
        shutil.rmtree(making, ignore_errors=True)
    return python


def _environment(python: Path) -> dict[str, str]:
    return os.environ | {"SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": str(python)}


def _spawn(arguments: list[str], log: Path, environment: dict[str, str]) -> subprocess.Popen:
    """Start a process in the folder of its ``log`` (never in a checkout, whose nbstream its Python
    tasks would find on their path)."""
    with open(log, "ab") as output:
        return subprocess.Popen(arguments, stdout=output, stderr=subprocess.STDOUT, env=environment,
                                cwd=log.parent, start_new_session=True)


def _wait(ready, process: subprocess.Popen, what: str, log: Path, timeout: float) -> None:
    """Until ``ready()``; RuntimeError if ``process`` ends first, TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with status {process.returncode}; see {log}")
        if ready():
            return
        time.sleep(0.3)
    raise TimeoutError(f"{what} did not start within {timeout:.0f}s; see {log}")


@dataclass
class Cluster:
    """A standalone master with ``workers`` workers of ``cores`` cores and ``memory`` each, and
    optionally a Spark Connect server; ``stop()`` ends them all."""
    directory: Path
    workers: int = 1
    cores: int = 1
    memory: str = "1g"
    master_url: str | None = None
    connect_url: str | None = None
    pids: list[int] = field(default_factory=list)
    python: Path | None = None

    @property
    def state_file(self) -> Path:
        return self.directory / "cluster.json"

    def start(self, timeout: float = 120.0) -> Cluster:
        """Start the master and the workers; return when every worker has registered."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.python = executor_python()
        environment = _environment(self.python) | {"SPARK_DAEMON_MEMORY": "256m"}  # the master's and workers'
        spark_class = str(spark_home() / "bin" / "spark-class")
        port, ui = free_port(), free_port()
        self.master_url = f"spark://127.0.0.1:{port}"
        log = self.directory / "master.out"
        master = _spawn([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                         "--port", str(port), "--webui-port", str(ui)], log, environment)
        self.pids.append(master.pid)
        self._record()
        _wait(lambda: self._alive_workers(ui) is not None, master, "the Spark master", log, timeout)
        for number in range(self.workers):
            work = self.directory / f"worker-{number}"
            work.mkdir(exist_ok=True)
            worker = _spawn([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                             "--cores", str(self.cores), "--memory", self.memory, "--webui-port", str(free_port()),
                             "--work-dir", str(work), self.master_url], self.directory / f"worker-{number}.out",
                            environment)
            self.pids.append(worker.pid)
            self._record()
        _wait(lambda: self._alive_workers(ui) == self.workers, master, "the Spark workers",
              self.directory / "worker-0.out", timeout)
        return self

    @staticmethod
    def _alive_workers(ui: int) -> int | None:
        """How many workers the master counts alive (None: it does not answer yet)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as reply:
                return int(json.load(reply)["aliveworkers"])
        except (OSError, urllib.error.URLError, ValueError, KeyError):
            return None

    def start_connect(self, master: str = "local[1]", timeout: float = 180.0) -> str:
        """Start a Spark Connect server (its tasks run on ``master`` with the executors' Python);
        return its sc:// URL when it accepts sessions."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.python = self.python or executor_python()
        port = free_port()
        log = self.directory / "connect.out"
        submit = str(spark_home() / "bin" / "spark-submit")
        server = _spawn([submit, "--class", CONNECT_SERVER, "--name", "nbstream-connect", "--master", master,
                         "--driver-memory", "1g", "--conf", "spark.ui.enabled=false",
                         "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                         "--conf", f"spark.connect.grpc.binding.port={port}",
                         "--conf", "spark.executorEnv.OPENBLAS_NUM_THREADS=1", "spark-internal"],
                        log, _environment(self.python) | {"SPARK_CONNECT_MODE": "0"})
        self.pids.append(server.pid)
        self.connect_url = f"sc://127.0.0.1:{port}"
        self._record()
        _wait(lambda: _accepts(port), server, "the Spark Connect server", log, timeout)
        return self.connect_url

    def stop(self) -> None:
        """Stop every process started (the last first)."""
        for pid in reversed(self.pids):
            terminate(pid, 20)
        self.pids.clear()
        self.state_file.unlink(missing_ok=True)

    def _record(self) -> None:
        self.state_file.write_text(json.dumps({"pids": self.pids, "master": self.master_url,
                                               "connect": self.connect_url}))

    @classmethod
    def recorded(cls, directory: Path) -> Cluster:
        """The cluster whose processes DIR/cluster.json records (none: an empty one)."""
        cluster = cls(directory)
        if cluster.state_file.exists():
            state = json.loads(cluster.state_file.read_text())
            cluster.pids, cluster.master_url, cluster.connect_url = state["pids"], state["master"], state["connect"]
        return cluster


def _accepts(port: int) -> bool:
    import socket

    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["python", "start", "connect", "stop"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"working folder (default {DEFAULT_DIR})")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--cores", type=int, default=1, help="cores of each worker")
    parser.add_argument("--memory", default="1g", help="memory of each worker")
    args = parser.parse_args()
    if args.action == "python":
        print(executor_python())
        return
    cluster = Cluster.recorded(args.dir)
    if args.action == "stop":
        cluster.stop()
    elif args.action == "start":
        cluster.stop()
        print(Cluster(args.dir, args.workers, args.cores, args.memory).start().master_url)
    else:
        print(cluster.start_connect())


if __name__ == "__main__":
    main()
