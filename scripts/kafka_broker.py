"""A single-node Apache Kafka broker (KRaft) for tests and demos, from Maven Central's jars.

    python scripts/kafka_broker.py start [--dir DIR]   # prints the bootstrap address
    python scripts/kafka_broker.py stop  [--dir DIR]

`start` resolves the pinned broker jars with Maven (scripts/kafka/pom.xml; cached in ~/.m2),
formats a fresh log directory with kafka.tools.StorageTool, starts kafka.Kafka with Java
on two free ports bound to 127.0.0.1, waits until the broker answers, and records
{"pid", "bootstrap"} in DIR/broker.json. `stop` asks the broker to shut down (SIGTERM) and
waits for it. Needs Java 17 and Maven.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
POM = HERE / "kafka" / "pom.xml"
DEFAULT_DIR = Path(os.environ.get("NBSTREAM_BROKER_DIR", "/tmp/nbstream-kafka"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def classpath(directory: Path) -> str:
    target = directory / "classpath.txt"
    subprocess.run(["mvn", "-q", "-B", "-f", str(POM), "dependency:build-classpath",
                    f"-Dmdep.outputFile={target}"], check=True, stdout=subprocess.DEVNULL)
    return target.read_text().strip()


def write_config(directory: Path, broker_port: int, controller_port: int) -> Path:
    config = directory / "server.properties"
    config.write_text("\n".join([
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
        f"listeners=PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{broker_port}",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "inter.broker.listener.name=PLAINTEXT",
        f"log.dirs={directory / 'data'}",
        "num.partitions=1",
        "offsets.topic.replication.factor=1",
        "offsets.topic.num.partitions=4",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "group.initial.rebalance.delay.ms=0",
        "auto.create.topics.enable=true",
        "message.max.bytes=10485760",
        "",
    ]))
    (directory / "log4j.properties").write_text("\n".join([
        "log4j.rootLogger=WARN, file",
        "log4j.appender.file=org.apache.log4j.FileAppender",
        f"log4j.appender.file.File={directory / 'broker.log'}",
        "log4j.appender.file.layout=org.apache.log4j.PatternLayout",
        "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n",
        "",
    ]))
    return config


def wait_until_ready(bootstrap: str, process: subprocess.Popen, timeout: float) -> None:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the broker exited with status {process.returncode}")
        try:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=2000)
            admin.list_topics()
            admin.close()
            return
        except (KafkaError, OSError):
            time.sleep(0.5)
    raise TimeoutError(f"the broker at {bootstrap} did not answer within {timeout:.0f}s")


def start(directory: Path, timeout: float = 120.0) -> dict:
    state_file = directory / "broker.json"
    if state_file.exists():
        stop(directory)
    directory.mkdir(parents=True, exist_ok=True)
    cp = classpath(directory)
    broker_port, controller_port = free_port(), free_port()
    config = write_config(directory, broker_port, controller_port)
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    java = ["java", "-Xms256m", "-Xmx768m", f"-Dlog4j.configuration=file:{directory / 'log4j.properties'}",
            "-cp", cp]
    subprocess.run(java + ["kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config),
                           "--ignore-formatted"], check=True, stdout=subprocess.DEVNULL)
    with open(directory / "broker.out", "wb") as output:
        process = subprocess.Popen(java + ["kafka.Kafka", str(config)], stdout=output, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    bootstrap = f"127.0.0.1:{broker_port}"
    try:
        wait_until_ready(bootstrap, process, timeout)
    except BaseException:
        process.kill()
        raise
    state = {"pid": process.pid, "bootstrap": bootstrap}
    state_file.write_text(json.dumps(state))
    return state


def stop(directory: Path, timeout: float = 30.0) -> None:
    state_file = directory / "broker.json"
    if not state_file.exists():
        return
    pid = json.loads(state_file.read_text())["pid"]
    try:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            os.kill(pid, 0)
            time.sleep(0.2)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    state_file.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"working folder (default {DEFAULT_DIR})")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the broker")
    args = parser.parse_args()
    if args.action == "start":
        print(start(args.dir, args.timeout)["bootstrap"])
    else:
        stop(args.dir)


if __name__ == "__main__":
    sys.exit(main())
