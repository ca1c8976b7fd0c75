"""A Confluent-compatible Schema Registry (Apicurio Registry, in memory) for tests and demos, from Maven Central.

    python3 scripts/schema_registry.py start [--dir DIR]   # prints the registry's Confluent-compatible URL
    python3 scripts/schema_registry.py stop  [--dir DIR]

Needs Java 17 and Maven (the pinned archive in scripts/kafka/schema-registry.pom.xml is fetched
once and cached in ~/.m2, and unpacked once beside it in ~/.cache/nbstream); nothing else, not
even the project's virtual environment. `start` picks a free port on 127.0.0.1, starts the
registry, waits until it answers on /apis/ccompat/v7/subjects, and records its port and process
in DIR/registry.json. The ``Registry`` class does the same for tests, and can also pause the
registry (SIGSTOP) and let it go on (SIGCONT), as a stalled server would.

Apicurio differs from Confluent's registry in two ways the tests meet: its default compatibility
is NONE (set BACKWARD on a subject where a test needs it), and it answers HTTP 500 to a config
update given as ``compatibilityLevel``: give ``compatibility``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: scripts.* import
from scripts.local_process import free_port, maven_classpath, send_signal, terminate  # noqa: E402

HERE = Path(__file__).resolve().parent
POM = HERE / "kafka" / "schema-registry.pom.xml"
VERSION = "2.6.13.Final"
RUNNER = f"apicurio-registry-app-{VERSION}-runner.jar"
DEFAULT_DIR = Path(os.environ.get("NBSTREAM_REGISTRY_DIR", "/tmp/nbstream-schema-registry"))
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nbstream" / f"apicurio-registry-{VERSION}"
CONFLUENT_PATH = "/apis/ccompat/v7"




def application(directory: Path) -> Path:
    """The folder holding the registry's runner jar: the archive resolved by Maven (quietly; its
    log goes to DIR/maven.log), unpacked once into CACHE."""
    if (CACHE / RUNNER).exists():
        return CACHE
    archive = Path(maven_classpath(POM, directory, "archive.txt"))
    unpacking = CACHE.with_name(f"{CACHE.name}.{os.getpid()}")
    shutil.rmtree(unpacking, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(unpacking, filter="data")
    try:
        unpacking.rename(CACHE)  # whole or not at all: another process may have unpacked it meanwhile
    except OSError:
        shutil.rmtree(unpacking, ignore_errors=True)
    return CACHE


@dataclass
class Registry:
    """One registry process in ``directory``; its port is chosen on the first start and kept."""
    directory: Path
    port: int | None = None
    pid: int | None = None

    @property
    def url(self) -> str:
        """The Confluent-compatible API's URL (what --schema-registry takes)."""
        return f"http://127.0.0.1:{self.port}{CONFLUENT_PATH}"

    @property
    def state_file(self) -> Path:
        return self.directory / "registry.json"

    # ---- lifecycle ------------------------------------------------------------------------
    def start(self, timeout: float = 120.0) -> Registry:
        """Start an empty registry (it keeps its schemas in memory: nothing survives a stop)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        home = application(self.directory)
        self.port = self.port or free_port()
        environment = os.environ | {"QUARKUS_HTTP_HOST": "127.0.0.1", "QUARKUS_HTTP_PORT": str(self.port)}
        with open(self.directory / "registry.out", "ab") as output:
            process = subprocess.Popen(["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-jar",
                                        str(home / RUNNER)], cwd=self.directory, env=environment, stdout=output,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = process.pid
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"the registry exited with status {process.returncode}; "
                                   f"see {self.directory}/registry.out")
            if self.answers():
                self.state_file.write_text(json.dumps({"pid": self.pid, "port": self.port}))
                return self
            time.sleep(0.2)
        process.kill()
        raise TimeoutError(f"the registry did not start within {timeout:.0f}s; see {self.directory}/registry.out")

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/subjects", timeout=2) as reply:
                return reply.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def pause(self) -> None:
        """SIGSTOP: the registry stops answering, its connections left open."""
        if self.pid is not None:
            send_signal(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT: it answers again, as it was."""
        if self.pid is not None:
            send_signal(self.pid, signal.SIGCONT)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, and SIGKILL if it has not shut down within ``timeout`` seconds."""
        if self.pid is not None:
            terminate(self.pid, timeout)
            self.pid = None
        self.state_file.unlink(missing_ok=True)






def stop_recorded(directory: Path) -> None:
    """Stop the registry recorded in DIR/registry.json, if any."""
    state_file = directory / "registry.json"
    if state_file.exists():
        state = json.loads(state_file.read_text())
        Registry(directory, port=state["port"], pid=state["pid"]).stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"working folder (default {DEFAULT_DIR})")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the registry")
    args = parser.parse_args()
    stop_recorded(args.dir)
    if args.action == "start":
        print(Registry(args.dir).start(args.timeout).url)


if __name__ == "__main__":
    sys.exit(main())
